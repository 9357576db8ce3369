package chain

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"
)

func TestRangeRootMatchesTreeHashForEveryRange(t *testing.T) {
	l := newMessageLog(40)
	for n := int64(1); n <= 40; n++ {
		root := l.root(t, n)
		for first := int64(0); first < n; first++ {
			for last := first; last < n; last++ {
				p, err := ProveRange(first, last, n, l.reader())
				if err != nil {
					t.Fatal(err)
				}
				rr, err := newRangeRoot(first, last, n, p)
				if err != nil {
					t.Fatal(err)
				}
				for i := first; i <= last; i++ {
					rr.leaf(LeafHash(l.texts[i]))
				}
				got, err := rr.root()
				if err != nil {
					t.Fatal(err)
				}
				if got != root {
					t.Fatalf("n=%d [%d,%d]: root %v, want %v", n, first, last, got, root)
				}
			}
		}
	}
}

func mustJSON(t testing.TB, e *Evidence) []byte {
	t.Helper()
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// verifyFails checks that VerifyEvidence finds a problem containing want.
func verifyFails(t *testing.T, e *Evidence, key, dir, want string) {
	t.Helper()
	vr, err := VerifyEvidence(mustJSON(t, e), key, dir)
	if err == nil {
		t.Fatalf("verified; want a problem with %q", want)
	}
	for _, p := range vr.Problems {
		if strings.Contains(p, want) {
			return
		}
	}
	t.Fatalf("problems %q; want one with %q", vr.Problems, want)
}

func TestVerifyEvidenceAcceptsAGenuineReport(t *testing.T) {
	s := testSigner(t)
	l := newMessageLog(30)
	l.append((&Record{Type: TypeHold, Tenant: testTenant, At: t0.Add(30 * time.Minute), Reason: "hd_1 Smith"}).Marshal())
	l.append((&Record{Type: TypeTombstone, Tenant: testTenant, Message: "am_000003", SHA256: messageRecord(3).SHA256, At: t0.Add(31 * time.Minute), Reason: "default"}).Marshal())
	l.append((&Record{Type: TypeRelease, Tenant: testTenant, At: t0.Add(32 * time.Minute), Reason: "hd_1 Smith"}).Marshal())
	for i := 33; i < 40; i++ {
		l.append(messageRecord(i).Marshal())
	}
	e := l.report(t, s, 2, 35, 40, 2)
	if e.Counts != (EvidenceCounts{Messages: 31, Tombstones: 1, Holds: 1, Releases: 1, Bytes: e.Counts.Bytes}) || e.Counts.Bytes == 0 {
		t.Fatalf("counts %+v", e.Counts)
	}
	if len(e.RangeProof) == 0 || len(e.ConsistencyProof) == 0 {
		t.Fatalf("proofs: range %d, consistency %d hashes", len(e.RangeProof), len(e.ConsistencyProof))
	}
	vr, err := VerifyEvidence(mustJSON(t, e), s.VerifierKey(), "")
	if err != nil {
		t.Fatalf("%v: %q", err, vr.Problems)
	}
	if vr.Records != 34 {
		t.Fatalf("proved %d records, want 34", vr.Records)
	}

	// --messages: one .eml per message record of the report (am_000003 is
	// tombstoned, so it needs none), in subdirectories.
	dir := t.TempDir()
	for i := 2; i <= 35; i++ {
		if i == 3 || i >= 30 && i < 33 {
			continue
		}
		sub := filepath.Join(dir, "box"+string(rune('a'+i%3)))
		os.MkdirAll(sub, 0o755)
		if err := os.WriteFile(filepath.Join(sub, messageRecord(i).Message+".eml"), messageContent(i), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	vr, err = VerifyEvidence(mustJSON(t, e), "", dir)
	if err != nil {
		t.Fatalf("%v: %q", err, vr.Problems)
	}
	if vr.MessagesFiles != 30 {
		t.Fatalf("matched %d files, want 30", vr.MessagesFiles)
	}

	// Attack: a changed message file.
	p := filepath.Join(dir, "boxb", "am_000007.eml")
	if err := os.WriteFile(p, []byte("Subject: 7\r\n\r\nmessage 8\r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	verifyFails(t, e, "", dir, "matches no message record")
	verifyFails(t, e, "", dir, "am_000007")
	// A missing one.
	os.Remove(p)
	verifyFails(t, e, "", dir, "am_000007 (sha256")
}

func TestVerifyEvidenceDetectsTampering(t *testing.T) {
	s := testSigner(t)
	l := newMessageLog(50)
	genuine := func() *Evidence { return l.report(t, s, 10, 40, 50, 20) }

	t.Run("changed byte in a record", func(t *testing.T) {
		e := genuine()
		e.Records[5].Record = strings.Replace(e.Records[5].Record, "size ", "size 1", 1)
		verifyFails(t, e, s.VerifierKey(), "", "do not hash to the checkpoint's root")
	})
	t.Run("changed field only", func(t *testing.T) {
		e := genuine()
		e.Records[5].SHA256 = strings.Repeat("0", 64)
		verifyFails(t, e, s.VerifierKey(), "", "differ from its text")
	})
	t.Run("deleted record", func(t *testing.T) {
		e := genuine()
		e.Records = append(e.Records[:7], e.Records[8:]...)
		for i := range e.Records {
			e.Records[i].Index = e.FirstIndex + int64(i)
		}
		e.LastIndex--
		e.Counts.Messages--
		e.Counts.Bytes -= messageRecord(17).Size
		verifyFails(t, e, s.VerifierKey(), "", "range proof")
		// With the proof of a range one shorter: the root differs.
		e.RangeProof, _ = ProveRange(10, 39, 50, l.reader())
		verifyFails(t, e, s.VerifierKey(), "", "do not hash to the checkpoint's root")
	})
	t.Run("reordered records", func(t *testing.T) {
		e := genuine()
		e.Records[3].Record, e.Records[4].Record = e.Records[4].Record, e.Records[3].Record
		e.Records[3].At, e.Records[4].At = e.Records[4].At, e.Records[3].At
		e.Records[3].SHA256, e.Records[4].SHA256 = e.Records[4].SHA256, e.Records[3].SHA256
		verifyFails(t, e, s.VerifierKey(), "", "do not hash to the checkpoint's root")
	})
	t.Run("index gap", func(t *testing.T) {
		e := genuine()
		e.Records[3].Index = 99
		verifyFails(t, e, s.VerifierKey(), "", "contiguous")
	})
	t.Run("counts", func(t *testing.T) {
		e := genuine()
		e.Counts.Tombstones = 2
		verifyFails(t, e, s.VerifierKey(), "", "counts")
	})
	t.Run("record outside the period", func(t *testing.T) {
		e := genuine()
		e.From = t0.Add(15 * time.Minute)
		verifyFails(t, e, s.VerifierKey(), "", "outside the period")
	})
	t.Run("another key", func(t *testing.T) {
		other := testSigner(t)
		verifyFails(t, genuine(), other.VerifierKey(), "", "is not the pinned key")
		e := l.report(t, other, 10, 40, 50, 20)
		verifyFails(t, e, s.VerifierKey(), "", "checkpoint:")
	})
	t.Run("bad consistency proof", func(t *testing.T) {
		e := genuine()
		e.ConsistencyProof[0] = tlog.Hash{}
		verifyFails(t, e, s.VerifierKey(), "", "previous checkpoint")
	})
}

// The operator holds the key and can sign anything: inserting a back-dated
// record rewrites the tree, which the genuine checkpoint and the earlier
// checkpoint an auditor kept both expose.
func TestVerifyEvidenceDetectsABackdatedInsertion(t *testing.T) {
	s := testSigner(t)
	l := newMessageLog(50)
	prev := l.checkpoint(t, s, 30) // published before the forgery
	genuine := l.report(t, s, 10, 40, 50, 30)

	forged := &memLog{}
	for i := 0; i < 50; i++ {
		if i == 20 {
			r := messageRecord(1000)
			r.At = t0.Add(19*time.Minute + 30*time.Second) // back-dated between 19 and 20
			forged.append(r.Marshal())
		}
		forged.append(l.texts[i])
	}

	// The forged records against the genuine checkpoint: wrong root.
	e := forged.report(t, s, 10, 41, 51, 30)
	e.Checkpoint = genuine.Checkpoint
	e.RangeProof = genuine.RangeProof // the forger cannot make any proof fit
	verifyFails(t, e, s.VerifierKey(), "", "range proof has")
	e.LastIndex, e.Records = 40, append(e.Records[:30:30], e.Records[31])
	e.Records[30].Index = 40
	verifyFails(t, e, s.VerifierKey(), "", "do not hash to the checkpoint's root")

	// A re-signed forged checkpoint verifies on its own …
	e = forged.report(t, s, 10, 41, 51, 0)
	if _, err := VerifyEvidence(mustJSON(t, e), s.VerifierKey(), ""); err != nil {
		t.Fatalf("self-consistent forgery should verify alone: %v", err)
	}
	// … but not against the checkpoint published before it.
	e.PreviousCheckpoint = prev
	e.ConsistencyProof, _ = tlog.ProveTree(51, 30, forged.reader())
	verifyFails(t, e, s.VerifierKey(), "", "not consistent")
	if err := CheckConsistent(prev, e.Checkpoint, s.VerifierKey(), e.ConsistencyProof); err == nil {
		t.Fatal("CheckConsistent passed the forgery")
	}
}

func TestBuildEvidenceWithoutRecords(t *testing.T) {
	s := testSigner(t)
	l := newMessageLog(5)
	e := &Evidence{Schema: EvidenceSchema, TenantID: testTenant, From: t0, To: t0, Origin: origin(),
		VerifierKey: s.VerifierKey(), Checkpoint: l.checkpoint(t, s, 5)}
	if err := BuildEvidence(e, 5, 0, l.reader()); err != nil {
		t.Fatal(err)
	}
	if e.FirstIndex != -1 || e.LastIndex != -1 {
		t.Fatalf("indices %d %d", e.FirstIndex, e.LastIndex)
	}
	b := mustJSON(t, e)
	if !strings.Contains(string(b), `"records":[]`) || !strings.Contains(string(b), `"consistencyProof":[]`) {
		t.Fatalf("json %s", b)
	}
	if vr, err := VerifyEvidence(b, "", ""); err != nil {
		t.Fatalf("%v %q", err, vr.Problems)
	}
	if err := BuildEvidence(e, 6, 0, l.reader()); err == nil {
		t.Fatal("size mismatch accepted")
	}
}
