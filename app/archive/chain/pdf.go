package chain

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/go-pdf/fpdf"
	"golang.org/x/text/encoding/charmap"
)

// pdfMaxRecords bounds the records table, so a report of a million
// records still makes a small PDF (the embedded JSON holds them all).
const pdfMaxRecords = 1000

// RenderPDF renders the report deterministically (same JSON, same bytes):
// the period, counts, checkpoint root hash and size, verifier key and
// verification state as text (monospace for hashes), the holds, the
// records table (the first 1,000 records, then how many more), and the
// JSON itself embedded as an attachment "evidence.json". Its creation and
// modification dates are the report's generatedAt.
func RenderPDF(reportJSON []byte) ([]byte, error) {
	var e Evidence
	if err := json.Unmarshal(reportJSON, &e); err != nil {
		return nil, fmt.Errorf("pdf: not an evidence report: %w", err)
	}
	var cp Checkpoint
	if body, err := noteBody(e.Checkpoint); err == nil {
		cp, _ = ParseCheckpointBody(body)
	}

	pdf := fpdf.New("P", "mm", "A4", "")
	pdf.SetCatalogSort(true)
	gen := e.GeneratedAt.UTC()
	pdf.SetCreationDate(gen)
	pdf.SetModificationDate(gen)
	pdf.SetProducer("Backstop", false)
	pdf.SetCreator("Backstop", false)
	pdf.SetTitle(cp1252("Archive evidence report "+e.TenantID), false)
	pdf.SetMargins(15, 15, 15)
	pdf.SetAutoPageBreak(true, 15)
	pdf.SetAttachments([]fpdf.Attachment{{Content: reportJSON, Filename: "evidence.json",
		Description: "The evidence report this PDF was rendered from (backstop archive verify-evidence)"}})
	pdf.SetFooterFunc(func() {
		pdf.SetY(-12)
		pdf.SetFont("Helvetica", "", 8)
		pdf.CellFormat(0, 5, fmt.Sprintf("Page %d", pdf.PageNo()), "", 0, "C", false, 0, "")
	})
	pdf.AddPage()

	pdf.SetFont("Helvetica", "B", 16)
	pdf.CellFormat(0, 9, "Archive evidence report", "", 1, "L", false, 0, "")
	pdf.SetFont("Helvetica", "", 9)
	pdf.MultiCell(0, 4.5, cp1252("Verify offline with: backstop archive verify-evidence evidence.json --key <verifier key>. "+
		"The report is embedded in this PDF as evidence.json."), "", "L", false)
	pdf.Ln(3)

	section := func(title string) {
		pdf.Ln(2)
		pdf.SetFont("Helvetica", "B", 11)
		pdf.CellFormat(0, 6, cp1252(title), "B", 1, "L", false, 0, "")
		pdf.Ln(1)
	}
	row := func(label, value string, mono bool) {
		pdf.SetFont("Helvetica", "", 9)
		pdf.CellFormat(42, 5, cp1252(label), "", 0, "L", false, 0, "")
		if mono {
			pdf.SetFont("Courier", "", 8)
		}
		pdf.MultiCell(0, 5, cp1252(value), "", "L", false)
	}

	section("Period")
	row("Tenant", e.TenantID, true)
	row("From", pdfTime(e.From), false)
	row("To", pdfTime(e.To), false)
	row("Generated at", pdfTime(e.GeneratedAt), false)

	section("Checkpoint")
	row("Origin", e.Origin, true)
	row("Tree size", fmt.Sprint(cp.Size), true)
	row("Root hash (base64)", base64.StdEncoding.EncodeToString(cp.Root[:]), true)
	row("Root hash (hex)", hex.EncodeToString(cp.Root[:]), true)
	row("Verifier key", e.VerifierKey, true)
	if len(e.CheckpointStamp) > 0 {
		stamp := "present (not checked)"
		body, _ := noteBody(e.Checkpoint)
		if t, err := VerifyStamp(e.CheckpointStamp, []byte(body), nil); err == nil {
			stamp = "RFC 3161, " + pdfTime(t)
		} else {
			stamp = "invalid: " + err.Error()
		}
		row("Time-stamp", stamp, false)
	}
	if e.PreviousCheckpoint != "" {
		if body, err := noteBody(e.PreviousCheckpoint); err == nil {
			if p, err := ParseCheckpointBody(body); err == nil {
				row("Previous checkpoint", fmt.Sprintf("size %d, root %s", p.Size, hex.EncodeToString(p.Root[:])), true)
			}
		}
	}
	if e.FirstIndex >= 0 {
		row("Records", fmt.Sprintf("%d to %d", e.FirstIndex, e.LastIndex), true)
	} else {
		row("Records", "none in the period", false)
	}

	section("Counts")
	row("Messages", fmt.Sprint(e.Counts.Messages), true)
	row("Tombstones", fmt.Sprint(e.Counts.Tombstones), true)
	row("Holds", fmt.Sprint(e.Counts.Holds), true)
	row("Releases", fmt.Sprint(e.Counts.Releases), true)
	row("Bytes", fmt.Sprint(e.Counts.Bytes), true)

	section("Chain verification")
	state := e.Verification.State
	if e.Verification.CheckedAt != nil {
		state += ", checked " + pdfTime(*e.Verification.CheckedAt)
	}
	if e.Verification.JobID != "" {
		state += " (job " + e.Verification.JobID + ")"
	}
	row("State", state, false)

	section("Legal holds")
	if len(e.Holds) == 0 {
		row("", "No hold was active during the period.", false)
	}
	for _, h := range e.Holds {
		v := fmt.Sprintf("%s (%s), created %s, record %d", h.Name, h.ID, pdfTime(h.CreatedAt), h.RecordIndex)
		if h.Matter != "" {
			v += ", matter " + h.Matter
		}
		if h.ReleasedAt != nil {
			v += ", released " + pdfTime(*h.ReleasedAt)
		}
		row("Hold", v, false)
	}

	section("Records")
	widths := []float64{20, 20, 42, 98}
	header := func() {
		pdf.SetFont("Helvetica", "B", 8)
		for i, h := range []string{"Index", "Type", "At (UTC)", "SHA-256"} {
			pdf.CellFormat(widths[i], 5, h, "B", 0, "L", false, 0, "")
		}
		pdf.Ln(-1)
	}
	header()
	pdf.SetFont("Courier", "", 6.5)
	for i, r := range e.Records {
		if i == pdfMaxRecords {
			break
		}
		if pdf.GetY() > 275 {
			pdf.AddPage()
			header()
			pdf.SetFont("Courier", "", 6.5)
		}
		for j, v := range []string{fmt.Sprint(r.Index), r.Type, r.At.UTC().Format(TimeLayout), r.SHA256} {
			pdf.CellFormat(widths[j], 3.6, cp1252(v), "", 0, "L", false, 0, "")
		}
		pdf.Ln(-1)
	}
	if more := len(e.Records) - pdfMaxRecords; more > 0 {
		pdf.SetFont("Helvetica", "I", 8)
		pdf.CellFormat(0, 6, fmt.Sprintf("... and %d more records (all of them are in the embedded evidence.json).", more), "", 1, "L", false, 0, "")
	}

	var out bytes.Buffer
	if err := pdf.Output(&out); err != nil {
		return nil, fmt.Errorf("pdf: %w", err)
	}
	return out.Bytes(), nil
}

func pdfTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// cp1252 turns s into the core fonts' encoding (Windows-1252), one byte a
// rune: a rune it lacks becomes "?", a control character a space. The same
// input always gives the same bytes.
func cp1252(s string) string {
	var b strings.Builder
	enc := charmap.Windows1252
	for _, r := range s {
		switch {
		case r < 0x20 || r == 0x7f:
			b.WriteByte(' ')
		case r < 0x80:
			b.WriteByte(byte(r))
		default:
			if c, ok := enc.EncodeRune(r); ok {
				b.WriteByte(c)
			} else {
				b.WriteByte('?')
			}
		}
	}
	return b.String()
}
