package protect_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/protect"
	"backstop/store/storetest"
)

// restore submits POST /restores as the API does and waits for the job.
func (f *fixture) restore(snapshotID string, params map[string]any) (*app.Job, error) {
	f.t.Helper()
	ctx := context.Background()
	params["snapshotId"] = snapshotID
	raw, _ := json.Marshal(params)
	j, err := f.runner.Submit(ctx, app.JobRequest{TenantID: f.tenant, Action: app.ActionRestore, TargetID: snapshotID,
		Params: raw, Trigger: app.TriggerAPI})
	if err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		got, err := f.db.Job(ctx, j.ID)
		if err != nil {
			f.t.Fatal(err)
		}
		if app.JobTerminal(got.State) {
			return got, nil
		}
	}
	f.t.Fatalf("restore %s did not finish", j.ID)
	return nil, nil
}

func TestRestoreEverythingIntoTheSnapshotsFolder(t *testing.T) {
	f := newFixture(t)
	f.engine.failUIDs = nil
	_, o := f.source()
	if j := f.run(app.ActionBackup, o.ID); j.State != app.JobSucceeded {
		t.Fatalf("backup %s", j.State)
	}
	o, _ = f.db.ProtectedObject(context.Background(), o.ID)
	snap, _, err := f.db.Snapshot(context.Background(), o.LastSnapshotID)
	if err != nil {
		t.Fatal(err)
	}
	j, err := f.restore(snap.ID, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if j.State != app.JobSucceeded || j.Queue != app.QueueRestore || j.Target.ID != o.ID {
		t.Fatalf("restore job %+v", j)
	}
	call := f.engine.restores[0]
	want := protect.RestoreFolder(snap.At.Time)
	if call.req.Folder != want || !strings.HasPrefix(want, "Restored ") || call.account.Password != password {
		t.Fatalf("restored into %q (want %q)", call.req.Folder, want)
	}
	for _, m := range f.engine.messages {
		id := "m-" + strings.ReplaceAll(m.folder, "/", "_") + "-" + itoa(m.uid)
		if !bytes.Equal(call.bytes[id], m.body) {
			t.Fatalf("%s: the engine was given other bytes than were backed up", id)
		}
	}
	// Running it again asks for the same folder: the engine skips what is there.
	if _, err := f.restore(snap.ID, map[string]any{}); err != nil {
		t.Fatal(err)
	}
	if f.engine.restores[1].req.Folder != want {
		t.Fatal("a second run of the same restore chose another folder")
	}
}

func TestRestoreChosenItemsAndDestinations(t *testing.T) {
	f := newFixture(t)
	f.engine.failUIDs = nil
	_, o := f.source()
	f.run(app.ActionBackup, o.ID)
	o, _ = f.db.ProtectedObject(context.Background(), o.ID)
	sn := o.LastSnapshotID

	// A folder path stands for the folder and everything below it.
	if _, err := f.restore(sn, map[string]any{"items": []string{"Archive"}, "destination": map[string]any{"folder": "From backup"}}); err != nil {
		t.Fatal(err)
	}
	call := f.engine.restores[0]
	var got []string
	for _, it := range call.req.Items {
		got = append(got, it.Path+":"+it.Kind)
	}
	sort.Strings(got)
	if strings.Join(got, ",") != "Archive/2024:folder,Archive/2024:message,Archive:folder,Archive:message" || call.req.Folder != "From backup" {
		t.Fatalf("restore of folder Archive asked for %v into %q", got, call.req.Folder)
	}
	// One message by id.
	if _, err := f.restore(sn, map[string]any{"items": []string{"m-INBOX-2"}}); err != nil {
		t.Fatal(err)
	}
	if items := f.engine.restores[1].req.Items; len(items) != 1 || items[0].ID != "m-INBOX-2" {
		t.Fatalf("restore of one message asked for %v", items)
	}
	// Into another IMAP object of the tenant.
	_, other := f.source()
	if j, err := f.restore(sn, map[string]any{"destination": map[string]any{"protectedObjectId": other.ID}}); err != nil || j.Target.ID != other.ID {
		t.Fatalf("restore into another object: %v %+v", err, j)
	}

	for _, tc := range []struct {
		params map[string]any
		field  string
	}{
		{map[string]any{"items": []string{"Nope"}}, "body.items[0]"},
		{map[string]any{"destination": map[string]any{"protectedObjectId": "po_nope"}}, "body.destination.protectedObjectId"},
		{map[string]any{"destination": map[string]any{"folder": "/abs"}}, "body.destination.folder"},
		{map[string]any{"destination": map[string]any{"where": "x"}}, "body.destination"},
	} {
		_, err := f.restore(sn, tc.params)
		var e *app.Error
		if !errors.As(err, &e) || e.Code != app.EINVALID || e.Field != tc.field {
			t.Errorf("%v: %v, want a validation error on %s", tc.params, err, tc.field)
		}
	}
	// Another tenant's snapshot is not found, like a missing one.
	other2 := storetest.Tenant(t, f.db, "Other")
	_, err := f.runner.Submit(context.Background(), app.JobRequest{TenantID: other2, Action: app.ActionRestore, TargetID: sn,
		Params: json.RawMessage(`{"snapshotId":"` + sn + `"}`)})
	if app.ErrorCode(err) != app.ENOTFOUND {
		t.Fatalf("another tenant's snapshot: %v", err)
	}
}

func itoa(u uint32) string {
	b, _ := json.Marshal(u)
	return string(b)
}
