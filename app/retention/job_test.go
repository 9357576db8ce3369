package retention_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/retention"
	"backstop/store/storetest"
)

// blobSnapshots makes one snapshot a day for days days before now for each
// object, with ids that say object and age.
func blobSnapshots(tenantID string, now time.Time, days int, objects ...string) []*app.Snapshot {
	var out []*app.Snapshot
	for _, o := range objects {
		for d := 0; d < days; d++ {
			out = append(out, &app.Snapshot{ID: fmt.Sprintf("sn_%s_%04d", o, d), ProtectedObjectID: o, TenantID: tenantID,
				At: app.At(now.AddDate(0, 0, -d).Add(-time.Hour))})
		}
	}
	return out
}

func TestRetentionJobForgetsBlobStoreSnapshotsPerObject(t *testing.T) {
	now := time.Date(2026, 11, 21, 3, 0, 0, 0, time.UTC)
	blobs := &fakeBlobStore{freed: 12345}
	a := newAppliance(t, applianceOptions{blobs: blobs, now: func() time.Time { return now }})
	// Two objects with two years of daily snapshots, one of another tenant.
	other := storetest.Tenant(t, a.db, "Other")
	blobs.snaps = append(blobSnapshots(a.tenant, now, 800, "po_mail", "po_drive"), blobSnapshots(other, now, 100, "po_other")...)
	// The tenant's own policy: 7 days all, 30 daily, no weekly, 1 year monthly.
	policy := retention.Policy{KeepAllDays: 7, KeepDailyDays: 30, KeepMonthlyDays: 365}
	if err := a.db.SetTenantRetention(context.Background(), a.tenant, policy); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{}
	for _, o := range []string{"po_mail", "po_drive"} {
		var snaps []retention.Snap
		for _, s := range blobs.snaps {
			if s.ProtectedObjectID == o {
				snaps = append(snaps, retention.Snap{ID: s.ID, At: s.At.Time})
			}
		}
		keep, _ := retention.Select(snaps, now, policy)
		slices.Sort(keep)
		want[o] = keep
	}

	j := a.runRetention(t)
	if j.State != app.JobSucceeded || j.Progress.Phase != "done" || j.Progress.Percent != 100 {
		t.Fatalf("job %s: %+v", j.State, j.Progress)
	}
	for o, keep := range want {
		if got := blobs.ids(o); !slices.Equal(got, keep) {
			t.Errorf("%s keeps %v, want %v", o, got, keep)
		}
	}
	// By hand: 7 all + 23 more daily + the newest of the 12 months
	// before that, minus overlaps (some month ends fall in the daily range).
	if n := len(want["po_mail"]); n < 36 || n > 44 {
		t.Errorf("po_mail keeps %d snapshots, want about 42", n)
	}
	if got := blobs.ids("po_mail"); !slices.Contains(got, "sn_po_mail_0000") || slices.Contains(got, "sn_po_mail_0799") {
		t.Errorf("newest must stay and the 2-year-old one go: %v", got)
	}
	if len(blobs.ids("po_other")) != 100 {
		t.Error("another tenant's snapshots were touched")
	}
	if blobs.gcCalls != 1 {
		t.Errorf("garbage collection ran %d times, want once", blobs.gcCalls)
	}
	sum := a.summary(t, j.ID)
	po := sum.ProtectedObjects
	if po.Skipped || po.Objects != 2 || po.SnapshotsKept != len(want["po_mail"])+len(want["po_drive"]) ||
		po.SnapshotsForgotten != 1600-po.SnapshotsKept || po.BytesFreed != 12345 || po.Failed != 0 {
		t.Errorf("summary %+v", po)
	}
	if sum.SnapshotsForgotten != po.SnapshotsForgotten || sum.BytesFreed != 12345 || sum.Endpoints.Repositories != 0 {
		t.Errorf("totals %+v", sum)
	}
	if j.Progress.ItemsDone != 3 || j.Progress.ItemsTotal != 3 || j.Progress.BytesDone != 12345 {
		t.Errorf("final progress %+v, want 2 objects + GC", j.Progress)
	}

	// A second run finds nothing more to forget.
	j = a.runRetention(t)
	if s := a.summary(t, j.ID); j.State != app.JobSucceeded || s.ProtectedObjects.SnapshotsForgotten != 0 {
		t.Errorf("second run: %s %+v", j.State, s.ProtectedObjects)
	}
}

func TestRetentionJobOneObjectFailingIsPartial(t *testing.T) {
	now := time.Date(2026, 11, 21, 3, 0, 0, 0, time.UTC)
	blobs := &fakeBlobStore{failFor: "po_bad"}
	a := newAppliance(t, applianceOptions{blobs: blobs, now: func() time.Time { return now }})
	blobs.snaps = blobSnapshots(a.tenant, now, 200, "po_bad", "po_good")

	j := a.runRetention(t)
	if j.State != app.JobPartial || j.ItemsFailed != 1 {
		t.Fatalf("job %s with %d failed items, want partial with 1", j.State, j.ItemsFailed)
	}
	items := a.failedItems(t, j.ID)
	if len(items) != 1 || items[0].Ref != "po_bad" || items[0].Failure.Code != "retention.snapshots_failed" {
		t.Fatalf("failed items %+v", items)
	}
	if len(blobs.ids("po_bad")) != 200 || len(blobs.ids("po_good")) >= 200 {
		t.Errorf("po_bad %d, po_good %d snapshots left", len(blobs.ids("po_bad")), len(blobs.ids("po_good")))
	}
	if blobs.gcCalls != 1 {
		t.Errorf("garbage collection ran %d times, want once even after a failed object", blobs.gcCalls)
	}
	if len(j.ItemCauses) != 1 || j.ItemCauses[0].Code != "retention.snapshots_failed" {
		t.Errorf("itemCauses %+v", j.ItemCauses)
	}
}

func TestRetentionJobWithoutBlobStoreSkipsThatPhase(t *testing.T) {
	a := newAppliance(t, applianceOptions{})
	j := a.runRetention(t)
	if j.State != app.JobSucceeded {
		t.Fatalf("job %s", j.State)
	}
	if s := a.summary(t, j.ID); !s.ProtectedObjects.Skipped || s.SnapshotsForgotten != 0 {
		t.Errorf("summary %+v", s)
	}
}

func TestRetentionKindResolvesOnlyTheTenant(t *testing.T) {
	a := newAppliance(t, applianceOptions{})
	other := storetest.Tenant(t, a.db, "Other")
	ctx := context.Background()
	for _, req := range []app.JobRequest{
		{TenantID: a.tenant, TargetID: other},
		{TenantID: a.tenant, TargetID: "tn_missing"},
	} {
		req.Action, req.TargetType, req.Trigger = app.ActionRetention, app.TargetTenant, app.TriggerWeb
		if _, err := a.runner.Submit(ctx, req); app.ErrorCode(err) != app.ENOTFOUND {
			t.Errorf("%s: %v, want not found", req.TargetID, err)
		}
	}
}

func TestSyncSchedules(t *testing.T) {
	a := newAppliance(t, applianceOptions{})
	ctx := context.Background()
	changed, err := retention.SyncSchedules(ctx, a.db, a.db)
	if err != nil || !changed {
		t.Fatalf("first sync: %v %v", changed, err)
	}
	other := storetest.Tenant(t, a.db, "Other")
	// An operator changed Acme's schedule; it stays.
	list, _ := a.db.JobSchedules(ctx)
	list[0].Spec = "0 4 * * *"
	if err := a.db.SaveJobSchedule(ctx, list[0]); err != nil {
		t.Fatal(err)
	}
	if changed, err = retention.SyncSchedules(ctx, a.db, a.db); err != nil || !changed {
		t.Fatalf("sync after a new tenant: %v %v", changed, err)
	}
	if changed, err = retention.SyncSchedules(ctx, a.db, a.db); err != nil || changed {
		t.Fatalf("sync without changes: %v %v", changed, err)
	}
	list, _ = a.db.JobSchedules(ctx)
	specs := map[string]string{}
	for _, s := range list {
		if s.Action != app.ActionRetention || s.TargetType != app.TargetTenant || s.TenantID != s.TargetID || !s.Enabled {
			t.Errorf("schedule %+v", s)
		}
		specs[s.TargetID] = s.Spec
	}
	if len(specs) != 2 || specs[a.tenant] != "0 4 * * *" || specs[other] != retention.DefaultSchedule {
		t.Errorf("schedules %v", specs)
	}
	// The runner fires it like any schedule: one retention job on the tenant.
	j := a.runner.Fire(ctx, list[0])
	if j == nil || j.Trigger != app.TriggerSchedule || j.Queue != app.QueueRetention {
		t.Fatalf("fired %+v", j)
	}
}
