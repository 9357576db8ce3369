package resticrepo

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestAgentBackupAndAppliancePruneExcludeEachOther: the appliance's
// retention prunes an endpoint's repository locally (restic's exclusive
// lock) while the agent backs up through the repository server (restic's
// shared lock, written to and listed from locks/ by the server). Whichever
// comes second fails cleanly with restic's lock error and succeeds when
// retried; the repository checks clean after.
func TestAgentBackupAndAppliancePruneExcludeEachOther(t *testing.T) {
	e := newTestEnv(t, Options{})
	id, secret := e.endpoint()
	agent := newRestic(t, "rest:http://"+id+":"+secret+"@"+e.srv.Listener.Addr().String()+PathPrefix+id+"/")
	appliance := newRestic(t, filepath.Join(e.dir, id)) // the same password, as agent/keys/<id> holds it
	repo := filepath.Join(e.dir, id)

	// Several snapshots of changing data: a prune has packs to drop and
	// repack.
	src := t.TempDir()
	agent.must("init")
	for i := 0; i < 4; i++ {
		writeRandomTree(t, filepath.Join(src, "round"+string(rune('0'+i))), 20, 256<<10)
		agent.must("backup", src)
		removeHalf(t, src)
	}
	prune := []string{"forget", "--prune", "--group-by", "host", "--keep-last", "1"}

	// 1. A backup in progress through the server holds its lock (restic
	// reading stdin keeps it until stdin closes): the prune is refused at
	// once and changes nothing.
	cmd := exec.Command(agent.bin, "--no-cache", "-r", agent.repo, "backup", "--stdin", "--stdin-filename", "dump.sql")
	cmd.Env = []string{"HOME=" + agent.home, "RESTIC_PASSWORD=correct horse battery staple", "PATH=/usr/bin:/bin"}
	stdin, err := cmd.StdinPipe()
	must(t, err)
	must(t, cmd.Start())
	waitForLock(t, repo, cmd)
	before := appliance.snapshots()
	_, err = appliance.run(prune...)
	if err == nil || !strings.Contains(err.Error(), "repository is already locked") {
		t.Fatalf("prune during a backup: %v, want restic's lock error", err)
	}
	if got := appliance.snapshots(); len(got) != len(before) {
		t.Fatalf("the refused prune changed the snapshots: %d -> %d", len(before), len(got))
	}
	_, _ = stdin.Write([]byte("a database dump\n"))
	must(t, stdin.Close())
	must(t, cmd.Wait())
	appliance.must(prune...) // the retry
	if got := appliance.snapshots(); len(got) != 1 {
		t.Fatalf("after the retried prune %d snapshots, want 1", len(got))
	}

	// 2. Both at once, each retried on restic's lock error as the agent's
	// run (restic.lock_failed) and retention (retention.repository_locked)
	// are: both end well, in whichever order.
	for i := 0; i < 3; i++ {
		writeRandomTree(t, filepath.Join(src, "again"+string(rune('0'+i))), 20, 256<<10)
		agent.must("backup", src)
		removeHalf(t, src)
	}
	writeRandomTree(t, filepath.Join(src, "concurrent"), 20, 256<<10)
	var wg sync.WaitGroup
	var lockErrors sync.Map
	retried := func(name string, r *restic, args ...string) {
		defer wg.Done()
		for attempt := 1; ; attempt++ {
			_, err := r.run(args...)
			if err == nil {
				return
			}
			if !strings.Contains(err.Error(), "locked") || attempt == 50 {
				t.Errorf("%s attempt %d: %v", name, attempt, err)
				return
			}
			lockErrors.Store(name, attempt)
			time.Sleep(50 * time.Millisecond) // the retry's backoff, not a synchronisation
		}
	}
	wg.Add(2)
	go retried("prune", appliance, prune...)
	go retried("backup", agent, "backup", src)
	wg.Wait()
	lockErrors.Range(func(k, v any) bool {
		t.Logf("%s met the other's lock and was retried (%d failed attempts)", k, v)
		return true
	})

	// Nothing is damaged, nothing is left locked, and the newest backup
	// restores.
	appliance.must("check", "--read-data")
	agent.must("check")
	agent.must("restore", "latest", "--target", t.TempDir())
	if locks, _ := os.ReadDir(filepath.Join(repo, "locks")); len(locks) != 0 {
		t.Fatalf("locks left behind: %d", len(locks))
	}
}

// waitForLock waits until a lock file is in the repository's locks/,
// failing if cmd ends first.
func waitForLock(t *testing.T, repo string, cmd *exec.Cmd) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if locks, _ := os.ReadDir(filepath.Join(repo, "locks")); len(locks) > 0 {
			return
		}
		if cmd.ProcessState != nil || time.Now().After(deadline) {
			t.Fatal("the backup took no lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
