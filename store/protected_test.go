package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"backstop/app"
	"backstop/store/storetest"
)

func TestSourcesObjectsDirectory(t *testing.T) {
	ctx := context.Background()
	db := storetest.Open(t, "")
	a, b := storetest.Tenant(t, db, "Acme"), storetest.Tenant(t, db, "Beta")

	newIMAP := func(tenant, name string) (*app.Source, *app.ProtectedObject, *app.DirectoryEntry) {
		t.Helper()
		src := &app.Source{TenantID: tenant, Kind: app.SourceIMAP, DisplayName: name, SealedSecret: []byte("sealed"),
			IMAP: app.IMAPSettings{Host: "mail.example.com", Port: 993, Security: "tls", Username: name + "@example.com"}}
		src.ID = app.NewID(app.PrefixSource)
		entry := &app.DirectoryEntry{ID: app.NewID(app.PrefixUser), Kind: app.DirectoryIMAPAccount, ExternalID: src.ID,
			DisplayName: name, Email: name + "@example.com", Enabled: true, Protected: true}
		obj := &app.ProtectedObject{Kind: app.ObjectIMAP, SourceKind: app.SourceIMAP, DirectoryEntryID: entry.ID,
			DisplayName: name, Address: name + "@example.com", Protected: true}
		if err := db.CreateSource(ctx, src, []*app.ProtectedObject{obj}, []*app.DirectoryEntry{entry}); err != nil {
			t.Fatal(err)
		}
		return src, obj, entry
	}
	srcA, objA, entryA := newIMAP(a, "alice")
	_, objB, _ := newIMAP(b, "bob")

	got, err := db.Source(ctx, srcA.ID)
	if err != nil || got.IMAP != srcA.IMAP || string(got.SealedSecret) != "sealed" || got.State != app.SourceOK {
		t.Fatalf("source read back %+v (%v)", got, err)
	}
	if list, _ := db.Sources(ctx, app.SourceFilter{TenantID: a}); len(list) != 1 || list[0].ID != srcA.ID {
		t.Fatalf("tenant A sources %v", list)
	}
	o, err := db.ProtectedObject(ctx, objA.ID)
	if err != nil || o.SourceID != srcA.ID || o.TenantID != a || !o.Protected || o.SourceState != app.SourceOK ||
		o.DirectoryEntryID != entryA.ID {
		t.Fatalf("object %+v (%v)", o, err)
	}

	// Renaming the source renames its object and entry; disabling shows on the object.
	if _, err := db.UpdateSource(ctx, srcA.ID, func(s *app.Source) error {
		s.DisplayName, s.Disabled, s.Schedule = "Alice", true, "0 3 * * *"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	o, _ = db.ProtectedObject(ctx, objA.ID)
	e, _ := db.DirectoryEntry(ctx, entryA.ID)
	if o.DisplayName != "Alice" || e.DisplayName != "Alice" || o.SourceState != app.SourceDisabled || o.SourceSchedule != "0 3 * * *" {
		t.Fatalf("after rename: object %+v entry %+v", o, e)
	}
	if !slices.Equal(e.ProtectedObjectIDs, []string{objA.ID}) {
		t.Fatalf("entry objects %v", e.ProtectedObjectIDs)
	}

	// Facts written back.
	now := time.Date(2026, 11, 21, 15, 0, 0, 0, time.UTC)
	if _, err := db.UpdateProtectedObject(ctx, objA.ID, func(o *app.ProtectedObject) error {
		o.LastBackupAt, o.LastSuccessAt, o.LastBackupState = &now, &now, app.JobPartial
		o.LastSnapshotID, o.LastSnapshotAt, o.LastSnapshotItems, o.LastSnapshotBytes = "sn_1", &now, 12, 3400
		o.VerifyState, o.VerifyCheckedAt, o.VerifyPassedSnapshotID, o.LastVerifyStartedAt = app.VerifyPassed, &now, "sn_1", &now
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	o, _ = db.ProtectedObject(ctx, objA.ID)
	if o.LastSnapshotItems != 12 || o.LastSnapshotBytes != 3400 || !o.LastSuccessAt.Equal(now) || o.VerifyPassedSnapshotID != "sn_1" ||
		o.LastVerifyStartedAt == nil || o.LastBackupState != app.JobPartial {
		t.Fatalf("facts %+v", o)
	}

	// Protection follows the directory entry.
	e, err = db.SetDirectoryProtection(ctx, entryA.ID, false)
	if err != nil || e.Protected {
		t.Fatalf("unprotect: %+v %v", e, err)
	}
	if o, _ = db.ProtectedObject(ctx, objA.ID); o.Protected {
		t.Fatal("object still protected")
	}
	if _, err := db.SetDirectoryProtection(ctx, "usr_missing", true); app.ErrorCode(err) != app.ENOTFOUND {
		t.Fatalf("missing entry: %v", err)
	}
	db.SetDirectoryProtection(ctx, entryA.ID, true)

	counts, err := db.DirectoryCounts(ctx, "")
	if err != nil || len(counts) != 2 {
		t.Fatalf("counts %+v %v", counts, err)
	}
	for _, c := range counts {
		if c.IMAPAccounts != 1 || c.Protected != 1 || c.Users != 0 {
			t.Errorf("counts %+v", c)
		}
	}
	if one, _ := db.DirectoryCounts(ctx, b); len(one) != 1 || one[0].TenantID != b {
		t.Fatalf("tenant B counts %+v", one)
	}

	// Deleting the source keeps the object (unprotected, no source) and its
	// facts; the entry goes.
	if err := db.DeleteSource(ctx, srcA.ID); err != nil {
		t.Fatal(err)
	}
	o, err = db.ProtectedObject(ctx, objA.ID)
	if err != nil || o.Protected || o.SourceID != "" || o.SourceState != "" || o.LastSnapshotID != "sn_1" || o.DirectoryEntryID != "" {
		t.Fatalf("object after source delete %+v (%v)", o, err)
	}
	if _, err := db.DirectoryEntry(ctx, entryA.ID); app.ErrorCode(err) != app.ENOTFOUND {
		t.Fatalf("entry after delete: %v", err)
	}
	if err := db.DeleteSource(ctx, srcA.ID); app.ErrorCode(err) != app.ENOTFOUND {
		t.Fatalf("second delete: %v", err)
	}
	if list, _ := db.ProtectedObjects(ctx, app.ProtectedObjectFilter{TenantID: b}); len(list) != 1 || list[0].ID != objB.ID {
		t.Fatalf("tenant B objects %v", list)
	}
	if list, _ := db.ProtectedObjects(ctx, app.ProtectedObjectFilter{Kind: app.ObjectMailbox}); len(list) != 0 {
		t.Fatalf("mailboxes %v", list)
	}
}
