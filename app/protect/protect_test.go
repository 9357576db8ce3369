package protect_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/blobstore"
	"backstop/app/blobstore/s3backend"
	"backstop/app/blobstore/s3backend/s3test"
	"backstop/app/imapbackup"
	"backstop/app/jobs"
	"backstop/app/protect"
	"backstop/app/webhooks"
	"backstop/store"
	"backstop/store/storetest"
)

// oneTarget is a blobstore.Targets with one local target.
type oneTarget struct{ b blobstore.Backend }

func (o oneTarget) ForTenant(context.Context, string) (string, blobstore.Backend, error) {
	return "st_local", o.b, nil
}
func (o oneTarget) Backend(_ context.Context, id string) (blobstore.Backend, error) {
	if id != "st_local" {
		return nil, fmt.Errorf("no target %s", id)
	}
	return o.b, nil
}
func (oneTarget) WriteFailed(string, error) {}

// message is one message of the fake account.
type message struct {
	folder, subject, from string
	uid                   uint32
	body                  []byte
}

// fakeEngine stands in for the IMAP engine: it stores real messages
// through the blob store writer and reports the ones it "cannot fetch".
type fakeEngine struct {
	mu        sync.Mutex
	messages  []message
	failUIDs  []uint32 // reported as failed items (in INBOX)
	checkErr  error
	backupErr error
	prevSeen  []int // len(prev) of each backup call
	checked   []imapbackup.Account
	restores  []restoreCall
}

// restoreCall is what the fake engine was asked to restore, with the bytes
// the opener gave for each message.
type restoreCall struct {
	account imapbackup.Account
	req     imapbackup.RestoreRequest
	bytes   map[string][]byte // item id -> content
}

func (f *fakeEngine) Restore(ctx context.Context, a imapbackup.Account, req imapbackup.RestoreRequest, open imapbackup.Opener,
	progress imapbackup.Progress) (*imapbackup.RestoreResult, error) {
	call := restoreCall{account: a, req: req, bytes: map[string][]byte{}}
	res := &imapbackup.RestoreResult{}
	for _, it := range req.Items {
		if it.Kind != "message" {
			continue
		}
		r, err := open(ctx, it.Content)
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			return nil, err
		}
		call.bytes[it.ID] = b
		res.Restored++
		progress(app.JobProgress{Phase: "transferring", ItemsDone: res.Restored})
	}
	f.mu.Lock()
	f.restores = append(f.restores, call)
	f.mu.Unlock()
	return res, nil
}

func (f *fakeEngine) Check(_ context.Context, a imapbackup.Account) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checked = append(f.checked, a)
	return f.checkErr
}

func (f *fakeEngine) Backup(ctx context.Context, a imapbackup.Account, w *blobstore.Writer, prev []blobstore.Item,
	progress imapbackup.Progress) (*imapbackup.BackupResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.prevSeen = append(f.prevSeen, len(prev))
	if f.backupErr != nil {
		return nil, f.backupErr
	}
	res := &imapbackup.BackupResult{}
	folders := map[string]bool{}
	for _, m := range f.messages {
		if !folders[m.folder] {
			folders[m.folder] = true
			meta, _ := json.Marshal(imapbackup.FolderMeta{Delimiter: "/", UIDValidity: 1, UIDNext: 100})
			name := m.folder[strings.LastIndex(m.folder, "/")+1:]
			res.Items = append(res.Items, blobstore.Item{ID: "f-" + strings.ReplaceAll(m.folder, "/", "_"), Kind: "folder",
				Path: m.folder, Name: name, Meta: meta})
		}
		c, err := w.PutItem(ctx, bytes.NewReader(m.body))
		if err != nil {
			return nil, err
		}
		meta, _ := json.Marshal(imapbackup.MessageMeta{Folder: m.folder, UIDValidity: 1, UID: m.uid, Flags: []string{`\Seen`},
			Subject: m.subject, From: m.from, Date: "2026-11-20T08:00:00Z"})
		res.Items = append(res.Items, blobstore.Item{ID: fmt.Sprintf("m-%s-%d", strings.ReplaceAll(m.folder, "/", "_"), m.uid),
			Kind: "message", Path: m.folder, Name: fmt.Sprint(m.uid), Content: c, Meta: meta})
		res.Messages++
		progress(app.JobProgress{Phase: "transferring", ItemsDone: res.Messages, ItemsTotal: int64(len(f.messages))})
	}
	for _, uid := range f.failUIDs {
		res.Failed = append(res.Failed, imapbackup.ItemFailure{Folder: "INBOX", UID: uid,
			Err: app.Fail("imap.connection_failed", map[string]any{"host": a.Host}, fmt.Errorf("UID FETCH %d: server answered NO", uid))})
	}
	if len(prev) == 0 {
		res.Added = res.Messages
	}
	return res, nil
}

type fixture struct {
	t      *testing.T
	dir    string
	db     *store.DB
	tenant string
	blobs  *blobstore.Store
	engine *fakeEngine
	m      *protect.Manager
	runner *jobs.Runner
	clock  *clock
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, dir: t.TempDir(), clock: &clock{t: time.Now().UTC()}}
	f.db = storetest.Open(t, f.dir)
	f.tenant = storetest.Tenant(t, f.db, "Acme")
	local, err := blobstore.NewLocal(filepath.Join(f.dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	key, err := blobstore.LoadApplianceKey(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	if f.blobs, err = blobstore.New(blobstore.Config{Key: key, Catalog: f.db, Targets: oneTarget{local}, PackSize: 1 << 20,
		Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
	box, err := webhooks.OpenSecretBox(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	f.engine = &fakeEngine{messages: []message{
		{folder: "INBOX", uid: 1, subject: "Quarterly invoice", from: "billing@vendor.example", body: []byte("Subject: Quarterly invoice\r\n\r\nPay up.\r\n")},
		{folder: "INBOX", uid: 2, subject: "Lunch?", from: "bob@example.com", body: []byte("Subject: Lunch?\r\n\r\nNoon.\r\n")},
		{folder: "Archive", uid: 7, subject: "Old news", from: "carol@example.com", body: bytes.Repeat([]byte("archived line\r\n"), 20000)},
		{folder: "Archive/2024", uid: 3, subject: "Invoice 2024", from: "billing@vendor.example", body: []byte{}},
	}, failUIDs: []uint32{99}}
	f.m = protect.New(protect.Config{Sources: f.db, Objects: f.db, Box: box, Blobs: f.blobs, Catalog: f.db,
		Engine: protect.Engine{Check: f.engine.Check, Backup: f.engine.Backup, Restore: f.engine.Restore}, Now: f.clock.Now,
		Logger: slog.New(slog.DiscardHandler)})
	f.runner = jobs.New(jobs.Config{Store: f.db, Schedules: f.db, Now: f.clock.Now, Logger: slog.New(slog.DiscardHandler)})
	f.runner.Register(f.m.BackupKind())
	f.runner.Register(f.m.VerifyKind())
	f.runner.Register(f.m.RestoreKind())
	if err := f.runner.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.runner.Close() })
	return f
}

const password = "s3cret-Passw0rd!"

// source adds an IMAP source and returns it with its protected object.
func (f *fixture) source() (*app.Source, *app.ProtectedObject) {
	f.t.Helper()
	ctx := context.Background()
	src, err := f.m.Create(ctx, app.SourceSpec{TenantID: f.tenant, Kind: app.SourceIMAP, DisplayName: "Alice",
		IMAP:     app.IMAPSettings{Host: "imap.example.com", Port: 993, Security: app.SecurityTLS, Username: "alice@example.com"},
		Password: password})
	if err != nil {
		f.t.Fatal(err)
	}
	objs, err := f.db.ProtectedObjects(ctx, app.ProtectedObjectFilter{SourceID: src.ID})
	if err != nil || len(objs) != 1 {
		f.t.Fatalf("objects of the source: %v %v", objs, err)
	}
	return src, objs[0]
}

// run submits a job and waits for its end.
func (f *fixture) run(action, objectID string) *app.Job {
	f.t.Helper()
	ctx := context.Background()
	j, err := f.runner.Submit(ctx, app.JobRequest{TenantID: f.tenant, Action: action, TargetType: app.TargetProtectedObject,
		TargetID: objectID, Trigger: app.TriggerAPI})
	if err != nil {
		f.t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		got, err := f.db.Job(ctx, j.ID)
		if err != nil {
			f.t.Fatal(err)
		}
		if app.JobTerminal(got.State) {
			return got
		}
	}
	f.t.Fatalf("job %s did not finish", j.ID)
	return nil
}

func (f *fixture) view(id string) app.ProtectedObjectView {
	f.t.Helper()
	o, err := f.db.ProtectedObject(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	return o.View(f.clock.Now())
}

// events returns the data of the outbox's events of a type for a job.
func (f *fixture) events(typ, jobID string) []map[string]any {
	f.t.Helper()
	evs, err := f.db.UndispatchedEvents(context.Background(), 1000)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []map[string]any
	for _, e := range evs {
		var env struct {
			Type string         `json:"type"`
			Data map[string]any `json:"data"`
		}
		if err := json.Unmarshal(e.Body, &env); err != nil {
			f.t.Fatal(err)
		}
		if job, _ := env.Data["job"].(map[string]any); env.Type == typ && job["id"] == jobID {
			out = append(out, env.Data)
		}
	}
	return out
}

func attention(v app.ProtectedObjectView) string {
	if v.Attention == nil {
		return ""
	}
	return *v.Attention
}

func TestBackupPartialBrowseAndVerify(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	src, obj := f.source()
	if got := f.engine.checked[0]; got.Password != password || got.Username != "alice@example.com" || got.Security != "tls" {
		t.Fatalf("check got %+v", got)
	}
	if v := f.view(obj.ID); v.Readiness.State != app.ReadinessNoBackup || !v.Protected || v.Kind != app.ObjectIMAP {
		t.Fatalf("new object %+v", v)
	}

	// A backup where one message cannot be fetched: partial, with its cause.
	j := f.run(app.ActionBackup, obj.ID)
	if j.State != app.JobPartial || j.ItemsFailed != 1 || len(j.ItemCauses) != 1 || j.ItemCauses[0].Code != "imap.connection_failed" ||
		j.SnapshotID == nil || j.Queue != app.QueueIMAPBackup {
		t.Fatalf("backup job %+v", j)
	}
	items, err := f.db.JobItems(ctx, j.ID, 10)
	if err != nil || len(items) != 1 || items[0].Name != "INBOX UID 99" || items[0].Failure.Code != "imap.connection_failed" {
		t.Fatalf("failed items %+v %v", items, err)
	}
	v := f.view(obj.ID)
	if v.LastSnapshot == nil || v.LastSnapshot.ID != *j.SnapshotID || v.LastSnapshot.Items != 4 || v.LastSuccessAt == nil ||
		v.Readiness.State != app.ReadinessUnverified || attention(v) != "" {
		t.Fatalf("after backup %+v", v)
	}
	if ev := f.events(app.EventJobCompleted, j.ID); len(ev) != 1 || ev[0]["protectedObject"].(map[string]any)["id"] != obj.ID {
		t.Fatalf("job.completed %v", ev)
	}

	// Browsing: one folder, a search, paging, exact content.
	snap := *j.SnapshotID
	inbox, next, err := f.m.SnapshotItems(ctx, snap, app.SnapshotItemFilter{Folder: "INBOX"})
	if err != nil || len(inbox) != 2 || next != "" || inbox[0].Subject != "Quarterly invoice" || inbox[0].Date == nil || inbox[0].Flags[0] != `\Seen` {
		t.Fatalf("INBOX %+v %q %v", inbox, next, err)
	}
	top, _, _ := f.m.SnapshotItems(ctx, snap, app.SnapshotItemFilter{Folder: "/"})
	if len(top) != 2 || top[0].Kind != "folder" || top[1].Path != "Archive" {
		t.Fatalf("top level %+v", top)
	}
	found, _, _ := f.m.SnapshotItems(ctx, snap, app.SnapshotItemFilter{Query: "INVOICE"})
	if len(found) != 2 {
		t.Fatalf("search %+v", found)
	}
	var all []app.SnapshotItem
	cursor := ""
	for range 10 {
		page, next, err := f.m.SnapshotItems(ctx, snap, app.SnapshotItemFilter{Limit: 3, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page...)
		if cursor = next; cursor == "" {
			break
		}
	}
	if len(all) != 7 { // 3 folders, 4 messages
		t.Fatalf("paged %d items: %+v", len(all), all)
	}
	it, rc, err := f.m.OpenSnapshotItem(ctx, snap, "m-Archive-7")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(got, f.engine.messages[2].body) || it.Size != int64(len(got)) {
		t.Fatalf("content: %d bytes, want %d", len(got), len(f.engine.messages[2].body))
	}
	if _, _, err := f.m.OpenSnapshotItem(ctx, snap, "m-nope-1"); app.ErrorCode(err) != app.ENOTFOUND {
		t.Fatalf("missing item: %v", err)
	}

	// A verify of the newest snapshot that matches every sample: green.
	vj := f.run(app.ActionVerify, obj.ID)
	if vj.State != app.JobSucceeded || vj.Queue != app.QueueVerify {
		t.Fatalf("verify %+v", vj)
	}
	ev := f.events(app.EventVerifyCompleted, vj.ID)
	if len(ev) != 1 {
		t.Fatalf("verify.completed %v", ev)
	}
	res := ev[0]["result"].(map[string]any)
	if res["state"] != "passed" || res["sampled"] != float64(4) || res["matched"] != float64(4) || res["mismatched"] != float64(0) {
		t.Fatalf("result %v", res)
	}
	if v := f.view(obj.ID); v.Readiness.State != app.ReadinessGreen || attention(v) != "" {
		t.Fatalf("after verify %+v", v)
	}

	// A second backup starts from the first snapshot's manifest; the
	// verified snapshot is no longer the newest: yellow.
	f.engine.failUIDs = nil
	j2 := f.run(app.ActionBackup, obj.ID)
	if j2.State != app.JobSucceeded || f.engine.prevSeen[1] != 7 {
		t.Fatalf("second backup %+v, prev %v", j2, f.engine.prevSeen)
	}
	if v := f.view(obj.ID); v.Readiness.State != app.ReadinessYellow {
		t.Fatalf("after second backup %+v", v.Readiness)
	}

	// The server refuses the sign-in: failed, the source failing with the
	// reason (never the password), attention source_unreachable.
	f.engine.backupErr = app.Fail("imap.auth_failed", map[string]any{"host": "imap.example.com"},
		errors.New("LOGIN failed for alice@example.com with "+password))
	j3 := f.run(app.ActionBackup, obj.ID)
	if j3.State != app.JobFailed || j3.Failure == nil || j3.Failure.Code != "imap.auth_failed" {
		t.Fatalf("failed backup %+v", j3)
	}
	s, _ := f.db.Source(ctx, src.ID)
	if s.State != app.SourceFailing || !strings.Contains(s.LastError, "IMAP sign-in refused") || strings.Contains(s.LastError, password) {
		t.Fatalf("source after failure: %q %q", s.State, s.LastError)
	}
	if v := f.view(obj.ID); attention(v) != app.AttentionSourceUnreachable {
		t.Fatalf("attention %v", attention(v))
	}
	f.engine.backupErr = nil
	f.run(app.ActionBackup, obj.ID)
	if s, _ := f.db.Source(ctx, src.ID); s.State != app.SourceOK || s.LastError != "" {
		t.Fatalf("source after success: %+v", s)
	}
}

// flipByte changes one byte in the first blob of every pack of the tenant.
func flipByte(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(filepath.Join(dir, "blobs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.Contains(p, string(filepath.Separator)+"packs"+string(filepath.Separator)) {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		os.Chmod(p, 0o600)
		b[30] ^= 0x01
		n++
		return os.WriteFile(p, b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestVerifyFindsAFlippedByte(t *testing.T) {
	t.Run("after a passing verify: a sample mismatches", func(t *testing.T) {
		f := newFixture(t)
		f.engine.failUIDs = nil
		_, obj := f.source()
		if j := f.run(app.ActionBackup, obj.ID); j.State != app.JobSucceeded {
			t.Fatalf("backup %+v", j)
		}
		if j := f.run(app.ActionVerify, obj.ID); j.State != app.JobSucceeded {
			t.Fatalf("first verify %+v", j)
		}
		if flipByte(t, f.dir) == 0 {
			t.Fatal("no pack to damage")
		}
		vj := f.run(app.ActionVerify, obj.ID)
		if vj.State != app.JobFailed || vj.Failure == nil || vj.ItemsFailed == 0 {
			t.Fatalf("verify of a damaged pack %+v", vj)
		}
		if vj.Failure.Code != "verify.hash_mismatch" && vj.Failure.Code != "repository.damaged" {
			t.Fatalf("failure %s", vj.Failure.Code)
		}
		res := f.events(app.EventVerifyCompleted, vj.ID)[0]["result"].(map[string]any)
		if res["state"] != "failed" || res["mismatched"].(float64) < 1 {
			t.Fatalf("result %v", res)
		}
		if len(f.events(app.EventJobFailed, vj.ID)) != 1 {
			t.Fatal("no job.failed")
		}
		v := f.view(obj.ID)
		if v.Readiness.State != app.ReadinessRed || (attention(v) != app.AttentionRestoreTestFailed && attention(v) != app.AttentionRepositoryDamaged) {
			t.Fatalf("after a failed verify %+v %s", v.Readiness, attention(v))
		}
	})
	t.Run("first verify: the pack check finds the damage", func(t *testing.T) {
		f := newFixture(t)
		f.engine.failUIDs = nil
		_, obj := f.source()
		f.run(app.ActionBackup, obj.ID)
		flipByte(t, f.dir)
		vj := f.run(app.ActionVerify, obj.ID)
		if vj.State != app.JobFailed || vj.Failure.Code != "repository.damaged" {
			t.Fatalf("verify %+v", vj)
		}
		v := f.view(obj.ID)
		if v.Readiness.State != app.ReadinessRed || attention(v) != app.AttentionRepositoryDamaged {
			t.Fatalf("after %+v %s", v.Readiness, attention(v))
		}
		// The damaged packs are checked again: still damaged next time.
		if vj := f.run(app.ActionVerify, obj.ID); vj.Failure == nil || vj.Failure.Code != "repository.damaged" {
			t.Fatalf("second verify %+v", vj)
		}
	})
	t.Run("no snapshot yet", func(t *testing.T) {
		f := newFixture(t)
		_, obj := f.source()
		vj := f.run(app.ActionVerify, obj.ID)
		if vj.State != app.JobFailed || vj.Failure.Code != "verify.object_no_snapshot" {
			t.Fatalf("verify %+v", vj)
		}
		if v := f.view(obj.ID); v.Readiness.State != app.ReadinessNoBackup {
			t.Fatalf("readiness %+v", v.Readiness)
		}
	})
}

func TestSourceChecksAndSchedules(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for _, tc := range []struct {
		err   error
		code  string
		field string
	}{
		{app.Fail("imap.auth_failed", nil, errors.New("NO [AUTHENTICATIONFAILED] Authentication failed. pw="+password)), app.ESOURCEAUTH, "password"},
		{app.Fail("imap.tls_failed", nil, errors.New("x509: certificate signed by unknown authority")), app.ESOURCETLS, "security"},
		{app.Fail("imap.connection_failed", nil, errors.New("dial tcp: connection refused")), app.ESOURCEUNREACHABLE, "host"},
		{errors.New("something else"), app.ESOURCECHECK, "host"},
	} {
		f.engine.checkErr = tc.err
		_, err := f.m.Create(ctx, app.SourceSpec{TenantID: f.tenant, Kind: app.SourceIMAP,
			IMAP:     app.IMAPSettings{Host: "imap.example.com", Port: 993, Security: "tls", Username: "a@example.com"},
			Password: password})
		var ae *app.Error
		if !errors.As(err, &ae) || ae.Code != tc.code || ae.Field != tc.field || strings.Contains(ae.Message, password) {
			t.Errorf("check error %v: got %v", tc.err, err)
		}
	}
	if list, _ := f.db.Sources(ctx, app.SourceFilter{}); len(list) != 0 {
		t.Fatalf("a failed check stored %d sources", len(list))
	}
	f.engine.checkErr = nil
	if _, err := f.m.Create(ctx, app.SourceSpec{TenantID: f.tenant, Kind: app.SourceIMAP, Password: "x",
		IMAP: app.IMAPSettings{Host: "h", Port: 143, Security: "none", Username: "u", TrustFingerprint: strings.Repeat("ab", 32)}}); app.ErrorCode(err) != app.EINVALID {
		t.Fatalf("fingerprint without TLS: %v", err)
	}

	src, obj := f.source()
	changed, err := protect.SyncSchedules(ctx, f.db, f.db)
	if err != nil || !changed {
		t.Fatalf("sync: %v %v", changed, err)
	}
	specs := func() map[string]string {
		list, _ := f.db.JobSchedules(ctx)
		m := map[string]string{}
		for _, s := range list {
			if s.TargetID == obj.ID {
				m[s.Action] = s.Spec
			}
		}
		return m
	}
	if s := specs(); s[app.ActionBackup] != app.DefaultObjectBackupSchedule(obj.ID) || s[app.ActionVerify] != "" {
		t.Fatalf("schedules %v", s)
	}
	// A password change is checked with the new password; a schedule change follows.
	f.engine.checked = nil
	if _, err := f.m.Update(ctx, src.ID, app.SourceUpdate{Password: app.Ptr("new-pass"), Schedule: app.Ptr("0 4 * * *")}); err != nil {
		t.Fatal(err)
	}
	if len(f.engine.checked) != 1 || f.engine.checked[0].Password != "new-pass" {
		t.Fatalf("re-check %+v", f.engine.checked)
	}
	if acct, _ := f.m.Account(ctx, src.ID); acct.Password != "new-pass" {
		t.Fatal("password not resealed")
	}
	f.run(app.ActionBackup, obj.ID)
	protect.SyncSchedules(ctx, f.db, f.db)
	if s := specs(); s[app.ActionBackup] != "0 4 * * *" || s[app.ActionVerify] != app.DefaultObjectVerifySchedule(obj.ID) {
		t.Fatalf("schedules after change %v", s)
	}
	// A rename alone is not checked; disabling stops the backup schedule.
	f.engine.checked = nil
	if _, err := f.m.Update(ctx, src.ID, app.SourceUpdate{DisplayName: app.Ptr("Alice B"), Disabled: app.Ptr(true)}); err != nil {
		t.Fatal(err)
	}
	if len(f.engine.checked) != 0 {
		t.Fatal("a rename was checked")
	}
	protect.SyncSchedules(ctx, f.db, f.db)
	if s := specs(); s[app.ActionBackup] != "" {
		t.Fatalf("disabled source still scheduled: %v", s)
	}
	// Deleting the source keeps the object and its snapshot; no schedules remain.
	if err := f.m.Delete(ctx, src.ID); err != nil {
		t.Fatal(err)
	}
	protect.SyncSchedules(ctx, f.db, f.db)
	if s := specs(); len(s) != 0 {
		t.Fatalf("schedules after delete %v", s)
	}
	v := f.view(obj.ID)
	if v.Protected || v.SourceID != nil || v.LastSnapshot == nil {
		t.Fatalf("object after delete %+v", v)
	}
	if snaps, _ := f.m.Snapshots(ctx, app.SnapshotFilter{ProtectedObjectID: obj.ID}); len(snaps) != 1 {
		t.Fatalf("snapshots after delete %d", len(snaps))
	}
	if _, err := f.runner.Submit(ctx, app.JobRequest{TenantID: f.tenant, Action: app.ActionBackup, TargetType: app.TargetProtectedObject,
		TargetID: obj.ID, Trigger: app.TriggerAPI}); app.ErrorCode(err) != app.EINVALID {
		t.Fatalf("backup of an object without source: %v", err)
	}
}

// An IMAP backup into an S3 target whose server stops mid-way fails with
// storage.unreachable and a retry scheduled; once the server is back, the
// retried run succeeds and the snapshot reads back whole.
func TestBackupWhileS3StopsIsRetried(t *testing.T) {
	f := newFixture(t)
	srv := s3test.StartVersity(t)
	b, err := s3backend.New(context.Background(), srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	key, _ := blobstore.LoadApplianceKey(f.dir)
	blobs, err := blobstore.New(blobstore.Config{Key: key, Catalog: f.db, Targets: oneTarget{b}, PackSize: 64 << 10,
		TempDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	f.engine.failUIDs = nil
	stopAfter := 2 // messages stored before the server stops
	backup := func(ctx context.Context, a imapbackup.Account, w *blobstore.Writer, prev []blobstore.Item,
		progress imapbackup.Progress) (*imapbackup.BackupResult, error) {
		if stopAfter >= 0 {
			// Enough new data to fill packs, with the server stopping part way.
			for i := range 40 {
				if i == stopAfter {
					srv.Stop()
				}
				if _, err := w.PutItem(ctx, bytes.NewReader(bytes.Repeat([]byte(fmt.Sprintf("message %d\r\n", i)), 20000))); err != nil {
					return nil, err
				}
			}
		}
		return f.engine.Backup(ctx, a, w, prev, progress)
	}
	m := protect.New(protect.Config{Sources: f.db, Objects: f.db, Box: mustBox(t, f.dir), Blobs: blobs, Catalog: f.db,
		Engine: protect.Engine{Check: f.engine.Check, Backup: backup}, Now: f.clock.Now, Logger: slog.New(slog.DiscardHandler)})
	runner := jobs.New(jobs.Config{Store: f.db, Now: f.clock.Now, Logger: slog.New(slog.DiscardHandler)})
	runner.Register(m.BackupKind())
	if err := runner.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer runner.Close()
	f.m, f.runner = m, runner
	_, o := f.source()

	j := f.run(app.ActionBackup, o.ID)
	if j.State != app.JobFailed || j.Failure == nil || j.Failure.Code != "storage.unreachable" || !j.Failure.Transient ||
		j.Failure.Retry.State != app.RetryScheduled {
		t.Fatalf("backup during the outage: %s %+v", j.State, j.Failure)
	}
	snaps, _ := f.db.Snapshots(context.Background(), app.SnapshotFilter{ProtectedObjectID: o.ID})
	if len(snaps) != 0 {
		t.Fatalf("a failed backup left %d snapshots", len(snaps))
	}

	// The server is back; the retry runs when due.
	srv.Start()
	stopAfter = -1
	f.clock.Add(time.Hour)
	runner.Poke()
	var retried *app.Job
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && retried == nil; time.Sleep(20 * time.Millisecond) {
		list, err := f.db.Jobs(context.Background(), app.JobFilter{TargetID: o.ID, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range list {
			if x.Trigger == app.TriggerRetry && app.JobTerminal(x.State) {
				retried = x
			}
		}
	}
	if retried == nil || retried.State != app.JobSucceeded || retried.SnapshotID == nil {
		t.Fatalf("the retried backup: %+v", retried)
	}
	sc, err := blobs.VerifySample(context.Background(), *retried.SnapshotID, 0)
	if err != nil || sc.Mismatched != 0 || sc.Matched == 0 {
		t.Fatalf("snapshot of the retried backup: %+v %v", sc, err)
	}
	if _, err := blobs.CollectGarbage(context.Background(), f.tenant); err != nil {
		t.Fatal(err)
	}
	if pc, err := blobs.CheckPacks(context.Background(), f.tenant, time.Time{}); err != nil || len(pc.Damaged) != 0 {
		t.Fatalf("packs after the outage: %+v %v", pc, err)
	}
}

func mustBox(t *testing.T, dir string) *webhooks.SecretBox {
	box, err := webhooks.OpenSecretBox(dir)
	if err != nil {
		t.Fatal(err)
	}
	return box
}
