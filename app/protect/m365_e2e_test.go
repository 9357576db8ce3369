package protect_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/graph"
	"backstop/app/graph/graphtest"
	"backstop/app/jobs"
	"backstop/app/m365"
	"backstop/app/protect"
)

// The appliance layer with the real Microsoft 365 engine and Graph client
// against the fake Graph: source check (refused secret, missing consent),
// directory sync with autoProtect, mailbox and drive backups in their
// queues, browsing, download and restores.
func TestM365EndToEndAgainstFakeGraph(t *testing.T) {
	f := newFixture(t)
	f.runner.Close()
	ctx := context.Background()
	tenant := graphtest.Tenant{AzureTenantID: "0c9a7e11-4b2d-4a8e-9d3f-6e5b4a3c2d1e", ClientID: "5d3c2b1a-0f9e-4d8c-b7a6-958473625140",
		ClientSecret: "fake-graph-secret-value"}
	fg := graphtest.New(tenant, graphtest.Options{})
	t.Cleanup(fg.Close)
	sku := fg.Sku("SPE_E3")
	alice := fg.AddUser(graphtest.User{DisplayName: "Alice", UserPrincipalName: "alice@contoso.example", Mail: "alice@contoso.example",
		Licenses: []string{sku}})
	fg.AddUser(graphtest.User{DisplayName: "Board room", UserPrincipalName: "board@contoso.example", Mail: "board@contoso.example", Purpose: "room"})
	received := time.Date(2026, 11, 19, 9, 30, 0, 0, time.UTC)
	fg.AddMessage(alice, fg.WellKnownFolder(alice, "inbox"), []byte("From: Bob <bob@example.com>\r\nTo: alice@contoso.example\r\n"+
		"Subject: Quarterly numbers\r\nDate: Thu, 19 Nov 2026 09:29:00 +0000\r\nMessage-ID: <q3@example.com>\r\n\r\nSee attached.\r\n"), received)
	fg.AddFile(alice, "Reports/q3.txt", []byte("revenue: up\n"))

	limits := graph.NewLimits(16)
	engine := protect.M365Engine{Check: m365.Check, ConsentURL: m365.ConsentURL, SyncDirectory: m365.SyncDirectory,
		BackupMailbox: m365.BackupMailbox, BackupDrive: m365.BackupDrive, RestoreMail: m365.RestoreMail, RestoreFiles: m365.RestoreFiles}
	f.runner = jobs.New(jobs.Config{Store: f.db, Schedules: f.db, Now: f.clock.Now, Logger: slog.New(slog.DiscardHandler)})
	f.m = protect.New(protect.Config{Sources: f.db, Objects: f.db, Directory: f.db, Jobs: f.runner, Box: mustBox(t, f.dir),
		Blobs: f.blobs, Catalog: f.db, M365: engine, GraphLimits: limits, Now: f.clock.Now, Logger: slog.New(slog.DiscardHandler)})
	for _, k := range []jobs.Kind{f.m.BackupKind(), f.m.VerifyKind(), f.m.RestoreKind(), f.m.SyncKind()} {
		f.runner.Register(k)
	}
	if err := f.runner.Open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.runner.Close() })

	spec := app.SourceSpec{TenantID: f.tenant, Kind: app.SourceM365, M365: app.M365Settings{AzureTenantID: tenant.AzureTenantID,
		ClientID: tenant.ClientID, GraphURL: fg.GraphURL(), LoginURL: fg.LoginURL()}, ClientSecret: "wrong-secret"}
	// A refused secret: 422 source_auth_failed naming the AADSTS reason.
	_, err := f.m.Create(ctx, spec)
	if app.ErrorCode(err) != app.ESOURCEAUTH || !strings.Contains(err.Error(), "AADSTS") || strings.Contains(err.Error(), "wrong-secret") {
		t.Fatalf("wrong secret: %v", err)
	}
	// Missing consent for /subscribedSkus: names the permission and the link.
	spec.ClientSecret = tenant.ClientSecret
	fg.SetRoles("User.Read.All", "MailboxSettings.Read", "Mail.ReadWrite", "Files.ReadWrite.All")
	_, err = f.m.Create(ctx, spec)
	if app.ErrorCode(err) != app.ESOURCECHECK || !strings.Contains(err.Error(), "Organization.Read.All") || !strings.Contains(err.Error(), "adminconsent") {
		t.Fatalf("missing consent: %v", err)
	}
	fg.SetRoles()
	src, err := f.m.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if j, err := f.db.ActiveJobFor(ctx, app.ActionSync, app.TargetSource, src.ID); err == nil {
		if got := f.waitJob(j.ID); got.State != app.JobSucceeded {
			t.Fatalf("first sync %+v", got)
		}
	}
	entries, _ := f.db.DirectoryEntries(ctx, app.DirectoryFilter{SourceID: src.ID})
	var aliceEntry *app.DirectoryEntry
	for _, d := range entries {
		switch d.ExternalID {
		case alice:
			aliceEntry = d
		default:
			if d.Kind != app.DirectoryRoom || d.Protected {
				t.Fatalf("room entry %+v", d)
			}
		}
	}
	if aliceEntry == nil || !aliceEntry.Protected || !aliceEntry.Licensed || len(aliceEntry.ProtectedObjectIDs) != 2 ||
		aliceEntry.Licenses[0] != "SPE_E3" {
		t.Fatalf("alice %+v (entries %d)", aliceEntry, len(entries))
	}
	objs := map[string]*app.ProtectedObject{}
	for _, id := range aliceEntry.ProtectedObjectIDs {
		o, _ := f.db.ProtectedObject(ctx, id)
		objs[o.Kind] = o
	}

	mbx := f.run(app.ActionBackup, objs[app.ObjectMailbox].ID)
	if mbx.Queue != app.QueueMailboxBackup || mbx.State != app.JobSucceeded || mbx.SnapshotID == nil {
		t.Fatalf("mailbox backup %+v (%v)", mbx, mbx.ErrorMessage)
	}
	drv := f.run(app.ActionBackup, objs[app.ObjectDrive].ID)
	if drv.Queue != app.QueueDriveBackup || drv.State != app.JobSucceeded || drv.SnapshotID == nil {
		t.Fatalf("drive backup %+v (%v)", drv, drv.ErrorMessage)
	}
	items, _, err := f.m.SnapshotItems(ctx, *mbx.SnapshotID, app.SnapshotItemFilter{Query: "quarterly"})
	if err != nil || len(items) != 1 || items[0].Kind != "message" || items[0].Subject != "Quarterly numbers" || items[0].Date == nil {
		t.Fatalf("message items %+v %v", items, err)
	}
	_, rc, err := f.m.OpenSnapshotItem(ctx, *mbx.SnapshotID, items[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(rc)
	rc.Close()
	if !strings.Contains(string(raw), "Message-ID: <q3@example.com>") {
		t.Fatalf("downloaded message %q", raw)
	}
	files, _, err := f.m.SnapshotItems(ctx, *drv.SnapshotID, app.SnapshotItemFilter{Query: "q3.txt"})
	if err != nil || len(files) != 1 || files[0].Kind != "file" || files[0].Size != int64(len("revenue: up\n")) || files[0].Path != "Reports" {
		t.Fatalf("file items %+v %v", files, err)
	}
	if v := f.run(app.ActionVerify, objs[app.ObjectMailbox].ID); v.State != app.JobSucceeded {
		t.Fatalf("verify %+v", v)
	}

	// Restores into the same user, into new folders; twice adds nothing.
	for i := 0; i < 2; i++ {
		if j, err := f.restore(*mbx.SnapshotID, map[string]any{}); err != nil || j.State != app.JobSucceeded {
			t.Fatalf("mail restore %d: %+v %v", i, j, err)
		}
		if j, err := f.restore(*drv.SnapshotID, map[string]any{}); err != nil || j.State != app.JobSucceeded {
			t.Fatalf("file restore %d: %+v %v", i, j, err)
		}
	}
	snap, _ := f.m.Snapshot(ctx, *mbx.SnapshotID)
	restoredMail := 0
	for _, m := range fg.Messages(alice) {
		if strings.HasPrefix(m.FolderPath, protect.RestoreFolder(snap.At.Time)) {
			restoredMail++
			if m.IsDraft || m.Subject != "Quarterly numbers" {
				t.Fatalf("restored message %+v", m)
			}
		}
	}
	dsnap, _ := f.m.Snapshot(ctx, *drv.SnapshotID)
	restoredFiles := 0
	for _, sf := range fg.Files(alice) {
		if strings.HasPrefix(sf.Path, protect.RestoreFilesFolder(dsnap.At.Time)+"/") {
			restoredFiles++
			if !strings.HasSuffix(sf.Path, "/Reports/q3.txt") || string(sf.Content) != "revenue: up\n" {
				t.Fatalf("restored file %+v", sf)
			}
		}
	}
	if restoredMail != 1 || restoredFiles != 1 {
		t.Fatalf("restored %d messages and %d files, want 1 each", restoredMail, restoredFiles)
	}
	if st := fg.Stats(); st.Violations != 0 {
		t.Fatalf("the client broke Graph's limits: %+v", st)
	}

	// The user leaves the tenant: marked removed at the next sync, its
	// objects unprotected with their snapshots.
	fg.RemoveUser(alice)
	f.syncNow(src)
	d, _ := f.db.DirectoryEntry(ctx, aliceEntry.ID)
	o, _ := f.db.ProtectedObject(ctx, objs[app.ObjectMailbox].ID)
	if d.RemovedAt == nil || d.Protected || o.Protected || o.LastSnapshotID != *mbx.SnapshotID {
		t.Fatalf("after leaving: entry %+v object %+v", d, o)
	}
}
