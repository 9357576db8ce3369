package archive_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/archive"
	"backstop/app/archive/chain"
)

func mail(from, to, subject, body string) []byte {
	return []byte(fmt.Sprintf("From: %s\r\nTo: %s\r\nSubject: %s\r\nMessage-ID: <%d@example.com>\r\nDate: Mon, 23 Nov 2026 10:00:00 +0000\r\n"+
		"Content-Type: text/plain; charset=utf-8\r\n\r\n%s\r\n", from, to, subject, time.Now().UnixNano(), body))
}

func (f *fixture) ingest(ch *archive.Channel, raw []byte) *archive.Message {
	f.t.Helper()
	m, err := f.svc.Ingest(context.Background(), ch, archive.Envelope{}, bytes.NewReader(raw))
	if err != nil {
		f.t.Fatal(err)
	}
	return m
}

// checkpointed waits until a checkpoint covers every record.
func (f *fixture) checkpointed() {
	f.t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		n, _ := f.db.ArchiveSize(ctx, f.tenant)
		if cp, err := f.db.LatestArchiveCheckpoint(ctx, f.tenant); err == nil && cp.Size == n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	f.t.Fatal("no checkpoint covers the log")
}

// recordsOf returns the tenant's records of a type.
func (f *fixture) recordsOf(typ string) []*chain.Record {
	f.t.Helper()
	ctx := context.Background()
	n, err := f.db.ArchiveSize(ctx, f.tenant)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []*chain.Record
	err = f.db.ArchiveRecords(ctx, f.tenant, 0, n, func(_ int64, text []byte) error {
		r, err := chain.ParseRecord(text)
		if err != nil {
			return err
		}
		if r.Type == typ {
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := app.ErrorCode(err); got != code {
		t.Fatalf("error %v has code %q, want %q", err, got, code)
	}
}

func TestHeldMessageIsNeverPurged(t *testing.T) {
	f := newFixture(t, opts{every: 30 * time.Millisecond})
	ctx := context.Background()
	ch := f.channel()
	heldRaw := mail("alice@example.com", "carol@example.com", "contract", "the signed contract")
	held := f.ingest(ch, heldRaw)
	other := f.ingest(ch, mail("alice@example.com", "dave@other.test", "lunch", "see you"))

	if err := f.svc.SetRetention(ctx, f.tenant, archive.Retention{DefaultDays: 0}); err != nil {
		t.Fatal(err)
	}
	h, err := f.svc.CreateHold(ctx, archive.HoldSpec{TenantID: f.tenant, Name: "Matter 7", Custodians: []string{"Carol@Example.com"}, By: "usr_1"})
	if err != nil {
		t.Fatal(err)
	}
	if h.RecordIndex != 2 || len(f.recordsOf(chain.TypeHold)) != 1 || f.recordsOf(chain.TypeHold)[0].Reason != h.ID+" Matter 7" {
		t.Fatalf("hold record: index %d, %+v", h.RecordIndex, f.recordsOf(chain.TypeHold))
	}
	sum, err := f.svc.Purge(ctx, f.tenant)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Purged != 1 || sum.Held != 1 {
		t.Fatalf("purge = %+v, want 1 purged 1 held", sum)
	}
	if got := f.content(held.ID); !bytes.Equal(got, heldRaw) {
		t.Fatal("held message's content changed")
	}
	if v, err := f.svc.MessageView(ctx, f.tenant, held.ID); err != nil || !v.Held || v.Purged {
		t.Fatalf("held view = %+v, %v", v, err)
	}
	if _, _, err := f.svc.Content(ctx, f.tenant, other.ID); app.ErrorCode(err) != app.EGONE {
		t.Fatalf("purged content: %v, want gone", err)
	}
	if f.spoolHas([]byte("see you")) {
		t.Fatal("the purged message's bytes are still in the spool")
	}
	tombs := f.recordsOf(chain.TypeTombstone)
	if len(tombs) != 1 || tombs[0].Message != other.ID || tombs[0].SHA256 != other.SHA256 || tombs[0].Reason != "retention default 0 days" {
		t.Fatalf("tombstones = %+v", tombs)
	}
	// A second run changes nothing.
	if sum, err := f.svc.Purge(ctx, f.tenant); err != nil || sum.Purged != 0 || sum.Held != 1 {
		t.Fatalf("second purge = %+v, %v", sum, err)
	}

	// Release needs a reason, and happens once.
	_, err = f.svc.ReleaseHold(ctx, f.tenant, h.ID, " ", "usr_1")
	wantCode(t, err, app.EINVALID)
	if _, err := f.svc.ReleaseHold(ctx, f.tenant, h.ID, "matter closed", "usr_1"); err != nil {
		t.Fatal(err)
	}
	_, err = f.svc.ReleaseHold(ctx, f.tenant, h.ID, "again", "usr_1")
	wantCode(t, err, app.ECONFLICT)
	if rel := f.recordsOf(chain.TypeRelease); len(rel) != 1 || rel[0].Reason != h.ID+" Matter 7" {
		t.Fatalf("release records = %+v", rel)
	}
	got, _ := f.svc.Hold(ctx, f.tenant, h.ID)
	if got.ReleasedAt == nil || got.ReleaseReason != "matter closed" || got.ReleaseRecordIndex == nil {
		t.Fatalf("released hold = %+v", got)
	}
	if sum, err := f.svc.Purge(ctx, f.tenant); err != nil || sum.Purged != 1 || sum.Held != 0 {
		t.Fatalf("purge after release = %+v, %v", sum, err)
	}
	if _, _, err := f.svc.Content(ctx, f.tenant, held.ID); app.ErrorCode(err) != app.EGONE {
		t.Fatalf("content after release and purge: %v", err)
	}

	// The chain still verifies: records, checkpoints' consistency, and
	// every purged message has its tombstone.
	f.checkpointed()
	rep, err := f.svc.VerifyChain(ctx, f.tenant, "", nil)
	if err != nil {
		t.Fatalf("verify: %v (%+v)", err, rep)
	}
	if rep.Purged != 2 {
		t.Fatalf("verify report = %+v", rep)
	}
	// And the evidence of the whole period checks offline.
	ev, err := f.svc.Evidence(ctx, f.tenant, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	vr, err := chain.VerifyEvidence(ev, f.signer.VerifierKey(), "")
	if err != nil {
		t.Fatalf("evidence: %v %+v", err, vr)
	}
	// Periods with nothing in them (before and after every record) and one
	// that holds only the hold record prove their edges too.
	for _, p := range [][2]time.Time{{time.Now().Add(-2 * time.Hour), time.Now().Add(-time.Hour)},
		{time.Now().Add(time.Hour), time.Now().Add(2 * time.Hour)}, {h.CreatedAt, h.CreatedAt}} {
		b, err := f.svc.Evidence(ctx, f.tenant, p[0], p[1])
		if err != nil {
			t.Fatalf("evidence %v: %v", p, err)
		}
		if vr, err := chain.VerifyEvidence(b, f.signer.VerifierKey(), ""); err != nil {
			t.Fatalf("evidence %v: %v %+v", p, err, vr)
		}
	}
	if _, err := f.svc.Evidence(ctx, f.tenant, time.Now(), time.Now().Add(-time.Hour)); app.ErrorCode(err) != app.EINVALID {
		t.Fatalf("to before from: %v", err)
	}
	var e chain.Evidence
	json.Unmarshal(ev, &e)
	if e.Counts.Messages != 2 || e.Counts.Tombstones != 2 || e.Counts.Holds != 1 || e.Counts.Releases != 1 || len(e.Holds) != 1 {
		t.Fatalf("evidence counts %+v, holds %d", e.Counts, len(e.Holds))
	}
}

func TestHoldByPeriodQueryAndDomain(t *testing.T) {
	f := newFixture(t, opts{every: time.Hour})
	ctx := context.Background()
	ch := f.channel()
	inv := f.ingest(ch, mail("x@vendor.test", "ap@example.com", "Invoice 42", "please pay the invoice"))
	memo := f.ingest(ch, mail("x@vendor.test", "ap@example.com", "memo", "nothing to see"))
	dom := f.ingest(ch, mail("boss@acme.test", "ap@example.com", "hello", "hi"))
	f.svc.SetRetention(ctx, f.tenant, archive.Retention{DefaultDays: 0})
	future := time.Now().Add(24 * time.Hour)
	if _, err := f.svc.CreateHold(ctx, archive.HoldSpec{TenantID: f.tenant, Name: "later", From: &future}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.CreateHold(ctx, archive.HoldSpec{TenantID: f.tenant, Name: "invoices", Query: "invoice"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.CreateHold(ctx, archive.HoldSpec{TenantID: f.tenant, Name: "acme", Custodians: []string{"@acme.test"}}); err != nil {
		t.Fatal(err)
	}
	_, err := f.svc.CreateHold(ctx, archive.HoldSpec{TenantID: f.tenant, Name: "bad", Custodians: []string{"nobody"}})
	wantCode(t, err, app.EINVALID)
	sum, err := f.svc.Purge(ctx, f.tenant)
	if err != nil || sum.Purged != 1 || sum.Held != 2 {
		t.Fatalf("purge = %+v, %v", sum, err)
	}
	for id, purged := range map[string]bool{inv.ID: false, memo.ID: true, dom.ID: false} {
		v, err := f.svc.MessageView(ctx, f.tenant, id)
		if err != nil || v.Purged != purged || v.Held == purged {
			t.Errorf("%s: %+v, %v; want purged %v", id, v, err, purged)
		}
	}
}

func TestRetentionRules(t *testing.T) {
	f := newFixture(t, opts{every: time.Hour})
	ctx := context.Background()
	ch := f.channel()
	news := f.ingest(ch, mail("news@shop.test", "a@example.com", "Weekly Newsletter", "deals"))
	keep := f.ingest(ch, mail("b@example.com", "a@example.com", "Budget", "numbers"))
	r := archive.Retention{DefaultDays: archive.DefaultRetentionDays, Rules: []archive.RetentionRule{{Days: 0}}}
	r.Rules[0].Match.SubjectContains = "newsletter"
	bad := r
	bad.Rules = []archive.RetentionRule{{Days: -1}}
	wantCode(t, f.svc.SetRetention(ctx, f.tenant, bad), app.EINVALID)
	if err := f.svc.SetRetention(ctx, f.tenant, r); err != nil {
		t.Fatal(err)
	}
	got, isDefault, err := f.svc.RetentionOf(ctx, f.tenant)
	if err != nil || isDefault || len(got.Rules) != 1 || got.Rules[0].Match.SubjectContains != "newsletter" {
		t.Fatalf("retention = %+v %v %v", got, isDefault, err)
	}
	sum, err := f.svc.Purge(ctx, f.tenant)
	if err != nil || sum.Purged != 1 {
		t.Fatalf("purge = %+v, %v", sum, err)
	}
	tombs := f.recordsOf(chain.TypeTombstone)
	if len(tombs) != 1 || tombs[0].Message != news.ID || tombs[0].Reason != "retention rule 1: 0 days" {
		t.Fatalf("tombstones = %+v", tombs)
	}
	if v, _ := f.svc.MessageView(ctx, f.tenant, keep.ID); v.Purged {
		t.Fatal("a message under the 7-year default was purged")
	}
}

func TestSearch(t *testing.T) {
	f := newFixture(t, opts{every: 30 * time.Millisecond})
	ctx := context.Background()
	ch := f.channel()
	var ids []string
	for i := range 25 {
		m := f.ingest(ch, mail("alice@example.com", fmt.Sprintf("u%d@example.com", i%3), fmt.Sprintf("report %d", i), "quarterly numbers for Müller"))
		ids = append(ids, m.ID)
	}
	other := f.ingest(ch, mail("bob@other.test", "x@example.com", "holiday", "beach photos"))

	search := func(q archive.SearchQuery) ([]archive.MessageView, string) {
		t.Helper()
		q.TenantID = f.tenant
		v, next, err := f.svc.Search(ctx, q)
		if err != nil {
			t.Fatalf("search %+v: %v", q, err)
		}
		return v, next
	}
	if v, _ := search(archive.SearchQuery{Q: "beach"}); len(v) != 1 || v[0].ID != other.ID {
		t.Fatalf("q=beach: %+v", v)
	}
	if v, _ := search(archive.SearchQuery{Q: "muller quarterly"}); len(v) != 25 {
		t.Fatalf("diacritics: %d", len(v))
	}
	if v, _ := search(archive.SearchQuery{Q: "quart*"}); len(v) != 25 {
		t.Fatalf("prefix: %d", len(v))
	}
	if v, _ := search(archive.SearchQuery{Custodian: "u1@example.com"}); len(v) != 8 {
		t.Fatalf("custodian: %d", len(v))
	}
	if v, _ := search(archive.SearchQuery{Custodian: "@other.test"}); len(v) != 1 {
		t.Fatalf("custodian domain: %d", len(v))
	}
	if v, _ := search(archive.SearchQuery{ChannelID: "ch_none"}); len(v) != 0 {
		t.Fatalf("channel: %d", len(v))
	}
	past := time.Now().Add(-time.Hour)
	if v, _ := search(archive.SearchQuery{To: &past}); len(v) != 0 {
		t.Fatalf("to: %d", len(v))
	}
	// Paging: newest first, every message once.
	seen := map[string]bool{}
	cursor := ""
	var order []string
	for {
		v, next := search(archive.SearchQuery{Q: "report", Limit: 10, Cursor: cursor})
		for _, m := range v {
			if seen[m.ID] {
				t.Fatalf("%s twice", m.ID)
			}
			seen[m.ID] = true
			order = append(order, m.ID)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if len(order) != 25 || order[0] != ids[24] || order[24] != ids[0] {
		t.Fatalf("paging gave %d, first %s", len(order), order[0])
	}
	// FTS syntax in user text is just text.
	for _, q := range []string{`"`, `subject:report`, `report OR holiday`, `NEAR(report holiday)`, `(`, `*`, `-report`, `report AND`, `^x`, `a"b`} {
		if _, _, err := f.svc.Search(ctx, archive.SearchQuery{TenantID: f.tenant, Q: q}); err != nil {
			t.Errorf("q=%q: %v", q, err)
		}
	}
	if v, _ := search(archive.SearchQuery{Q: "report OR holiday"}); len(v) != 0 {
		t.Fatalf("OR was an operator: %d results", len(v))
	}
	if _, _, err := f.svc.Search(ctx, archive.SearchQuery{TenantID: f.tenant, Cursor: "bogus"}); app.ErrorCode(err) != app.EINVALID {
		t.Fatalf("bad cursor: %v", err)
	}
	// Purged messages are not found.
	f.svc.SetRetention(ctx, f.tenant, archive.Retention{DefaultDays: 0})
	f.svc.Purge(ctx, f.tenant)
	if v, _ := search(archive.SearchQuery{Q: "beach"}); len(v) != 0 {
		t.Fatalf("purged found: %d", len(v))
	}
}

func TestExportZip(t *testing.T) {
	f := newFixture(t, opts{every: 30 * time.Millisecond})
	ctx := context.Background()
	ch := f.channel()
	raws := map[string][]byte{}
	for i := range 3 {
		raw := mail("alice@example.com", "bob@example.com", fmt.Sprintf("deal %d", i), "merger talk")
		m := f.ingest(ch, raw)
		raws[m.SHA256] = raw
	}
	f.ingest(ch, mail("alice@example.com", "bob@example.com", "other", "unrelated"))
	f.checkpointed()
	ex, err := f.svc.PrepareExport(ctx, archive.SearchQuery{TenantID: f.tenant, Q: "merger"})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if n, err := ex.WriteTo(ctx, &buf); err != nil || n != 3 {
		t.Fatalf("export: %d files, %v", n, err)
	}
	zr, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var evidence []byte
	for _, zf := range zr.File {
		rc, _ := zf.Open()
		b, _ := io.ReadAll(rc)
		rc.Close()
		if zf.Name == "evidence.json" {
			evidence = b
			continue
		}
		sha := strings.TrimSuffix(strings.TrimPrefix(zf.Name, "messages/"), ".eml")
		if !bytes.Equal(raws[sha], b) {
			t.Fatalf("%s: bytes differ", zf.Name)
		}
		os.WriteFile(filepath.Join(dir, sha+".eml"), b, 0o600)
	}
	if len(zr.File) != 4 || evidence == nil {
		t.Fatalf("%d files in the zip", len(zr.File))
	}
	// evidence.json covers the result set's period: offline verification
	// with the exported files passes (every .eml has its record).
	vr, err := chain.VerifyEvidence(evidence, f.signer.VerifierKey(), dir)
	if err != nil && !strings.Contains(fmt.Sprint(vr.Problems), "no .eml") {
		t.Fatalf("verify-evidence: %v %+v", err, vr)
	}
	if vr.MessagesFiles != 3 {
		t.Fatalf("verify-evidence matched %d files: %+v", vr.MessagesFiles, vr)
	}
}

// TestEvidenceLarge builds the evidence report of 100,000 message records
// (BACKSTOP_BENCH_ARCHIVE=1; 5,000 otherwise) and its PDF, and reports
// how long each took.
func TestEvidenceLarge(t *testing.T) {
	n := 5_000
	if os.Getenv("BACKSTOP_BENCH_ARCHIVE") != "" {
		n = 100_000
	}
	f := newFixture(t, opts{every: 20 * time.Millisecond})
	ctx := context.Background()
	ch := f.channel()
	// Records straight through the core's append (the intake's path without
	// the spool): what the report reads is the records and their hashes.
	began := time.Now()
	at := time.Now().UTC().Truncate(time.Millisecond)
	for done := 0; done < n; done += 1000 {
		var recs []*chain.Record
		for i := done; i < min(done+1000, n); i++ {
			recs = append(recs, &chain.Record{Type: chain.TypeMessage, Tenant: f.tenant, Message: fmt.Sprintf("am_%026d", i),
				SHA256: fmt.Sprintf("%064x", i), Size: 1000 + int64(i%5000), Channel: ch.ID, At: at})
		}
		if _, err := f.db.AppendArchiveRecords(ctx, f.tenant, recs, nil); err != nil {
			t.Fatal(err)
		}
	}
	f.ingest(ch, mail("a@example.com", "b@example.com", "last", "one real message wakes the checkpointer"))
	f.checkpointed()
	t.Logf("appended %d records in %s", n+1, time.Since(began).Round(time.Millisecond))

	began = time.Now()
	ev, err := f.svc.Evidence(ctx, f.tenant, at.Add(-time.Minute), time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	jsonTook := time.Since(began)
	var e chain.Evidence
	if err := json.Unmarshal(ev, &e); err != nil {
		t.Fatal(err)
	}
	if e.Counts.Messages != int64(n+1) || len(e.Records) != n+1 {
		t.Fatalf("evidence counts %+v, %d records", e.Counts, len(e.Records))
	}
	began = time.Now()
	if _, err := chain.VerifyEvidence(ev, f.signer.VerifierKey(), ""); err != nil {
		t.Fatal(err)
	}
	verifyTook := time.Since(began)
	began = time.Now()
	pdf, pdfErr := archive.EvidencePDF(ev)
	pdfTook := time.Since(began)
	t.Logf("evidence of %d records: JSON %s (%d bytes), offline verify %s, PDF %s (%d bytes, err %v)",
		n+1, jsonTook.Round(time.Millisecond), len(ev), verifyTook.Round(time.Millisecond), pdfTook.Round(time.Millisecond), len(pdf), pdfErr)
	if n == 100_000 && jsonTook > 10*time.Second {
		t.Errorf("evidence JSON took %s, over 10 s", jsonTook)
	}
}
