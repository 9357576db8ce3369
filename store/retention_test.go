package store

import (
	"context"
	"testing"

	"backstop/app"
)

func TestRetentionPolicies(t *testing.T) {
	db, _ := openTestDB(t)
	ctx := context.Background()
	tn := mustTenant(t, db, "Acme")
	other := mustTenant(t, db, "Beta")

	if _, set, err := db.TenantRetention(ctx, tn.ID); err != nil || set {
		t.Fatalf("fresh tenant: set=%v err=%v, want no policy", set, err)
	}
	p := app.RetentionPolicy{KeepAllDays: 7, KeepDailyDays: 30, KeepWeeklyDays: 0, KeepMonthlyDays: 365}
	if err := db.SetTenantRetention(ctx, tn.ID, p); err != nil {
		t.Fatal(err)
	}
	p.KeepWeeklyDays = 180 // replace
	if err := db.SetTenantRetention(ctx, tn.ID, p); err != nil {
		t.Fatal(err)
	}
	if got, set, err := db.TenantRetention(ctx, tn.ID); err != nil || !set || got != p {
		t.Fatalf("tenant policy = %+v set=%v err=%v, want %+v", got, set, err, p)
	}
	if _, set, _ := db.TenantRetention(ctx, other.ID); set {
		t.Fatal("another tenant got the policy")
	}
	wantCode(t, db.SetTenantRetention(ctx, "tn_missing", p), app.EINVALID)

	e := &app.Endpoint{TenantID: tn.ID, Hostname: "h", Profile: app.ProfileServer, Schedule: app.DefaultEndpointSchedule}
	if err := db.CreateEndpoint(ctx, e); err != nil {
		t.Fatal(err)
	}
	if _, set, err := db.EndpointRetention(ctx, e.ID); err != nil || set {
		t.Fatalf("fresh endpoint: set=%v err=%v, want inherit", set, err)
	}
	o := app.RetentionPolicy{KeepAllDays: 1}
	if err := db.SetEndpointRetention(ctx, e.ID, &o); err != nil {
		t.Fatal(err)
	}
	if got, set, err := db.EndpointRetention(ctx, e.ID); err != nil || !set || got != o {
		t.Fatalf("override = %+v set=%v err=%v", got, set, err)
	}
	if err := db.SetEndpointRetention(ctx, e.ID, nil); err != nil {
		t.Fatal(err)
	}
	if _, set, _ := db.EndpointRetention(ctx, e.ID); set {
		t.Fatal("override still set after inheriting")
	}
	if err := db.SetEndpointRetention(ctx, e.ID, nil); err != nil {
		t.Fatalf("inheriting twice: %v", err)
	}
	wantCode(t, db.SetEndpointRetention(ctx, "ep_missing", &o), app.EINVALID)
}
