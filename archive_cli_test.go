package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/archive/chain"

	"golang.org/x/mod/sumdb/tlog"
)

// writeEvidence builds a five-message log signed with the data directory's
// archive key and writes the report of all of it and the messages' .eml
// files.
func writeEvidence(t *testing.T, dataDir string) (reportPath, emlDir string) {
	t.Helper()
	s, err := loadArchiveSigner(app.Config{DataDir: dataDir, PublicURL: "https://backstop.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	var hashes []tlog.Hash
	hr := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			out[i] = hashes[x]
		}
		return out, nil
	})
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	emlDir = t.TempDir()
	e := &chain.Evidence{Schema: chain.EvidenceSchema, TenantID: "tn_1", From: t0, To: t0.Add(time.Hour),
		GeneratedAt: t0.Add(2 * time.Hour), Origin: "backstop.example.com/archive/tn_1", VerifierKey: s.VerifierKey()}
	for i := 0; i < 5; i++ {
		content := fmt.Appendf(nil, "Subject: %d\r\n\r\nbody\r\n", i)
		sum := sha256.Sum256(content)
		os.WriteFile(filepath.Join(emlDir, fmt.Sprintf("%d.eml", i)), content, 0o600)
		r := &chain.Record{Type: chain.TypeMessage, Tenant: "tn_1", Message: fmt.Sprintf("am_%d", i),
			SHA256: hex.EncodeToString(sum[:]), Size: int64(len(content)), Channel: "ch_1", At: t0.Add(time.Duration(i) * time.Minute)}
		text := r.Marshal()
		h, err := tlog.StoredHashes(int64(i), text, hr)
		if err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, h...)
		e.Records = append(e.Records, chain.EvidenceRecord{Index: int64(i), Record: string(text)})
	}
	root, _ := tlog.TreeHash(5, hr)
	e.Checkpoint, _ = s.Sign(chain.Checkpoint{Origin: e.Origin, Size: 5, Root: root})
	if err := chain.BuildEvidence(e, 5, 0, hr); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(e)
	reportPath = filepath.Join(t.TempDir(), "evidence.json")
	os.WriteFile(reportPath, b, 0o600)
	return reportPath, emlDir
}

func TestArchiveKeyAndVerifyEvidenceCommands(t *testing.T) {
	dataDir := t.TempDir()
	key, stderr, err := runCommand([]string{"admin", "archive-key", "--data-dir", dataDir}, nil)
	if err != nil {
		t.Fatalf("archive-key: %v\n%s", err, stderr)
	}
	key = strings.TrimSpace(key)
	if fi, err := os.Stat(filepath.Join(dataDir, "archive.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	again, _, _ := runCommand([]string{"admin", "archive-key", "--data-dir", dataDir}, nil)
	if strings.TrimSpace(again) != key {
		t.Fatalf("archive-key changed: %q then %q", key, again)
	}

	report, eml := writeEvidence(t, dataDir)
	out, _, err := runCommand([]string{"archive", "verify-evidence", report, "--messages", eml, "--key", key}, nil)
	if err != nil || !strings.Contains(out, "records proven: 5") || !strings.Contains(out, "message files matched: 5") || !strings.HasSuffix(out, "OK\n") {
		t.Fatalf("verify-evidence: %v\n%s", err, out)
	}

	// A changed message file and a wrong pinned key: exit 1, problems listed.
	os.WriteFile(filepath.Join(eml, "2.eml"), []byte("Subject: 2\r\n\r\nBODY\r\n"), 0o600)
	out, _, err = runCommand([]string{"archive", "verify-evidence", "--messages", eml, report}, nil)
	if err == nil || exitCode(err) != 1 || !strings.Contains(out, "FAILED") || !strings.Contains(out, "2.eml") {
		t.Fatalf("verify-evidence with a changed file: %v\n%s", err, out)
	}
	otherSigner, err := chain.LoadOrCreateSigner(filepath.Join(t.TempDir(), "archive.key"), "other.example.com")
	if err != nil {
		t.Fatal(err)
	}
	other := otherSigner.VerifierKey()
	out, _, err = runCommand([]string{"archive", "verify-evidence", report, "--key", other}, nil)
	if err == nil || !strings.Contains(out, "pinned key") {
		t.Fatalf("verify-evidence with another key: %v\n%s", err, out)
	}
	if _, _, err := runCommand([]string{"archive", "verify-evidence"}, nil); exitCode(err) != 2 {
		t.Fatalf("no file: %v", err)
	}
}
