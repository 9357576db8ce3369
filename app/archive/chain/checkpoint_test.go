package chain

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

func TestSignerKeyFileAndCheckpointRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "archive.key")
	s, err := LoadOrCreateSigner(path, "backstop.example.com")
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, want 0600", fi.Mode().Perm())
	}
	b, _ := os.ReadFile(path)
	if !strings.HasPrefix(string(b), "PRIVATE+KEY+backstop.example.com+") {
		t.Fatalf("key file holds %q", b)
	}
	if !strings.HasPrefix(s.VerifierKey(), "backstop.example.com+") {
		t.Fatalf("verifier key %q", s.VerifierKey())
	}
	// Loading again (even under a new name) keeps the key.
	s2, err := LoadOrCreateSigner(path, "other.example.com")
	if err != nil {
		t.Fatal(err)
	}
	if s2.VerifierKey() != s.VerifierKey() {
		t.Fatalf("reload changed the key")
	}

	l := newMessageLog(5)
	c := Checkpoint{Origin: origin(), Size: 5, Root: l.root(t, 5)}
	if c.Body() != origin()+"\n5\n"+strings.TrimSuffix(strings.SplitN(c.Body(), "\n", 3)[2], "\n")+"\n" {
		t.Fatalf("body %q", c.Body())
	}
	signed, err := s.Sign(c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(signed, c.Body()+"\n— backstop.example.com ") {
		t.Fatalf("signed note %q", signed)
	}
	got, err := OpenCheckpoint(signed, s.VerifierKey(), origin())
	if err != nil {
		t.Fatal(err)
	}
	if got != c {
		t.Fatalf("opened %+v, want %+v", got, c)
	}
	if _, err := OpenCheckpoint(signed, s.VerifierKey(), "elsewhere/archive/tn_x"); err == nil {
		t.Fatal("wrong origin accepted")
	}
	if _, err := OpenCheckpoint(signed, testSigner(t).VerifierKey(), ""); err == nil {
		t.Fatal("another key accepted")
	}
	tampered := strings.Replace(signed, "\n5\n", "\n6\n", 1)
	if _, err := OpenCheckpoint(tampered, s.VerifierKey(), ""); err == nil {
		t.Fatal("tampered size accepted")
	}
}

func TestParseCheckpointBodyIsStrict(t *testing.T) {
	good := Checkpoint{Origin: "o", Size: 3, Root: tlog.RecordHash([]byte("x"))}.Body()
	if _, err := ParseCheckpointBody(good); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"extension line": good + "ext\n",
		"no newline":     strings.TrimSuffix(good, "\n"),
		"leading zero":   strings.Replace(good, "\n3\n", "\n03\n", 1),
		"negative":       strings.Replace(good, "\n3\n", "\n-3\n", 1),
		"empty origin":   strings.TrimPrefix(good, "o"),
		"short root":     "o\n3\nAAAA\n",
	} {
		if _, err := ParseCheckpointBody(body); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

// A log rolled back to an older state (or rewritten after it) is caught
// by a newer checkpoint seen before.
func TestCheckConsistentCatchesARollback(t *testing.T) {
	s := testSigner(t)
	l := newMessageLog(12)
	c5, c8, c12 := l.checkpoint(t, s, 5), l.checkpoint(t, s, 8), l.checkpoint(t, s, 12)
	p, err := tlog.ProveTree(12, 5, l.reader())
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckConsistent(c5, c12, s.VerifierKey(), p); err != nil {
		t.Fatalf("genuine growth: %v", err)
	}
	if err := CheckConsistent(c12, c8, s.VerifierKey(), nil); err == nil {
		t.Fatal("a smaller checkpoint after a larger one passed")
	}

	// Rolled back to 5, then 7 other records appended: size 12 again, other root.
	forged := &memLog{}
	for i := 0; i < 5; i++ {
		forged.append(l.texts[i])
	}
	for i := 100; i < 107; i++ {
		forged.append(messageRecord(i).Marshal())
	}
	f12 := forged.checkpoint(t, s, 12)
	pf, err := tlog.ProveTree(12, 8, forged.reader())
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckConsistent(c8, f12, s.VerifierKey(), pf); err == nil {
		t.Fatal("the rewritten log is consistent with the checkpoint seen before the rollback")
	}
	// It is consistent with what it kept.
	pf5, _ := tlog.ProveTree(12, 5, forged.reader())
	if err := CheckConsistent(c5, f12, s.VerifierKey(), pf5); err != nil {
		t.Fatalf("common prefix: %v", err)
	}

	var fork *ForkError
	err = DetectFork([]string{c5, c8, c12, f12}, s.VerifierKey())
	if !errors.As(err, &fork) || fork.Size != 12 {
		t.Fatalf("DetectFork = %v, want a fork at size 12", err)
	}
	if err := DetectFork([]string{c5, c8, c12, c12}, s.VerifierKey()); err != nil {
		t.Fatalf("no fork: %v", err)
	}
}
