package verify_test

import (
	"context"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/jobs"
	"backstop/app/verify"
	"backstop/store/storetest"
)

func TestDefaultScheduleIsDailyAndSpread(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	minutes := map[string]bool{}
	for range 20 {
		spec := verify.DefaultSchedule(app.NewID(app.PrefixEndpoint))
		if err := jobs.ValidateSchedule(spec); err != nil {
			t.Fatal(err)
		}
		if d := app.ScheduleInterval(spec, now); d != 24*time.Hour {
			t.Fatalf("%s runs every %v, want daily", spec, d)
		}
		minutes[spec] = true
	}
	if len(minutes) < 2 {
		t.Fatalf("20 endpoints all verify at the same minute: %v", minutes)
	}
}

// TestSyncSchedules: active endpoints with a snapshot get a daily verify,
// revoked and deleted ones lose theirs, a changed spec is kept, and a
// second sync changes nothing.
func TestSyncSchedules(t *testing.T) {
	ctx := context.Background()
	db := storetest.Open(t, "")
	tenant := storetest.Tenant(t, db, "Acme")
	mk := func(status, snapshot string) *app.Endpoint {
		e := &app.Endpoint{TenantID: tenant, Hostname: "h", Profile: app.ProfileServer, Status: status, LastSnapshotID: snapshot}
		if err := db.CreateEndpoint(ctx, e); err != nil {
			t.Fatal(err)
		}
		return e
	}
	backedUp, fresh, revoked := mk(app.EndpointActive, "snap1"), mk(app.EndpointActive, ""), mk(app.EndpointRevoked, "snap2")
	custom := mk(app.EndpointActive, "snap3")
	if err := db.SaveJobSchedule(ctx, &app.JobSchedule{TenantID: tenant, Action: app.ActionVerify, TargetType: app.TargetEndpoint,
		TargetID: custom.ID, Spec: "@every 6h", Enabled: true}); err != nil {
		t.Fatal(err)
	}
	if err := db.SaveJobSchedule(ctx, &app.JobSchedule{TenantID: tenant, Action: app.ActionVerify, TargetType: app.TargetEndpoint,
		TargetID: revoked.ID, Spec: "0 5 * * *", Enabled: true}); err != nil {
		t.Fatal(err)
	}

	changed, err := verify.SyncSchedules(ctx, db, db)
	if err != nil || !changed {
		t.Fatalf("first sync = %v, %v", changed, err)
	}
	got := map[string]string{}
	list, _ := db.JobSchedules(ctx)
	for _, s := range list {
		got[s.TargetID] = s.Spec
	}
	want := map[string]string{backedUp.ID: verify.DefaultSchedule(backedUp.ID), custom.ID: "@every 6h"}
	if len(got) != len(want) || got[backedUp.ID] != want[backedUp.ID] || got[custom.ID] != want[custom.ID] {
		t.Fatalf("schedules = %v, want %v (fresh %s has no snapshot)", got, want, fresh.ID)
	}
	if changed, err := verify.SyncSchedules(ctx, db, db); err != nil || changed {
		t.Fatalf("second sync = %v, %v; want no change", changed, err)
	}
}
