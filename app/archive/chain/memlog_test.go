package chain

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"
)

// memLog is an in-memory tlog: the records' texts and every stored hash.
type memLog struct {
	texts  [][]byte
	hashes []tlog.Hash
}

func (l *memLog) append(text []byte) {
	h, err := tlog.StoredHashes(int64(len(l.texts)), text, l.reader())
	if err != nil {
		panic(err)
	}
	l.texts = append(l.texts, text)
	l.hashes = append(l.hashes, h...)
}

func (l *memLog) reader() tlog.HashReader {
	return tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			if x < 0 || x >= int64(len(l.hashes)) {
				return nil, fmt.Errorf("no stored hash %d", x)
			}
			out[i] = l.hashes[x]
		}
		return out, nil
	})
}

func (l *memLog) size() int64 { return int64(len(l.texts)) }

func (l *memLog) root(t testing.TB, n int64) tlog.Hash {
	t.Helper()
	h, err := tlog.TreeHash(n, l.reader())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

var t0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

const testTenant = "tn_test"

// messageRecord is the i-th test message: content "message i", captured i
// minutes after t0.
func messageRecord(i int) *Record {
	content := fmt.Appendf(nil, "Subject: %d\r\n\r\nmessage %d\r\n", i, i)
	sum := sha256.Sum256(content)
	return &Record{Type: TypeMessage, Tenant: testTenant, Message: fmt.Sprintf("am_%06d", i),
		SHA256: hex.EncodeToString(sum[:]), Size: int64(len(content)), Channel: "ch_smtp",
		At: t0.Add(time.Duration(i) * time.Minute)}
}

func messageContent(i int) []byte {
	return fmt.Appendf(nil, "Subject: %d\r\n\r\nmessage %d\r\n", i, i)
}

// testSigner is a signer in a temp dir named like an appliance.
func testSigner(t testing.TB) *Signer {
	t.Helper()
	s, err := LoadOrCreateSigner(filepath.Join(t.TempDir(), "archive.key"), "backstop.example.com")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func origin() string { return "backstop.example.com/archive/" + testTenant }

// checkpoint signs the log's tree of size n.
func (l *memLog) checkpoint(t testing.TB, s *Signer, n int64) string {
	t.Helper()
	note, err := s.Sign(Checkpoint{Origin: origin(), Size: n, Root: l.root(t, n)})
	if err != nil {
		t.Fatal(err)
	}
	return note
}

// report builds the evidence report of records [first, last] against the
// checkpoint of size n, with the previous one of size m (0: none).
func (l *memLog) report(t testing.TB, s *Signer, first, last, n, m int64) *Evidence {
	t.Helper()
	e := &Evidence{
		Schema: EvidenceSchema, TenantID: testTenant,
		From: t0, To: t0.Add(1000000 * time.Minute), GeneratedAt: t0.Add(2000000 * time.Minute),
		Origin: origin(), VerifierKey: s.VerifierKey(), Checkpoint: l.checkpoint(t, s, n),
		Verification: Verification{State: "never"},
	}
	if m > 0 {
		e.PreviousCheckpoint = l.checkpoint(t, s, m)
	}
	for i := first; i <= last; i++ {
		e.Records = append(e.Records, EvidenceRecord{Index: i, Record: string(l.texts[i])})
	}
	if err := BuildEvidence(e, n, m, l.reader()); err != nil {
		t.Fatal(err)
	}
	return e
}

func newMessageLog(n int) *memLog {
	l := &memLog{}
	for i := 0; i < n; i++ {
		l.append(messageRecord(i).Marshal())
	}
	return l
}
