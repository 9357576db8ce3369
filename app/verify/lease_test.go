package verify_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"backstop/app"
	"backstop/app/resticcmd"
	"backstop/app/retention"
	"backstop/app/verify"
)

// TestVerifyQueuedDuringAPruneStartsAfterIt: while retention holds the
// endpoint's lease and prunes, a verify of the endpoint waits; it reads the
// repository only once the prune released it, so it sees the pruned pack
// set and passes. Ordering comes from the lease's signals, not from sleeps.
func TestVerifyQueuedDuringAPruneStartsAfterIt(t *testing.T) {
	var (
		mu    sync.Mutex
		order []string
	)
	note := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, s)
	}
	waiting := make(chan struct{})
	var once sync.Once
	leases := &resticcmd.Leases{OnWait: func(_, holder, heldBy string) {
		note(holder + " waits for " + heldBy)
		once.Do(func() { close(waiting) })
	}}
	a := newApplianceWith(t, "", leases)
	e := a.endpoint(t, "files01")

	// An older backup of data the newer one no longer has: pruning the
	// older snapshot deletes its packs.
	old := writeTree(t, map[string]string{"old.bin": randomText(t, 256<<10)})
	a.backup(t, e, old, nil)
	src := writeTree(t, map[string]string{"a.txt": randomText(t, 64<<10)})
	a.backup(t, e, src, nil)
	repo, _ := a.locate(e.ID)
	packsBefore := countPacks(t, repo)

	release, err := leases.Acquire(context.Background(), e.ID, retention.LeaseHolder)
	if err != nil {
		t.Fatal(err)
	}
	note("prune holds the lease")
	pruneErr := make(chan error, 1)
	go func() {
		defer release()
		<-waiting
		// The verify is queued and waiting: prune as retention does.
		_, pw := a.locate(e.ID)
		cmd := exec.Command(a.restic, "forget", "--prune", "--group-by", "host", "--keep-last", "1", "--no-cache")
		cmd.Env = append(os.Environ(), "RESTIC_REPOSITORY="+repo, "RESTIC_PASSWORD_FILE="+pw, "TMPDIR="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if err != nil {
			err = fmt.Errorf("%w: %s", err, out)
		}
		note("prune done")
		pruneErr <- err
	}()

	j := a.verifyNow(t, e.ID)
	if err := <-pruneErr; err != nil {
		t.Fatalf("prune: %v", err)
	}
	if j.State != app.JobSucceeded {
		t.Fatalf("verify job = %s (failure %+v)", j.State, j.Failure)
	}
	mu.Lock()
	got := fmt.Sprint(order)
	mu.Unlock()
	if want := fmt.Sprint([]string{"prune holds the lease", verify.LeaseHolder + " waits for retention", "prune done"}); got != want {
		t.Fatalf("order %s, want %s", got, want)
	}
	packsAfter := countPacks(t, repo)
	if packsAfter >= packsBefore {
		t.Fatalf("the prune removed no pack: %d -> %d", packsBefore, packsAfter)
	}
	// The verify listed the packs after the prune: it never saw the old set.
	if rep := a.report(t, e.ID); rep.State != app.VerifyReportPassed || rep.Packs.Total != packsAfter {
		t.Fatalf("report %s with %d packs, want passed with %d (pruned from %d)", rep.State, rep.Packs.Total, packsAfter, packsBefore)
	}
	if h := leases.Holder(e.ID); h != "" {
		t.Fatalf("lease still held by %q", h)
	}
	a.resticCmd(t, e.ID, "check")
}

func randomText(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	rand.Read(b)
	return string(b)
}

func countPacks(t *testing.T, repo string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(filepath.Join(repo, "data"), func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
