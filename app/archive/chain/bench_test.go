package chain

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"
)

var (
	bigLogOnce sync.Once
	bigLog     *memLog
)

// millionLog is a log of 1,000,000 message records, built once.
func millionLog(b *testing.B) *memLog {
	bigLogOnce.Do(func() {
		start := time.Now()
		bigLog = newMessageLog(1_000_000)
		b.Logf("built a log of 1,000,000 records in %v", time.Since(start))
	})
	return bigLog
}

// Offline verification of a 1,000,000-record report (goal: < 5 s).
func BenchmarkVerifyEvidence1M(b *testing.B) {
	l := millionLog(b)
	s := testSigner(b)
	e := l.report(b, s, 0, l.size()-1, l.size(), 500_000)
	js, err := json.Marshal(e)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("report: %d records, %d MB of JSON, range proof %d hashes", len(e.Records), len(js)>>20, len(e.RangeProof))
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		vr, err := VerifyEvidence(js, s.VerifierKey(), "")
		if err != nil || vr.Records != 1_000_000 {
			b.Fatalf("%v %q", err, vr.Problems)
		}
		b.Logf("VerifyEvidence of 1,000,000 records: %v", time.Since(start))
	}
}

// One inclusion proof check in a tree of 1,000,000 (goal: < 1 ms).
func BenchmarkCheckRecord1M(b *testing.B) {
	l := millionLog(b)
	n := l.size()
	th := l.root(b, n)
	p, err := tlog.ProveRecord(n, 654_321, l.reader())
	if err != nil {
		b.Fatal(err)
	}
	leaf := LeafHash(l.texts[654_321])
	b.ResetTimer()
	for b.Loop() {
		if err := tlog.CheckRecord(p, n, th, 654_321, leaf); err != nil {
			b.Fatal(err)
		}
	}
}

// BuildEvidence and JSON encoding of 100,000 records (goal: < 10 s), then
// the PDF.
func BenchmarkBuildEvidence100k(b *testing.B) {
	l := newMessageLog(150_000)
	s := testSigner(b)
	cp := l.checkpoint(b, s, l.size())
	prev := l.checkpoint(b, s, 20_000)
	for b.Loop() {
		start := time.Now()
		e := &Evidence{Schema: EvidenceSchema, TenantID: testTenant, From: t0, To: t0.Add(1e6 * time.Minute),
			GeneratedAt: t0, Origin: origin(), VerifierKey: s.VerifierKey(), Checkpoint: cp, PreviousCheckpoint: prev}
		for i := int64(25_000); i < 125_000; i++ {
			e.Records = append(e.Records, EvidenceRecord{Index: i, Record: string(l.texts[i])})
		}
		if err := BuildEvidence(e, l.size(), 20_000, l.reader()); err != nil {
			b.Fatal(err)
		}
		js, err := json.Marshal(e)
		if err != nil {
			b.Fatal(err)
		}
		built := time.Since(start)
		start = time.Now()
		pdf, err := RenderPDF(js)
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("BuildEvidence + JSON of 100,000 records: %v (%d MB); RenderPDF: %v (%d KB)",
			built, len(js)>>20, time.Since(start), len(pdf)>>10)
	}
}
