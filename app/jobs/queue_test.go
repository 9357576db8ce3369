package jobs_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"backstop/app"
	"backstop/app/jobs"
)

// A kind with QueueFor puts each job in the queue its target picks, and the
// runner's pools claim from every queue the kind declares.
func TestQueueForPicksTheQueuePerTarget(t *testing.T) {
	db := openDB(t, "")
	var ran atomic.Int32
	k := thingKind(func(ctx context.Context, run *jobs.Run) (*jobs.Outcome, error) {
		ran.Add(1)
		return &jobs.Outcome{}, nil
	})
	k.QueueFor = func(_ context.Context, t app.JobTarget) string {
		switch {
		case strings.HasSuffix(t.ID, "-mbx"):
			return app.QueueMailboxBackup
		case strings.HasSuffix(t.ID, "-drv"):
			return app.QueueDriveBackup
		}
		return ""
	}
	k.Queues = []string{app.QueueMailboxBackup, app.QueueDriveBackup}
	r := startRunner(t, db, jobs.Config{Workers: map[string]int{app.QueueMailboxBackup: 32}}, k)
	if r.Workers(app.QueueMailboxBackup) != 32 || r.Workers(app.QueueDriveBackup) != 2 {
		t.Fatalf("workers = %d, %d", r.Workers(app.QueueMailboxBackup), r.Workers(app.QueueDriveBackup))
	}
	want := map[string]string{"tn_a-mbx": app.QueueMailboxBackup, "tn_a-drv": app.QueueDriveBackup, "tn_a-x": app.QueueIMAPBackup}
	var ids []string
	for target, queue := range want {
		j := submit(t, r, target)
		if j.Queue != queue {
			t.Fatalf("job of %s in queue %s, want %s", target, j.Queue, queue)
		}
		ids = append(ids, j.ID)
	}
	for _, id := range ids {
		waitFor(t, "job "+id, func() bool { return jobState(t, db, id) == app.JobSucceeded })
	}
	if ran.Load() != 3 {
		t.Fatalf("ran %d jobs, want 3", ran.Load())
	}
}
