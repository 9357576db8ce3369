package chain

import (
	"bytes"
	"compress/zlib"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"backstop/e2e/tool"
)

func sampleReport(t *testing.T, n int) ([]byte, *Evidence) {
	t.Helper()
	s := testSigner(t)
	l := newMessageLog(n)
	e := l.report(t, s, 0, int64(n-1), int64(n), 0)
	checked := t0.Add(time.Hour)
	e.Verification = Verification{State: "ok", CheckedAt: &checked, JobID: "jb_1"}
	e.Holds = []EvidenceHold{{ID: "hd_1", Name: "Müller v. Smith — “Q3”", Matter: "M-1 ✓", CreatedAt: t0, RecordIndex: 3}}
	return mustJSON(t, e), e
}

func TestRenderPDFIsDeterministicAndEmbedsTheJSON(t *testing.T) {
	js, _ := sampleReport(t, 20)
	a, err := RenderPDF(js)
	if err != nil {
		t.Fatal(err)
	}
	b, err := RenderPDF(js)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("two renderings differ")
	}
	if !bytes.Contains(a, []byte("/Type /EmbeddedFile")) || !bytes.Contains(a, []byte("/EmbeddedFiles")) {
		t.Fatal("no embedded file")
	}
	if got := embeddedFile(t, a); !bytes.Equal(got, js) {
		t.Fatalf("embedded file is not the report (%d bytes, want %d)", len(got), len(js))
	}
}

// embeddedFile inflates the PDF's one /EmbeddedFile stream.
func embeddedFile(t *testing.T, pdf []byte) []byte {
	t.Helper()
	m := regexp.MustCompile(`/Type /EmbeddedFile /Length (\d+)[^\n]*\n+stream\n`).FindSubmatchIndex(pdf)
	if m == nil {
		t.Fatal("no embedded file stream")
	}
	var n int
	fmt.Sscan(string(pdf[m[2]:m[3]]), &n)
	zr, err := zlib.NewReader(bytes.NewReader(pdf[m[1] : m[1]+n]))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRenderPDFShowsRootAndCountsAsText(t *testing.T) {
	pdftotext := tool.RequireTool(t, "pdftotext", "poppler-utils")
	js, e := sampleReport(t, 1200)
	pdf, err := RenderPDF(js)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "r.pdf")
	os.WriteFile(path, pdf, 0o600)
	out, err := exec.Command(pdftotext, "-layout", path, "-").CombinedOutput()
	if err != nil {
		t.Fatalf("pdftotext: %v\n%s", err, out)
	}
	text := string(out)
	body, _ := noteBody(e.Checkpoint)
	cp, _ := ParseCheckpointBody(body)
	for _, want := range []string{
		hex.EncodeToString(cp.Root[:]), cp.Root.String(), e.VerifierKey, e.Origin,
		"Messages", "1200", fmt.Sprint(e.Counts.Bytes), "and 200 more records", "Müller v. Smith",
		"ok, checked", e.Records[999].SHA256,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("PDF text lacks %q", want)
		}
	}
	if strings.Contains(text, e.Records[1000].SHA256) {
		t.Error("PDF lists record 1000")
	}
	t.Logf("%d records: PDF %d bytes (JSON %d)", len(e.Records), len(pdf), len(js))
}
