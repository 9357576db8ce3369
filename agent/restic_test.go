package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// restic 0.17+ has distinct exit codes; 0.14 exits 1 and says why on stderr.
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name   string
		exit   int
		stderr string
		step   string
		want   string
	}{
		{"0.14 wrong password", 1, "Fatal: wrong password or no key found\n", "backup", "restic.wrong_password"},
		{"0.17 wrong password", 12, "Fatal: wrong password or no key found\n", "backup", "restic.wrong_password"},
		{"0.14 missing repository", 1, "Fatal: unable to open config file: <config/> does not exist\nIs there a repository at the following location?\nrest:http://ep_x:***@h/", "prepare", "restic.repository_missing"},
		{"0.17 missing repository", 10, "Fatal: repository does not exist", "backup", "restic.repository_missing"},
		{"0.14 locked", 1, "unable to create lock in backend: repository is already locked by PID 12", "backup", "restic.lock_failed"},
		{"0.17 locked", 11, "", "backup", "restic.lock_failed"},
		{"refused credentials", 1, "Fatal: unable to open config file: unexpected HTTP response (401): 401 Unauthorized\nIs there a repository at the following location?", "prepare", "restic.repository_refused"},
		{"disk full", 1, "Save(<data/1234>) returned error: server response unexpected: 507 Insufficient Storage", "backup", "storage.full"},
		{"no source", 1, "Fatal: all target directories/files do not exist", "backup", "restic.source_missing"},
		{"unreachable", 1, "dial tcp 127.0.0.1:1: connect: connection refused", "backup", "restic.repository_unreachable"},
		{"other backup", 2, "panic: oops", "backup", "agent.backup_failed"},
		{"other restore", 1, "something else", "restore", "agent.restore_failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := classify(tc.exit, tc.stderr, tc.step)
			if f.Code != tc.want || f.ExitCode != tc.exit || f.Step != tc.step || f.Message == "" {
				t.Fatalf("classify = %+v, want code %s", f, tc.want)
			}
		})
	}
}

func TestRepositoryURLAndRedaction(t *testing.T) {
	got := repositoryURL("rest:https://backup.example.com/agent/restic/ep_1/", "ep_1", "s3cr#t")
	if got != "rest:https://ep_1:s3cr%23t@backup.example.com/agent/restic/ep_1/" {
		t.Fatalf("repositoryURL = %s", got)
	}
	if out := tail("Fatal: open rest:https://ep_1:s3cret@backup.example.com/x failed"); strings.Contains(out, "s3cret") {
		t.Fatalf("secret not redacted: %s", out)
	}
}

// Files that change during the run are never sampled.
func TestSampleSkipsChangedFiles(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"keep1", "keep2", "changes", "skip.tmp"} {
		os.WriteFile(filepath.Join(dir, n), []byte("content of "+n), 0o644)
	}
	cands := sampleCandidates([]string{dir}, []string{"*.tmp"}, 10)
	if len(cands) != 3 {
		t.Fatalf("candidates: %+v", cands)
	}
	later := time.Now().Add(time.Minute)
	os.Chtimes(filepath.Join(dir, "changes"), later, later) // "modified while restic read it"
	got := sampleFiles(cands, 10)
	if len(got) != 2 {
		t.Fatalf("samples: %+v", got)
	}
	for _, s := range got {
		if strings.HasSuffix(s.Path, "changes") || len(s.SHA256) != 64 || s.Size == 0 {
			t.Fatalf("bad sample %+v", s)
		}
	}
	if n := len(sampleFiles(sampleCandidates([]string{dir}, nil, 1), 1)); n != 1 {
		t.Fatalf("want exactly 1 sample, got %d", n)
	}
}
