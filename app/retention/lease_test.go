package retention_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/resticcmd"
	"backstop/app/retention"
	"backstop/e2e"
)

// TestRetentionPruneWaitsForAVerify: while a verify run holds the
// endpoint's lease, the prune of that repository waits without touching it
// (no failed item, no retry); once the verify releases it, the prune runs.
func TestRetentionPruneWaitsForAVerify(t *testing.T) {
	restic := e2e.RequireTool(t, "restic", "restic")
	waiting := make(chan string, 1)
	var once sync.Once
	leases := &resticcmd.Leases{OnWait: func(_, holder, heldBy string) {
		once.Do(func() { waiting <- holder + " waits for " + heldBy })
	}}
	a := newAppliance(t, applianceOptions{restic: restic, leases: leases, lockRetry: time.Hour})
	if err := a.db.SetTenantRetention(context.Background(), a.tenant, retention.Policy{KeepAllDays: 30}); err != nil {
		t.Fatal(err)
	}
	latest := time.Date(2026, 11, 21, 1, 0, 0, 0, time.UTC)
	r := a.resticEndpoint(t, restic, "files01")
	for _, d := range []int{800, 10, 0} {
		r.backupAt(t, latest.AddDate(0, 0, -d))
	}
	snaps := r.snapshots(t)
	r.markBackedUp(t, snaps[len(snaps)-1].ID)

	release, err := leases.Acquire(context.Background(), r.e.ID, "verify")
	if err != nil {
		t.Fatal(err)
	}
	queued := a.submitRetention(t)
	if got := <-waiting; got != "retention waits for verify" {
		t.Fatalf("wait signal %q", got)
	}
	// The prune is waiting: the repository is as it was.
	if n := len(r.snapshots(t)); n != 3 {
		t.Fatalf("%d snapshots while the verify holds the lease, want 3", n)
	}
	release()
	j := a.waitJob(t, queued)
	if j.State != app.JobSucceeded {
		t.Fatalf("job %s: %+v", j.State, a.failedItems(t, j.ID))
	}
	if n := len(r.snapshots(t)); n != 2 {
		t.Fatalf("%d snapshots after the prune, want 2", n)
	}
	if s := a.summary(t, j.ID).Endpoints; len(s.Each) != 1 || s.Each[0].SnapshotsRemoved != 1 || s.Each[0].BytesAfter >= s.Each[0].BytesBefore {
		t.Fatalf("summary %+v", s)
	}
	if h := leases.Holder(r.e.ID); h != "" {
		t.Fatalf("lease still held by %q", h)
	}
	r.cmd(t, nil, "check")
}
