package jobs_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/jobs"
)

// Incidents through the real runner: a kind whose next outcome the test
// chooses, on one target, run after run.
func TestIncidentsOpenContinueResolveThroughRunner(t *testing.T) {
	clk := newClock()
	db := openDB(t, "")
	db.Now = clk.Now
	var mu sync.Mutex
	var next error
	r := startRunner(t, db, jobs.Config{Now: clk.Now}, thingKind(func(ctx context.Context, run *jobs.Run) (*jobs.Outcome, error) {
		mu.Lock()
		defer mu.Unlock()
		return nil, next
	}))
	// runOnce runs one job ending with err and returns the data.incident of
	// its job.failed / job.completed event (nil when absent).
	seen := 0
	runOnce := func(target string, err error) map[string]any {
		t.Helper()
		mu.Lock()
		next = err
		mu.Unlock()
		j := submit(t, r, target)
		waitFor(t, "job end", func() bool { return app.JobTerminal(jobState(t, db, j.ID)) })
		var jobEvents []map[string]any
		for _, e := range events(t, db) {
			if e["type"] == app.EventJobFailed || e["type"] == app.EventJobCompleted {
				jobEvents = append(jobEvents, e)
			}
		}
		if len(jobEvents) != seen+1 {
			t.Fatalf("%d job events, want %d", len(jobEvents), seen+1)
		}
		seen++
		e := jobEvents[seen-1]
		if e["data"].(map[string]any)["job"].(map[string]any)["id"] != j.ID {
			t.Fatalf("last event is not job %s's: %v", j.ID, e)
		}
		clk.Add(time.Hour)
		inc, _ := e["data"].(map[string]any)["incident"].(map[string]any)
		return inc
	}
	authFailed := app.Fail("imap.auth_failed", nil, errors.New("NO LOGIN"))
	t0 := app.At(clk.Now()).String()

	want := func(got map[string]any, key, state, openedAt string) {
		t.Helper()
		if got == nil || got["key"] != key || got["state"] != state || got["openedAt"] != openedAt {
			t.Fatalf("incident = %v, want key %s state %s openedAt %s", got, key, state, openedAt)
		}
	}
	want(runOnce("tn_a-1", authFailed), "tn_a-1:imap.auth_failed", "open", t0)
	want(runOnce("tn_a-1", authFailed), "tn_a-1:imap.auth_failed", "open", t0) // continues, same openedAt
	if inc := runOnce("tn_a-2", nil); inc != nil {
		t.Fatalf("another target's success carries %v", inc)
	}
	want(runOnce("tn_a-1", nil), "tn_a-1:imap.auth_failed", "resolved", t0)
	if inc := runOnce("tn_a-1", nil); inc != nil {
		t.Fatalf("a success with no open incident carries %v", inc)
	}

	// A failure without a catalogued cause is "unknown"; another cause
	// then replaces it.
	t5 := app.At(clk.Now()).String()
	want(runOnce("tn_a-1", errors.New("boom")), "tn_a-1:unknown", "open", t5)
	t6 := app.At(clk.Now()).String()
	inc := runOnce("tn_a-1", authFailed)
	want(inc, "tn_a-1:imap.auth_failed", "open", t6)
	if rep, _ := inc["replaces"].(map[string]any); rep["key"] != "tn_a-1:unknown" || rep["openedAt"] != t5 {
		t.Fatalf("replaces = %v, want the unknown incident", inc["replaces"])
	}
	open, err := db.OpenIncidents(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(open) != 1 || open[0].Key != "tn_a-1:imap.auth_failed" || open[0].TenantID != "tn_a" || open[0].Queue != app.QueueIMAPBackup {
		t.Fatalf("open incidents = %+v", open)
	}
}
