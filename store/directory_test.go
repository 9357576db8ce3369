package store_test

import (
	"context"
	"testing"
	"time"

	"backstop/app"
	"backstop/store/storetest"
)

func TestDirectorySyncAndDailyCounts(t *testing.T) {
	ctx := context.Background()
	db := storetest.Open(t, "")
	a, b := storetest.Tenant(t, db, "Acme"), storetest.Tenant(t, db, "Beta")
	newM365 := func(tenant string) *app.Source {
		src := &app.Source{TenantID: tenant, Kind: app.SourceM365, DisplayName: "M365", SealedSecret: []byte("sealed"),
			M365: app.M365Settings{AzureTenantID: "contoso.onmicrosoft.com", ClientID: "11111111-2222-3333-4444-555555555555",
				GraphURL: "https://graph.example/v1.0", AutoProtect: true, ConsentURL: "https://login.example/consent"}}
		if err := db.CreateSource(ctx, src, nil, nil); err != nil {
			t.Fatal(err)
		}
		return src
	}
	srcA, srcB := newM365(a), newM365(b)
	if got, err := db.Source(ctx, srcA.ID); err != nil || got.M365 != srcA.M365 {
		t.Fatalf("m365 settings read back %+v (%v)", got, err)
	}
	objects := func(d *app.DirectoryEntry) []*app.ProtectedObject {
		return []*app.ProtectedObject{{Kind: app.ObjectMailbox, SourceKind: app.SourceM365, ExternalID: d.ExternalID, DisplayName: d.DisplayName},
			{Kind: app.ObjectDrive, SourceKind: app.SourceM365, ExternalID: d.ExternalID, DisplayName: d.DisplayName}}
	}
	users := func(ids ...string) []*app.DirectoryEntry {
		var out []*app.DirectoryEntry
		for _, id := range ids {
			out = append(out, &app.DirectoryEntry{ExternalID: id, Kind: app.DirectoryUser, DisplayName: "User " + id, Enabled: true, Licensed: id != "c"})
		}
		return out
	}
	at := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	res, err := db.SyncDirectory(ctx, app.DirectorySync{SourceID: srcA.ID, At: at, Entries: users("a", "b", "c"), AutoProtect: true, Objects: objects})
	if err != nil || res.Added != 3 || res.ObjectsCreated != 6 {
		t.Fatalf("first sync %+v %v", res, err)
	}
	if _, err := db.SyncDirectory(ctx, app.DirectorySync{SourceID: srcB.ID, At: at, Entries: users("x"), AutoProtect: false, Objects: objects}); err != nil {
		t.Fatal(err)
	}
	if err := db.RecordDailyCounts(ctx, "2026-11-20"); err != nil {
		t.Fatal(err)
	}
	res, err = db.SyncDirectory(ctx, app.DirectorySync{SourceID: srcA.ID, At: at.Add(24 * time.Hour), Entries: users("a", "c"), AutoProtect: true, Objects: objects})
	if err != nil || res.Updated != 2 || res.Removed != 1 || res.ObjectsCreated != 0 {
		t.Fatalf("second sync %+v %v", res, err)
	}
	if err := db.RecordDailyCounts(ctx, "2026-11-21"); err != nil {
		t.Fatal(err)
	}
	if err := db.RecordDailyCounts(ctx, "2026-11-21"); err != nil { // idempotent
		t.Fatal(err)
	}
	if has, _ := db.HasDailyCounts(ctx, "2026-11-21"); !has {
		t.Fatal("2026-11-21 not recorded")
	}
	if has, _ := db.HasDailyCounts(ctx, "2026-11-22"); has {
		t.Fatal("2026-11-22 recorded")
	}
	rows, err := db.DailyCounts(ctx, "", "2026-11-01", "2026-11-30")
	if err != nil || len(rows) != 4 {
		t.Fatalf("daily rows %+v %v", rows, err)
	}
	first, second := rows[0], rows[2]
	if first.Date != "2026-11-20" || first.TenantID > rows[1].TenantID || second.Date != "2026-11-21" {
		t.Fatalf("order %+v", rows)
	}
	byTenant := func(date, tenant string) app.DirectoryCounts {
		for _, r := range rows {
			if r.Date == date && r.TenantID == tenant {
				return r.DirectoryCounts
			}
		}
		t.Fatalf("no row %s %s", date, tenant)
		return app.DirectoryCounts{}
	}
	if c := byTenant("2026-11-20", a); c.Users != 3 || c.Licensed != 2 || c.Protected != 3 || c.ProtectedMailboxes != 3 || c.ProtectedDrives != 3 {
		t.Fatalf("day 1 of A %+v", c)
	}
	if c := byTenant("2026-11-21", a); c.Users != 2 || c.Licensed != 1 || c.Protected != 2 || c.ProtectedMailboxes != 2 {
		t.Fatalf("day 2 of A (b removed) %+v", c)
	}
	if c := byTenant("2026-11-21", b); c.Users != 1 || c.Protected != 0 {
		t.Fatalf("day 2 of B %+v", c)
	}
	if rows, _ := db.DailyCounts(ctx, b, "2026-11-21", "2026-11-21"); len(rows) != 1 || rows[0].TenantID != b {
		t.Fatalf("one tenant, one day: %+v", rows)
	}
	if err := db.RecordDailyCounts(ctx, "20261121"); app.ErrorCode(err) != app.EINVALID {
		t.Fatalf("a bad date: %v", err)
	}
	// The removed user's entry is marked, its objects kept unprotected.
	list, _ := db.DirectoryEntries(ctx, app.DirectoryFilter{SourceID: srcA.ID, Query: "user b"})
	if len(list) != 1 || list[0].RemovedAt == nil || list[0].Protected || len(list[0].ProtectedObjectIDs) != 2 {
		t.Fatalf("removed user %+v", list)
	}
	// Back again: autoProtect decides again, no duplicate objects.
	res, err = db.SyncDirectory(ctx, app.DirectorySync{SourceID: srcA.ID, At: at.Add(48 * time.Hour), Entries: users("a", "b", "c"), AutoProtect: true, Objects: objects})
	if err != nil || res.ObjectsCreated != 0 {
		t.Fatalf("third sync %+v %v", res, err)
	}
	list, _ = db.DirectoryEntries(ctx, app.DirectoryFilter{SourceID: srcA.ID, Query: "user b"})
	if list[0].RemovedAt != nil || !list[0].Protected {
		t.Fatalf("returned user %+v", list[0])
	}
	// LIKE wildcards are literal in q.
	if l, _ := db.DirectoryEntries(ctx, app.DirectoryFilter{Query: "%"}); len(l) != 0 {
		t.Fatalf("q=%% matched %d", len(l))
	}
}
