package protect_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/blobstore"
	"backstop/app/graph"
	"backstop/app/jobs"
	"backstop/app/m365"
	"backstop/app/protect"
)

// fakeM365 stands in for the Microsoft 365 engine.
type fakeM365 struct {
	mu       sync.Mutex
	checkErr error
	users    []m365.DirectoryUser
	clients  int // graph clients built
	restores []m365.RestoreRequest
	backups  []string // "mailbox:<user>" or "drive:<user>"
}

func (f *fakeM365) engine() protect.M365Engine {
	return protect.M365Engine{
		NewClient: func(cfg graph.Config) (*graph.Client, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.clients++
			return &graph.Client{}, nil
		},
		ConsentURL: func(login, tenant, client string) string {
			return login + "/" + tenant + "/adminconsent?client_id=" + client
		},
		Check: func(context.Context, *graph.Client) error { f.mu.Lock(); defer f.mu.Unlock(); return f.checkErr },
		SyncDirectory: func(context.Context, *graph.Client, m365.Progress) ([]m365.DirectoryUser, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			return append([]m365.DirectoryUser(nil), f.users...), nil
		},
		BackupMailbox: func(ctx context.Context, _ *graph.Client, user string, w *blobstore.Writer, prev []blobstore.Item, p m365.Progress) (*m365.BackupResult, error) {
			f.mu.Lock()
			f.backups = append(f.backups, "mailbox:"+user)
			f.mu.Unlock()
			c, err := w.PutItem(ctx, strings.NewReader("Subject: Hello\r\n\r\nHi.\r\n"))
			if err != nil {
				return nil, err
			}
			meta, _ := json.Marshal(m365.MessageMeta{GraphID: "AAMk1", FolderID: "inbox", Subject: "Hello", From: "bob@example.com",
				Date: "2026-11-20T08:00:00Z", IsRead: true})
			fmeta, _ := json.Marshal(m365.FolderMeta{FolderID: "inbox", DeltaLink: "https://graph.example/delta"})
			p(app.JobProgress{Phase: "transferring", Percent: 100})
			return &m365.BackupResult{Count: 1, Added: 1, Items: []blobstore.Item{
				{ID: "f-inbox", Kind: "folder", Path: "Inbox", Name: "Inbox", Meta: fmeta},
				{ID: "m-AAMk1", Kind: "message", Path: "Inbox", Name: "AAMk1", Content: c, Meta: meta}}}, nil
		},
		BackupDrive: func(ctx context.Context, _ *graph.Client, user string, w *blobstore.Writer, prev []blobstore.Item, p m365.Progress) (*m365.BackupResult, error) {
			f.mu.Lock()
			f.backups = append(f.backups, "drive:"+user)
			f.mu.Unlock()
			c, err := w.PutItem(ctx, bytes.NewReader([]byte("quarterly numbers")))
			if err != nil {
				return nil, err
			}
			meta, _ := json.Marshal(m365.FileMeta{DriveItemID: "01ABC", QuickXorHash: "x"})
			return &m365.BackupResult{Count: 1, Added: 1, Items: []blobstore.Item{
				{ID: "d-root", Kind: "folder", Path: "Reports", Name: "Reports"},
				{ID: "d-01ABC", Kind: "file", Path: "Reports", Name: "q3.xlsx", Content: c, Meta: meta}},
				Failed: []m365.ItemFailure{{ItemID: "d-02", Ref: "Reports/locked.docx", Err: app.Fail("graph.throttled", nil, errors.New("429"))}}}, nil
		},
		RestoreMail:  f.restore,
		RestoreFiles: f.restore,
	}
}

func (f *fakeM365) restore(ctx context.Context, _ *graph.Client, req m365.RestoreRequest, open m365.Opener, _ m365.Progress) (*m365.RestoreResult, error) {
	res := &m365.RestoreResult{}
	for _, it := range req.Items {
		if it.Kind == "folder" {
			continue
		}
		r, err := open(ctx, it.Content)
		if err != nil {
			return nil, err
		}
		io.Copy(io.Discard, r)
		r.Close()
		res.Restored++
	}
	f.mu.Lock()
	f.restores = append(f.restores, req)
	f.mu.Unlock()
	return res, nil
}

// newM365Fixture is the fixture with a manager that has the fake Microsoft
// 365 engine and runs the directory sync kind too.
func newM365Fixture(t *testing.T) (*fixture, *fakeM365) {
	f := newFixture(t)
	f.runner.Close()
	fake := &fakeM365{users: []m365.DirectoryUser{
		{ExternalID: "u-alice", Kind: app.DirectoryUser, DisplayName: "Alice", Email: "alice@contoso.example", UserPrincipalName: "alice@contoso.example",
			Enabled: true, Licensed: true, Licenses: []string{"O365_BUSINESS_PREMIUM"}, HasMailbox: true},
		{ExternalID: "u-bob", Kind: app.DirectoryUser, DisplayName: "Bob", UserPrincipalName: "bob@contoso.example", Enabled: true},
		{ExternalID: "u-info", Kind: app.DirectorySharedMailbox, DisplayName: "Info", Email: "info@contoso.example", Enabled: false, HasMailbox: true},
		{ExternalID: "u-room", Kind: app.DirectoryRoom, DisplayName: "Board room", Email: "board@contoso.example", Enabled: false, HasMailbox: true},
	}}
	f.runner = jobs.New(jobs.Config{Store: f.db, Schedules: f.db, Now: f.clock.Now, Logger: slog.New(slog.DiscardHandler)})
	f.m = protect.New(protect.Config{Sources: f.db, Objects: f.db, Directory: f.db, Jobs: f.runner, Box: mustBox(t, f.dir),
		Blobs: f.blobs, Catalog: f.db, Engine: protect.Engine{Check: f.engine.Check, Backup: f.engine.Backup, Restore: f.engine.Restore},
		M365: fake.engine(), Now: f.clock.Now, Logger: slog.New(slog.DiscardHandler)})
	for _, k := range []jobs.Kind{f.m.BackupKind(), f.m.VerifyKind(), f.m.RestoreKind(), f.m.SyncKind()} {
		f.runner.Register(k)
	}
	if err := f.runner.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.runner.Close() })
	return f, fake
}

const (
	azureTenant  = "8f0e5a2c-1b3d-4c5e-9f7a-0b1c2d3e4f5a"
	clientID     = "11111111-2222-3333-4444-555555555555"
	clientSecret = "Xy7~secret.value-abcdefghijklmnop"
)

func (f *fixture) m365Source(autoProtect bool) *app.Source {
	f.t.Helper()
	src, err := f.m.Create(context.Background(), app.SourceSpec{TenantID: f.tenant, Kind: app.SourceM365,
		M365: app.M365Settings{AzureTenantID: azureTenant, ClientID: clientID}, ClientSecret: clientSecret, AutoProtect: &autoProtect})
	if err != nil {
		f.t.Fatal(err)
	}
	return src
}

// waitJob waits for a job's end.
func (f *fixture) waitJob(id string) *app.Job {
	f.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		got, err := f.db.Job(context.Background(), id)
		if err != nil {
			f.t.Fatal(err)
		}
		if app.JobTerminal(got.State) {
			return got
		}
	}
	f.t.Fatalf("job %s did not finish", id)
	return nil
}

// syncNow runs a directory sync of src and waits for it.
func (f *fixture) syncNow(src *app.Source) *app.Job {
	f.t.Helper()
	ctx := context.Background()
	if j, err := f.db.ActiveJobFor(ctx, app.ActionSync, app.TargetSource, src.ID); err == nil {
		f.waitJob(j.ID)
	}
	j, err := f.m.SubmitSync(ctx, src, app.TriggerWeb)
	if err != nil {
		f.t.Fatal(err)
	}
	if j.Queue != app.QueueDirectorySync {
		f.t.Fatalf("sync job in queue %s", j.Queue)
	}
	got := f.waitJob(j.ID)
	if got.State != app.JobSucceeded {
		f.t.Fatalf("sync job %+v", got)
	}
	return got
}

func TestM365SourceCreateChecks(t *testing.T) {
	f, fake := newM365Fixture(t)
	ctx := context.Background()
	spec := func(mod func(s *app.SourceSpec)) app.SourceSpec {
		s := app.SourceSpec{TenantID: f.tenant, Kind: app.SourceM365, M365: app.M365Settings{AzureTenantID: azureTenant, ClientID: clientID},
			ClientSecret: clientSecret}
		if mod != nil {
			mod(&s)
		}
		return s
	}
	for _, tc := range []struct {
		name     string
		spec     app.SourceSpec
		checkErr error
		code     string
		field    string
		mentions []string
	}{
		{name: "client id not a GUID", spec: spec(func(s *app.SourceSpec) { s.M365.ClientID = "my-app" }), code: app.EINVALID, field: "clientId"},
		{name: "tenant neither GUID nor domain", spec: spec(func(s *app.SourceSpec) { s.M365.AzureTenantID = "contoso" }), code: app.EINVALID, field: "azureTenantId"},
		{name: "graph URL not absolute", spec: spec(func(s *app.SourceSpec) { s.M365.GraphURL = "graph.local/v1.0" }), code: app.EINVALID, field: "graphUrl"},
		{name: "no secret", spec: spec(func(s *app.SourceSpec) { s.ClientSecret = "" }), code: app.EINVALID, field: "clientSecret"},
		{name: "secret refused", spec: spec(nil), checkErr: &graph.AuthError{Status: 401, Err: "invalid_client", Codes: []int{7000215},
			Description: "AADSTS7000215: Invalid client secret provided."}, code: app.ESOURCEAUTH, field: "clientSecret", mentions: []string{"AADSTS7000215"}},
		{name: "consent missing", spec: spec(nil), checkErr: app.Fail("graph.consent_missing", map[string]any{"permission": "Organization.Read.All"},
			errors.New("403 Authorization_RequestDenied")), code: app.ESOURCECHECK, field: "clientId",
			mentions: []string{"Organization.Read.All", "https://login.microsoftonline.com/" + azureTenant + "/adminconsent?client_id=" + clientID}},
		{name: "unreachable", spec: spec(nil), checkErr: app.Fail("graph.connection_failed", nil, errors.New("dial tcp: connection refused")),
			code: app.ESOURCEUNREACHABLE},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake.mu.Lock()
			fake.checkErr = tc.checkErr
			fake.mu.Unlock()
			_, err := f.m.Create(ctx, tc.spec)
			var ae *app.Error
			if !errors.As(err, &ae) || ae.Code != tc.code || (tc.field != "" && ae.Field != tc.field) {
				t.Fatalf("err = %v, want %s on %q", err, tc.code, tc.field)
			}
			for _, s := range tc.mentions {
				if !strings.Contains(ae.Message, s) {
					t.Errorf("message %q does not name %q", ae.Message, s)
				}
			}
			if strings.Contains(ae.Message, clientSecret) {
				t.Errorf("message shows the secret: %q", ae.Message)
			}
		})
	}
	srcs, _ := f.db.Sources(ctx, app.SourceFilter{})
	if len(srcs) != 0 {
		t.Fatalf("failed checks stored %d sources", len(srcs))
	}

	fake.mu.Lock()
	fake.checkErr = nil
	fake.mu.Unlock()
	src := f.m365Source(true)
	stored, err := f.db.Source(ctx, src.ID)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(stored.SealedSecret, []byte(clientSecret)) || !stored.M365.AutoProtect || stored.M365.GraphURL != graph.DefaultGraphURL {
		t.Fatalf("stored source %+v", stored.M365)
	}
	view, _ := json.Marshal(stored.View(nil))
	if bytes.Contains(view, []byte(clientSecret)) || !bytes.Contains(view, []byte(`"clientId":"`+clientID+`"`)) ||
		!bytes.Contains(view, []byte(`"consentUrl":"https://login.microsoftonline.com/`)) {
		t.Fatalf("view = %s", view)
	}
	// The first directory sync was queued at creation.
	j, err := f.db.ActiveJobFor(ctx, app.ActionSync, app.TargetSource, src.ID)
	if err == nil {
		f.waitJob(j.ID)
	}
	entries, _ := f.db.DirectoryEntries(ctx, app.DirectoryFilter{SourceID: src.ID})
	if len(entries) != 4 {
		t.Fatalf("after the first sync: %d entries, want 4", len(entries))
	}

	// A new secret is checked first: refused, nothing changes.
	fake.mu.Lock()
	fake.checkErr = &graph.AuthError{Status: 401, Err: "invalid_client", Codes: []int{7000222}, Description: "AADSTS7000222: The provided client secret keys are expired."}
	before := fake.clients
	fake.mu.Unlock()
	if _, err := f.m.Update(ctx, src.ID, app.SourceUpdate{ClientSecret: app.Ptr("new-secret-123")}); app.ErrorCode(err) != app.ESOURCEAUTH {
		t.Fatalf("update with a refused secret: %v", err)
	}
	if _, err := f.m.Update(ctx, src.ID, app.SourceUpdate{Host: app.Ptr("imap.example.com")}); app.ErrorCode(err) != app.EINVALID {
		t.Fatalf("an IMAP setting on an m365 source: %v", err)
	}
	fake.mu.Lock()
	fake.checkErr = nil
	fake.mu.Unlock()
	out, err := f.m.Update(ctx, src.ID, app.SourceUpdate{ClientSecret: app.Ptr("new-secret-123"), AutoProtect: app.Ptr(false)})
	if err != nil || out.M365.AutoProtect {
		t.Fatalf("update: %+v %v", out, err)
	}
	// The cached client was dropped: the next use builds one from the new secret.
	if _, err := f.m.Client(out); err != nil {
		t.Fatal(err)
	}
	fake.mu.Lock()
	built := fake.clients - before
	fake.mu.Unlock()
	if built != 3 { // two checks, one for use
		t.Fatalf("clients built = %d, want 3", built)
	}
	c1, _ := f.m.Client(out)
	c2, _ := f.m.Client(out)
	if c1 != c2 {
		t.Fatal("the source's client is not reused")
	}
}

func TestDirectorySyncUpsertsMarksRemovedAndAutoProtects(t *testing.T) {
	f, fake := newM365Fixture(t)
	ctx := context.Background()
	src := f.m365Source(true)
	f.syncNow(src)

	byExt := func() map[string]*app.DirectoryEntry {
		list, err := f.db.DirectoryEntries(ctx, app.DirectoryFilter{SourceID: src.ID})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*app.DirectoryEntry{}
		for _, d := range list {
			out[d.ExternalID] = d
		}
		return out
	}
	kinds := func(d *app.DirectoryEntry) string {
		var ks []string
		for _, id := range d.ProtectedObjectIDs {
			o, err := f.db.ProtectedObject(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if o.ExternalID != d.ExternalID || o.SourceKind != app.SourceM365 || o.DirectoryEntryID != d.ID {
				t.Fatalf("object %+v of %s", o, d.ExternalID)
			}
			p := ""
			if !o.Protected {
				p = "-"
			}
			ks = append(ks, p+o.Kind)
		}
		return strings.Join(sortStrings(ks), ",")
	}
	e := byExt()
	for ext, want := range map[string]struct {
		protected bool
		objects   string
	}{
		"u-alice": {true, "drive,mailbox"}, "u-bob": {true, "drive"}, "u-info": {true, "drive,mailbox"}, "u-room": {false, ""},
	} {
		d := e[ext]
		if d == nil || d.Protected != want.protected || kinds(d) != want.objects {
			t.Fatalf("%s: %+v objects %q, want protected %v objects %q", ext, d, kinds(d), want.protected, want.objects)
		}
	}
	if a := e["u-alice"]; !a.Licensed || len(a.Licenses) != 1 || a.Email != "alice@contoso.example" || a.RemovedAt != nil {
		t.Fatalf("alice = %+v", a)
	}
	// The new objects get backup schedules.
	if _, err := protect.SyncSchedules(ctx, f.db, f.db); err != nil {
		t.Fatal(err)
	}
	scheds, _ := f.db.JobSchedules(ctx)
	if n := countBackups(scheds); n != 5 {
		t.Fatalf("%d backup schedules, want 5", n)
	}

	// Bob leaves, Alice is renamed, Dave arrives.
	fake.mu.Lock()
	fake.users = append(fake.users[:1:1], fake.users[2:]...)
	fake.users[0].DisplayName = "Alice Smith"
	fake.users = append(fake.users, m365.DirectoryUser{ExternalID: "u-dave", Kind: app.DirectoryUser, DisplayName: "Dave",
		Email: "dave@contoso.example", Enabled: true, HasMailbox: true})
	fake.mu.Unlock()
	f.clock.Add(time.Hour)
	f.syncNow(src)
	e = byExt()
	if b := e["u-bob"]; b.RemovedAt == nil || b.Protected || kinds(b) != "-drive" {
		t.Fatalf("bob after leaving = %+v objects %q", b, kinds(b))
	}
	if a := e["u-alice"]; a.DisplayName != "Alice Smith" || a.RemovedAt != nil || !a.LastSeenAt.After(a.FirstSeenAt) {
		t.Fatalf("alice = %+v", a)
	}
	if d := e["u-dave"]; d == nil || !d.Protected || kinds(d) != "drive,mailbox" {
		t.Fatalf("dave = %+v", d)
	}
	o, _ := f.db.ProtectedObject(ctx, e["u-alice"].ProtectedObjectIDs[0])
	if o.DisplayName != "Alice Smith" {
		t.Fatalf("alice's object is named %q", o.DisplayName)
	}
	counts, _ := f.db.DirectoryCounts(ctx, f.tenant)
	if len(counts) != 1 || counts[0].Users != 2 || counts[0].SharedMailboxes != 1 || counts[0].Rooms != 1 ||
		counts[0].ProtectedMailboxes != 3 || counts[0].ProtectedDrives != 3 {
		t.Fatalf("counts = %+v", counts)
	}
	if _, err := protect.SyncSchedules(ctx, f.db, f.db); err != nil {
		t.Fatal(err)
	}
	scheds, _ = f.db.JobSchedules(ctx)
	if n := countBackups(scheds); n != 6 { // bob's drive dropped, dave's two added
		t.Fatalf("%d backup schedules, want 6", n)
	}
	// A removed user cannot be protected again by hand.
	if _, err := f.m.SetProtection(ctx, e["u-bob"].ID, true); app.ErrorCode(err) != app.EINVALID {
		t.Fatalf("protecting a removed user: %v", err)
	}
}

func countBackups(s []*app.JobSchedule) int {
	n := 0
	for _, x := range s {
		if x.Action == app.ActionBackup && x.TargetType == app.TargetProtectedObject {
			n++
		}
	}
	return n
}

func sortStrings(s []string) []string {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s
}

func TestProtectionToggleCreatesM365Objects(t *testing.T) {
	f, _ := newM365Fixture(t)
	ctx := context.Background()
	src := f.m365Source(false)
	f.syncNow(src)
	list, _ := f.db.DirectoryEntries(ctx, app.DirectoryFilter{SourceID: src.ID, Query: "ALICE"})
	if len(list) != 1 || list[0].Protected || len(list[0].ProtectedObjectIDs) != 0 {
		t.Fatalf("without autoProtect: %+v", list)
	}
	alice := list[0]
	for i := 0; i < 2; i++ { // twice: no duplicates
		d, err := f.m.SetProtection(ctx, alice.ID, true)
		if err != nil || !d.Protected || len(d.ProtectedObjectIDs) != 2 {
			t.Fatalf("protect: %+v %v", d, err)
		}
	}
	d, err := f.m.SetProtection(ctx, alice.ID, false)
	if err != nil || d.Protected || len(d.ProtectedObjectIDs) != 2 {
		t.Fatalf("unprotect: %+v %v", d, err)
	}
	for _, id := range d.ProtectedObjectIDs {
		if o, _ := f.db.ProtectedObject(ctx, id); o.Protected {
			t.Fatalf("object %s still protected", id)
		}
	}
	// The directory filters.
	if l, _ := f.db.DirectoryEntries(ctx, app.DirectoryFilter{TenantID: f.tenant, Licensed: app.Ptr(true)}); len(l) != 1 {
		t.Fatalf("licensed: %d", len(l))
	}
	if l, _ := f.db.DirectoryEntries(ctx, app.DirectoryFilter{TenantID: f.tenant, Query: "contoso.example", Protected: app.Ptr(false)}); len(l) != 4 {
		t.Fatalf("q + protected=false: %d", len(l))
	}
}

func TestM365BackupsRunInTheirQueuesAndRestore(t *testing.T) {
	f, fake := newM365Fixture(t)
	ctx := context.Background()
	src := f.m365Source(true)
	f.syncNow(src)
	list, _ := f.db.DirectoryEntries(ctx, app.DirectoryFilter{SourceID: src.ID, Query: "alice"})
	objs := map[string]*app.ProtectedObject{}
	for _, id := range list[0].ProtectedObjectIDs {
		o, _ := f.db.ProtectedObject(ctx, id)
		objs[o.Kind] = o
	}
	mbx := f.run(app.ActionBackup, objs[app.ObjectMailbox].ID)
	drv := f.run(app.ActionBackup, objs[app.ObjectDrive].ID)
	if mbx.Queue != app.QueueMailboxBackup || mbx.State != app.JobSucceeded || mbx.SnapshotID == nil {
		t.Fatalf("mailbox backup %+v", mbx)
	}
	if drv.Queue != app.QueueDriveBackup || drv.State != app.JobPartial || drv.ItemsFailed != 1 || drv.SnapshotID == nil {
		t.Fatalf("drive backup %+v", drv)
	}
	if fake.backups[0] != "mailbox:u-alice" || fake.backups[1] != "drive:u-alice" {
		t.Fatalf("engine calls %v", fake.backups)
	}
	items, _, err := f.m.SnapshotItems(ctx, *mbx.SnapshotID, app.SnapshotItemFilter{Folder: "Inbox"})
	if err != nil || len(items) != 1 || items[0].Subject != "Hello" || items[0].From != "bob@example.com" || items[0].Date == nil ||
		len(items[0].Flags) != 1 || items[0].Flags[0] != `\Seen` {
		t.Fatalf("mailbox items %+v %v", items, err)
	}
	items, _, err = f.m.SnapshotItems(ctx, *drv.SnapshotID, app.SnapshotItemFilter{Query: "q3"})
	if err != nil || len(items) != 1 || items[0].Kind != "file" || items[0].Name != "q3.xlsx" || items[0].Size != 17 || items[0].SHA256 == "" {
		t.Fatalf("drive items %+v %v", items, err)
	}
	// Verify reads the blob store, whatever the kind.
	if v := f.run(app.ActionVerify, objs[app.ObjectDrive].ID); v.State != app.JobSucceeded {
		t.Fatalf("verify of the drive %+v", v)
	}

	// Restores: folder names per kind, destinations of the same kind.
	if _, err := f.restore(*drv.SnapshotID, map[string]any{"destination": map[string]any{"folder": "Restored 10:00"}}); app.ErrorCode(err) != app.EINVALID {
		t.Fatalf("a ':' in a OneDrive folder: %v", err)
	}
	if _, err := f.restore(*drv.SnapshotID, map[string]any{"destination": map[string]any{"protectedObjectId": objs[app.ObjectMailbox].ID}}); app.ErrorCode(err) != app.EINVALID {
		t.Fatalf("a drive snapshot into a mailbox: %v", err)
	}
	j, err := f.restore(*drv.SnapshotID, map[string]any{})
	if err != nil || j.State != app.JobSucceeded {
		t.Fatalf("drive restore %+v %v", j, err)
	}
	j, err = f.restore(*mbx.SnapshotID, map[string]any{"destination": map[string]any{"folder": "Restored: by hand"}})
	if err != nil || j.State != app.JobSucceeded {
		t.Fatalf("mail restore %+v %v", j, err)
	}
	snap, _ := f.m.Snapshot(ctx, *drv.SnapshotID)
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if len(fake.restores) != 2 || fake.restores[0].UserID != "u-alice" || fake.restores[0].Folder != protect.RestoreFilesFolder(snap.At.Time) ||
		!strings.Contains(fake.restores[0].Folder, "-") || strings.Contains(fake.restores[0].Folder, ":") ||
		fake.restores[1].Folder != "Restored: by hand" {
		t.Fatalf("restores %+v", fake.restores)
	}
}
