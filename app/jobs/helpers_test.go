package jobs_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/jobs"
	"backstop/store"
)

// clock is a test clock that moves only when told.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 11, 21, 15, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// openDB opens a real SQLite database in a temporary directory.
func openDB(t testing.TB, path string) *store.DB {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "backstop.db")
	}
	db, err := store.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// thingKind is a backup kind for target type "thing": any id starting with
// the tenant's id resolves, everything else is another tenant's.
func thingKind(run func(ctx context.Context, r *jobs.Run) (*jobs.Outcome, error)) jobs.Kind {
	return jobs.Kind{
		Action: app.ActionBackup, TargetType: "thing", Queue: app.QueueIMAPBackup, Run: run,
		Resolve: func(ctx context.Context, tenantID, id string, _ json.RawMessage) (app.JobTarget, error) {
			if len(id) <= len(tenantID) || id[:len(tenantID)] != tenantID {
				return app.JobTarget{}, app.NotFound("thing")
			}
			return app.JobTarget{Type: "thing", ID: id, DisplayName: "Thing " + id}, nil
		},
	}
}

func submit(t testing.TB, r *jobs.Runner, target string) *app.Job {
	t.Helper()
	j, err := r.Submit(context.Background(), app.JobRequest{TenantID: "tn_a", Action: app.ActionBackup,
		TargetType: "thing", TargetID: target, Trigger: app.TriggerAPI})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// waitFor polls cond until it holds or five seconds pass.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func jobState(t testing.TB, db *store.DB, id string) string {
	t.Helper()
	j, err := db.Job(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return j.State
}

// events returns the outbox events raised so far, decoded.
func events(t testing.TB, db *store.DB) []map[string]any {
	t.Helper()
	evs, err := db.UndispatchedEvents(context.Background(), 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, e := range evs {
		var m map[string]any
		if err := json.Unmarshal(e.Body, &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func startRunner(t testing.TB, db *store.DB, cfg jobs.Config, kinds ...jobs.Kind) *jobs.Runner {
	t.Helper()
	cfg.Store = db
	r := jobs.New(cfg)
	for _, k := range kinds {
		r.Register(k)
	}
	if err := r.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}
