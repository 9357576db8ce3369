package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"backstop/app"
)

func publish(t *testing.T, db *DB, typ, tenant string) *app.Event {
	t.Helper()
	e := &app.Event{Type: typ, TenantID: tenant, Data: map[string]any{"n": 1}}
	if err := db.PublishEvent(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	return e
}

func feedIDs(t *testing.T, db *DB, f app.EventFilter) []string {
	t.Helper()
	evs, err := db.EventFeed(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{}
	for _, e := range evs {
		ids = append(ids, e.ID)
	}
	return ids
}

func TestEventFeedOrderTenantsAndAfter(t *testing.T) {
	db, _ := openTestDB(t)
	a1 := publish(t, db, app.EventJobFailed, "tn_a")
	b1 := publish(t, db, app.EventJobCompleted, "tn_b")
	publish(t, db, app.EventWebhookTest, "tn_a") // for one receiver: never in the feed
	a2 := publish(t, db, app.EventVerifyCompleted, "tn_a")

	eq := func(got []string, want ...string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("feed = %v, want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("feed = %v, want %v", got, want)
			}
		}
	}
	eq(feedIDs(t, db, app.EventFilter{Limit: 10}), a1.ID, b1.ID, a2.ID)
	eq(feedIDs(t, db, app.EventFilter{Limit: 2}), a1.ID, b1.ID)
	eq(feedIDs(t, db, app.EventFilter{After: b1.ID, Limit: 10}), a2.ID)
	eq(feedIDs(t, db, app.EventFilter{After: a2.ID, Limit: 10}))
	eq(feedIDs(t, db, app.EventFilter{TenantID: "tn_a", Limit: 10}), a1.ID, a2.ID)
	eq(feedIDs(t, db, app.EventFilter{TenantID: "tn_a", After: a1.ID, Limit: 10}), a2.ID)

	ctx := context.Background()
	_, err := db.EventFeed(ctx, app.EventFilter{After: "evt_nosuch", Limit: 10})
	wantCode(t, err, app.ENOTFOUND)
	_, err = db.EventFeed(ctx, app.EventFilter{TenantID: "tn_a", After: b1.ID, Limit: 10}) // another tenant's
	wantCode(t, err, app.ENOTFOUND)
}

// The feed serves an event 30 days however soon its deliveries end: the
// purge of ended deliveries leaves younger events alone.
func TestEventsKeptThirtyDaysAfterDispatch(t *testing.T) {
	db, clock := openTestDB(t)
	ctx := context.Background()
	e := publish(t, db, app.EventJobFailed, "tn_a")
	pending, _ := db.UndispatchedEvents(ctx, 10)
	if _, err := db.FanOut(ctx, pending); err != nil {
		t.Fatal(err)
	}
	clock.t = clock.t.Add(app.EventRetention - time.Minute)
	if _, err := db.PurgeDeliveries(ctx, clock.t); err != nil { // as if deliveries were kept for no time at all
		t.Fatal(err)
	}
	if ids := feedIDs(t, db, app.EventFilter{Limit: 10}); len(ids) != 1 || ids[0] != e.ID {
		t.Fatalf("feed after purge at 30 days - 1m = %v, want the event", ids)
	}
	clock.t = clock.t.Add(2 * time.Minute)
	if _, err := db.PurgeDeliveries(ctx, clock.t.Add(-app.DeliveryRetention)); err != nil {
		t.Fatal(err)
	}
	if ids := feedIDs(t, db, app.EventFilter{Limit: 10}); len(ids) != 0 {
		t.Fatalf("feed after 30 days = %v, want it purged", ids)
	}
}

// An endpoint run's end goes through FinishAgentRun, as agentapi reports it:
// its events carry the incident too.
func TestIncidentsOnEndpointRuns(t *testing.T) {
	db, clock := openTestDB(t)
	ctx := context.Background()
	tn := mustTenant(t, db, "Acme")
	e := &app.Endpoint{TenantID: tn.ID, Hostname: "srv1", Profile: app.ProfileServer, OS: "linux", Arch: "amd64",
		Schedule: app.DefaultEndpointSchedule}
	if err := db.CreateEndpoint(ctx, e); err != nil {
		t.Fatal(err)
	}
	end := func(state string, f *app.Failure) map[string]any {
		t.Helper()
		now := clock.t
		job := &app.Job{TenantID: tn.ID, Queue: app.QueueEndpointBackup, Action: app.ActionBackup, Trigger: app.TriggerSchedule,
			Target: app.JobTarget{Type: app.TargetEndpoint, ID: e.ID, DisplayName: e.Hostname}, QueuedAt: app.At(now)}
		run := &app.AgentRun{ID: "run_" + app.RandomToken(12), EndpointID: e.ID, Kind: app.ActionBackup, StartedAt: now}
		if _, err := db.StartAgentRun(ctx, run, job); err != nil {
			t.Fatal(err)
		}
		if _, _, err := db.FinishAgentRun(ctx, app.AgentRunEnd{RunID: run.ID, EndpointID: e.ID, State: state,
			FinishedAt: now, Failure: f, SnapshotID: map[bool]string{true: "snap1"}[state == app.JobSucceeded]},
			app.EndpointJobEvents); err != nil {
			t.Fatal(err)
		}
		clock.t = clock.t.Add(time.Hour)
		evs, err := db.UndispatchedEvents(ctx, 100)
		if err != nil || len(evs) == 0 {
			t.Fatalf("events %v %v", evs, err)
		}
		var env struct {
			Data map[string]any `json:"data"`
		}
		if err := json.Unmarshal(evs[len(evs)-1].Body, &env); err != nil {
			t.Fatal(err)
		}
		inc, _ := env.Data["incident"].(map[string]any)
		return inc
	}
	failure := &app.Failure{Code: "agent.repository_locked", Category: app.CategoryAgent}
	opened := app.At(clock.t).String()
	key := e.ID + ":agent.repository_locked"
	for i, want := range []struct {
		state string
		f     *app.Failure
		inc   string // "" for none
	}{
		{app.JobFailed, failure, app.IncidentOpen},
		{app.JobFailed, failure, app.IncidentOpen},
		{app.JobSucceeded, nil, app.IncidentResolved},
		{app.JobSucceeded, nil, ""},
	} {
		inc := end(want.state, want.f)
		if want.inc == "" {
			if inc != nil {
				t.Fatalf("run %d: incident %v, want none", i, inc)
			}
			continue
		}
		if inc["key"] != key || inc["state"] != want.inc || inc["openedAt"] != opened {
			t.Fatalf("run %d: incident %v, want %s %s opened %s", i, inc, key, want.inc, opened)
		}
	}
	if open, err := db.OpenIncidents(ctx); err != nil || len(open) != 0 {
		t.Fatalf("open incidents = %v, %v; want none", open, err)
	}
}

// TestOnEventsCommitted: the hook runs once per write transaction that
// added events, after its commit (the event is readable from the hook),
// and never for a transaction that added none or was rolled back.
func TestOnEventsCommitted(t *testing.T) {
	db, _ := openTestDB(t)
	ctx := context.Background()
	var calls, sawEvents int
	db.OnEventsCommitted(func() {
		calls++
		evs, err := db.UndispatchedEvents(ctx, 100)
		if err != nil {
			t.Error(err)
		}
		sawEvents = len(evs)
	})

	publish(t, db, app.EventJobFailed, "tn_a")
	if calls != 1 || sawEvents != 1 {
		t.Fatalf("after one event: %d calls, the hook saw %d events; want 1 and 1", calls, sawEvents)
	}
	// Two events in one transaction: one call.
	if err := db.WriteTx(ctx, func(tx *sql.Tx) error {
		for range 2 {
			if err := db.insertEvent(ctx, tx, &app.Event{Type: app.EventJobCompleted, TenantID: "tn_a"}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if calls != 2 || sawEvents != 3 {
		t.Fatalf("after a transaction of two events: %d calls, the hook saw %d events; want 2 and 3", calls, sawEvents)
	}
	// No event, or an event rolled back: no call, and nothing left behind.
	if err := db.WriteTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "DELETE FROM sessions WHERE expires_at < 0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	failed := errors.New("changed my mind")
	if err := db.WriteTx(ctx, func(tx *sql.Tx) error {
		if err := db.insertEvent(ctx, tx, &app.Event{Type: app.EventJobFailed, TenantID: "tn_a"}); err != nil {
			return err
		}
		return failed
	}); err != failed {
		t.Fatalf("rolled-back transaction: %v", err)
	}
	if calls != 2 {
		t.Fatalf("%d calls after transactions without a committed event, want 2", calls)
	}
	n := 0
	db.txEvents.Range(func(any, any) bool { n++; return true })
	if n != 0 {
		t.Fatalf("%d transactions still marked", n)
	}
}
