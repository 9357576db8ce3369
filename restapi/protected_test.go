package restapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/blobstore"
	"backstop/app/imapbackup"
	"backstop/app/jobs"
	"backstop/app/protect"
	"backstop/app/webhooks"
)

// imapFake is the IMAP engine of the scenario tests: a check answering
// what the test sets, and a backup storing real messages in the blob store
// and reporting one it could not fetch.
type imapFake struct {
	mu       sync.Mutex
	checkErr error
}

var fakeMessages = []struct {
	folder, subject, from string
	uid                   uint32
	body                  string
}{
	{"INBOX", "Invoice 42", "billing@vendor.example", 1, "Subject: Invoice 42\r\nFrom: billing@vendor.example\r\n\r\nPlease pay.\r\n"},
	{"INBOX", "Lunch", "bob@example.com", 2, "Subject: Lunch\r\n\r\nNoon?\r\n"},
	{"INBOX", "Report", "carol@example.com", 3, "Subject: Report\r\n\r\nAttached.\r\n"},
	{"Sent", "Re: Lunch", "alice@example.com", 5, "Subject: Re: Lunch\r\n\r\nYes.\r\n"},
}

func (f *imapFake) check(_ context.Context, _ imapbackup.Account) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.checkErr
}

func (f *imapFake) backup(ctx context.Context, a imapbackup.Account, w *blobstore.Writer, _ []blobstore.Item,
	_ imapbackup.Progress) (*imapbackup.BackupResult, error) {
	res := &imapbackup.BackupResult{}
	seen := map[string]bool{}
	for _, m := range fakeMessages {
		if !seen[m.folder] {
			seen[m.folder] = true
			res.Items = append(res.Items, blobstore.Item{ID: "f-" + m.folder, Kind: "folder", Path: m.folder, Name: m.folder})
		}
		c, err := w.PutItem(ctx, strings.NewReader(m.body))
		if err != nil {
			return nil, err
		}
		meta, _ := json.Marshal(imapbackup.MessageMeta{Folder: m.folder, UID: m.uid, Subject: m.subject, From: m.from, Flags: []string{`\Seen`}})
		res.Items = append(res.Items, blobstore.Item{ID: fmt.Sprintf("m-%s-%d", m.folder, m.uid), Kind: "message", Path: m.folder,
			Name: fmt.Sprint(m.uid), Content: c, Meta: meta})
		res.Messages++
	}
	res.Added = res.Messages
	res.Failed = []imapbackup.ItemFailure{{Folder: "INBOX", UID: 4,
		Err: app.Fail("imap.connection_failed", map[string]any{"host": a.Host}, errors.New("UID FETCH 4: NO"))}}
	return res, nil
}

// withProtect adds the protected-object layer to the harness: a real blob
// store on the default local target, the protect manager with the fake
// engine, and a running job runner.
func (h *harness) withProtect(t *testing.T) *imapFake {
	t.Helper()
	key, err := blobstore.LoadApplianceKey(h.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	blobs, err := blobstore.New(blobstore.Config{Key: key, Catalog: h.db, Targets: h.storage, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	box, err := webhooks.OpenSecretBox(h.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	fake := &imapFake{}
	m := protect.New(protect.Config{Sources: h.db, Objects: h.db, Box: box, Blobs: blobs, Catalog: h.db,
		Engine: protect.Engine{Check: fake.check, Backup: fake.backup}, Now: h.clock.Now, Logger: discardLogger()})
	runner := jobs.New(jobs.Config{Store: h.db, Schedules: h.db, Now: h.clock.Now, Logger: discardLogger()})
	runner.Register(m.BackupKind())
	runner.Register(m.VerifyKind())
	if err := runner.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { runner.Close() })
	h.srv.Sources, h.srv.Protected, h.srv.Snapshots, h.srv.Directory = m, h.db, m, h.db
	h.srv.JobStore, h.srv.JobRunner, h.srv.JobFeed = h.db, runner, runner.Broker()
	return fake
}

func (h *harness) waitJob(id string) *app.Job {
	h.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		j, err := h.db.Job(context.Background(), id)
		if err != nil {
			h.t.Fatal(err)
		}
		if app.JobTerminal(j.State) {
			return j
		}
	}
	h.t.Fatalf("job %s did not finish", id)
	return nil
}

const imapPassword = "Tr0ub4dor&3-imap"

func TestProtectedObjectsScenario(t *testing.T) {
	h := newHarness(t, app.EditionProvider, nil)
	fake := h.withProtect(t)
	h.user("admin@acme.example", "pw-tenant-123", h.tenantA.ID)
	h.user("admin@beta.example", "pw-tenant-456", h.tenantB.ID)
	h.user("root@msp.example", "pw-provider-123", "")
	ac, acsrf := h.session("admin@acme.example", "pw-tenant-123")
	bc, bcsrf := h.session("admin@beta.example", "pw-tenant-456")
	pc, _ := h.session("root@msp.example", "pw-provider-123")
	sessA, sessB := []any{ac, "X-CSRF-Token", acsrf}, []any{bc, "X-CSRF-Token", bcsrf}
	var bodies [][]byte
	do := func(method, path, body string, hdr ...any) *response {
		t.Helper()
		r := h.do(method, path, body, hdr...)
		bodies = append(bodies, r.body)
		return r
	}
	src := func(extra string) string {
		return `{"kind":"imap","tenantId":"` + h.tenantA.ID + `","displayName":"Alice","host":"imap.example.com","port":993,` +
			`"security":"tls","username":"alice@example.com","password":"` + imapPassword + `"` + extra + `}`
	}

	// Sources are for the web session: API keys get 401.
	anyKey, _ := h.key(h.tenantA.ID, app.ScopeItemsRead, app.ScopeRestoreWrite, app.ScopeUsersRead, app.ScopeUsersWrite)
	check(t, do("GET", "/api/v1/sources", "", bearer(anyKey)...), 401, app.EUNAUTHORIZED)
	check(t, do("POST", "/api/v1/sources", src(""), bearer(anyKey)...), 401, app.EUNAUTHORIZED)
	check(t, do("DELETE", "/api/v1/sources/src_x", "", bearer(anyKey)...), 401, app.EUNAUTHORIZED)

	// Strict bodies.
	r := do("POST", "/api/v1/sources", src(`,"colour":"red"`), sessA...)
	check(t, r, 422, app.EINVALID, "colour")
	r = do("POST", "/api/v1/sources", strings.Replace(src(""), `"tls"`, `"ssl"`, 1), sessA...)
	check(t, r, 422, app.EINVALID, "body.security")
	r = do("POST", "/api/v1/sources", strings.Replace(src(""), `"port":993,`, "", 1), sessA...)
	check(t, r, 422, app.EINVALID, "body.port")
	check(t, do("POST", "/api/v1/sources", src(`,"trustFingerprint":"zz"`), sessA...), 422, app.EINVALID, "body.trustFingerprint")
	// Another tenant's id is refused like an unknown one.
	check(t, do("POST", "/api/v1/sources", strings.Replace(src(""), h.tenantA.ID, h.tenantB.ID, 1), sessA...), 422, app.EINVALID, "body.tenantId")

	// The login check fails: 422 with the reason, nothing stored.
	fake.checkErr = app.Fail("imap.auth_failed", nil, errors.New("NO [AUTHENTICATIONFAILED] Invalid credentials"))
	r = do("POST", "/api/v1/sources", src(""), sessA...)
	check(t, r, 422, app.ESOURCEAUTH, "AUTHENTICATIONFAILED", "body.password", "alice@example.com")
	fake.checkErr = app.Fail("imap.tls_failed", nil, errors.New("x509: certificate signed by unknown authority"))
	check(t, do("POST", "/api/v1/sources", src(""), sessA...), 422, app.ESOURCETLS, "unknown authority")
	fake.checkErr = app.Fail("imap.connection_failed", nil, errors.New("dial tcp 192.0.2.1:993: connection refused"))
	check(t, do("POST", "/api/v1/sources", src(""), sessA...), 422, app.ESOURCEUNREACHABLE, "connection refused")
	check(t, do("GET", "/api/v1/sources", "", sessA...), 200, "", `"items":[]`)

	// Created: 201, the password sealed and never shown.
	fake.checkErr = nil
	r = do("POST", "/api/v1/sources", src(`,"trustFingerprint":"`+strings.Repeat("AB:", 31)+`AB"`), sessA...)
	check(t, r, 201, "", `"state":"ok"`, `"kind":"imap"`, `"trustFingerprint":"`+strings.Repeat("ab", 32)+`"`)
	var source app.SourceView
	json.Unmarshal(r.body, &source)
	if !app.HasPrefix(source.ID, app.PrefixSource) || len(source.ProtectedObjectIDs) != 1 || source.LastError != nil {
		t.Fatalf("source %s", r.body)
	}
	objID := source.ProtectedObjectIDs[0]
	check(t, do("GET", "/api/v1/sources", "", sessA...), 200, "", source.ID)
	check(t, do("GET", "/api/v1/sources", "", sessB...), 200, "", `"items":[]`)
	check(t, do("GET", "/api/v1/sources", "", pc), 200, "", source.ID)
	check(t, do("PATCH", "/api/v1/sources/"+source.ID, `{"displayName":"Alice B."}`, sessB...), 404, app.ENOTFOUND)
	check(t, do("PATCH", "/api/v1/sources/"+source.ID, `{"username":"x"}`, sessA...), 422, app.EINVALID, "username")
	fake.checkErr = app.Fail("imap.auth_failed", nil, errors.New("NO LOGIN failed"))
	check(t, do("PATCH", "/api/v1/sources/"+source.ID, `{"password":"wrong-one"}`, sessA...), 422, app.ESOURCEAUTH)
	fake.checkErr = nil
	check(t, do("PATCH", "/api/v1/sources/"+source.ID, `{"displayName":"Alice B.","schedule":"0 3 * * *"}`, sessA...), 200, "",
		`"displayName":"Alice B."`, `"schedule":"0 3 * * *"`)

	// Protected objects: scope before existence, another tenant's is 404.
	itemsA, _ := h.key(h.tenantA.ID, app.ScopeItemsRead)
	itemsB, _ := h.key(h.tenantB.ID, app.ScopeItemsRead)
	restoreA, _ := h.key(h.tenantA.ID, app.ScopeRestoreWrite)
	usersA, _ := h.key(h.tenantA.ID, app.ScopeUsersRead, app.ScopeUsersWrite)
	provider, _ := h.key("", app.ScopeItemsRead, app.ScopeStatusRead)
	check(t, do("GET", "/api/v1/protected-objects/po_unknown", "", bearer(usersA)...), 403, app.EFORBIDDEN)
	check(t, do("GET", "/api/v1/protected-objects", "", bearer(usersA)...), 403, app.EFORBIDDEN)
	check(t, do("GET", "/api/v1/protected-objects/"+objID, "", bearer(itemsB)...), 404, app.ENOTFOUND)
	check(t, do("GET", "/api/v1/protected-objects/po_unknown", "", bearer(itemsA)...), 404, app.ENOTFOUND)
	r = do("GET", "/api/v1/protected-objects/"+objID, "", bearer(itemsA)...)
	check(t, r, 200, "", `"kind":"imap"`, `"source":"imap"`, `"protected":true`, `"displayName":"Alice B."`, `"address":"alice@example.com"`,
		`"lastSnapshot":null`, `"state":"no_backup"`, `"attention":null`, `"sourceId":"`+source.ID+`"`)
	check(t, do("GET", "/api/v1/protected-objects?kind=imap", "", bearer(itemsA)...), 200, "", objID)
	check(t, do("GET", "/api/v1/protected-objects?kind=mailbox", "", bearer(itemsA)...), 200, "", `"items":[]`)
	check(t, do("GET", "/api/v1/protected-objects?kind=fax", "", bearer(itemsA)...), 422, app.EINVALID, "query.kind")
	check(t, do("GET", "/api/v1/protected-objects", "", bearer(itemsB)...), 200, "", `"items":[]`)
	check(t, do("GET", "/api/v1/protected-objects", "", bearer(provider)...), 200, "", `"tenantId":"`+h.tenantA.ID+`"`)

	// A backup through the API: 202, then partial with the message it could not fetch.
	check(t, do("POST", "/api/v1/backups", `{"targetType":"protected_object","targetId":"`+objID+`"}`, bearer(itemsA)...), 403, app.EFORBIDDEN)
	r = do("POST", "/api/v1/backups", `{"targetType":"protected_object","targetId":"`+objID+`"}`, bearer(restoreA)...)
	check(t, r, 202, "", `"queue":"imap_backup"`, `"type":"protected_object"`)
	var job app.Job
	json.Unmarshal(r.body, &job)
	j := h.waitJob(job.ID)
	if j.State != app.JobPartial || len(j.ItemCauses) != 1 || j.ItemCauses[0].Code != "imap.connection_failed" || j.SnapshotID == nil {
		t.Fatalf("backup job %+v", j)
	}
	snap := *j.SnapshotID
	check(t, do("GET", "/api/v1/protected-objects/"+objID, "", bearer(itemsA)...), 200, "", `"items":4`, `"state":"unverified"`, snap)

	// Snapshots and items.
	base := "/api/v1/protected-objects/" + objID + "/snapshots"
	check(t, do("GET", base, "", bearer(itemsA)...), 200, "", `"id":"`+snap+`"`, `"jobId":"`+job.ID+`"`, `"addedItems":4`)
	check(t, do("GET", base, "", bearer(itemsB)...), 404, app.ENOTFOUND)
	check(t, do("GET", base+"/"+snap+"/items", "", bearer(usersA)...), 403, app.EFORBIDDEN)
	check(t, do("GET", base+"/sn_other/items", "", bearer(itemsA)...), 404, app.ENOTFOUND)
	r = do("GET", base+"/"+snap+"/items?folder=INBOX", "", bearer(itemsA)...)
	check(t, r, 200, "", `"subject":"Invoice 42"`, `"from":"billing@vendor.example"`, `"flags":["\\Seen"]`)
	var page struct {
		Items      []app.SnapshotItem
		NextCursor *string
	}
	json.Unmarshal(r.body, &page)
	if len(page.Items) != 3 || page.NextCursor != nil {
		t.Fatalf("INBOX %s", r.body)
	}
	r = do("GET", base+"/"+snap+"/items?q=LUNCH", "", bearer(itemsA)...)
	json.Unmarshal(r.body, &page)
	if len(page.Items) != 2 {
		t.Fatalf("search %s", r.body)
	}
	var ids []string
	cursor := ""
	for range 10 {
		r = do("GET", base+"/"+snap+"/items?limit=2"+cursor, "", bearer(itemsA)...)
		check(t, r, 200, "")
		page.NextCursor = nil
		json.Unmarshal(r.body, &page)
		for _, it := range page.Items {
			ids = append(ids, it.ID)
		}
		if page.NextCursor == nil {
			break
		}
		cursor = "&cursor=" + *page.NextCursor
	}
	if len(ids) != 6 || ids[0] != "f-INBOX" || ids[5] != "m-Sent-5" {
		t.Fatalf("paged ids %v", ids)
	}
	check(t, do("GET", base+"/"+snap+"/items?cursor=bogus", "", bearer(itemsA)...), 422, app.EINVALID, "query.cursor")

	// Download: restore:write, exact bytes, audited.
	content := base + "/" + snap + "/items/m-INBOX-1/content"
	check(t, do("GET", content, "", bearer(itemsA)...), 403, app.EFORBIDDEN)
	check(t, do("GET", base+"/"+snap+"/items/m-nope/content", "", bearer(restoreA)...), 404, app.ENOTFOUND)
	before := h.auditCount()
	r = do("GET", content, "", bearer(restoreA)...)
	check(t, r, 200, "")
	if string(r.body) != fakeMessages[0].body || r.header.Get("Content-Type") != "message/rfc822" ||
		r.header.Get("Content-Disposition") != `attachment; filename="1.eml"` {
		t.Fatalf("content %q %v", r.body, r.header)
	}
	if h.auditCount() != before+1 {
		t.Fatal("download not audited")
	}
	row := h.auditRows(1)[0]
	if row.Action != "snapshotItems.content" || row.Target != content || row.TenantID != h.tenantA.ID || row.Status != 200 {
		t.Fatalf("audit row %+v", row)
	}

	// A verify through the API makes readiness green.
	verifyA, _ := h.key(h.tenantA.ID, app.ScopeVerifyWrite)
	r = do("POST", "/api/v1/verifies", `{"targetType":"protected_object","targetId":"`+objID+`"}`, bearer(verifyA)...)
	check(t, r, 202, "", `"queue":"verify"`)
	json.Unmarshal(r.body, &job)
	if j := h.waitJob(job.ID); j.State != app.JobSucceeded {
		t.Fatalf("verify %+v", j)
	}
	check(t, do("GET", "/api/v1/protected-objects/"+objID, "", bearer(itemsA)...), 200, "", `"state":"green"`)
	r = do("GET", "/api/v1/status", "", bearer(provider)...)
	check(t, r, 200, "", `"protectedObjects":{"total":1,"mailboxes":0,"drives":0,"imap":1,"needingAttention":0}`)

	// The directory.
	check(t, do("GET", "/api/v1/directory", "", bearer(itemsA)...), 403, app.EFORBIDDEN)
	r = do("GET", "/api/v1/directory", "", bearer(usersA)...)
	check(t, r, 200, "", `"kind":"imap_account"`, `"email":"alice@example.com"`, `"protected":true`, `"protectedObjectIds":["`+objID+`"]`)
	var dir struct{ Items []app.DirectoryEntryView }
	json.Unmarshal(r.body, &dir)
	entry := dir.Items[0].ID
	check(t, do("GET", "/api/v1/directory/summary", "", bearer(usersA)...), 200, "", `"imapAccounts":1`, `"protected":1`, `"tenantId":"`+h.tenantA.ID+`"`)
	usersB, _ := h.key(h.tenantB.ID, app.ScopeUsersWrite)
	check(t, do("PUT", "/api/v1/directory/"+entry+"/protection", `{"protected":false}`, bearer(itemsA)...), 403, app.EFORBIDDEN)
	check(t, do("PUT", "/api/v1/directory/"+entry+"/protection", `{"protected":false}`, bearer(usersB)...), 404, app.ENOTFOUND)
	check(t, do("PUT", "/api/v1/directory/"+entry+"/protection", `{}`, bearer(usersA)...), 422, app.EINVALID, "body.protected")
	check(t, do("PUT", "/api/v1/directory/"+entry+"/protection", `{"protected":"no"}`, bearer(usersA)...), 422, app.EINVALID, "body.protected")
	check(t, do("PUT", "/api/v1/directory/"+entry+"/protection", `{"protected":false}`, bearer(usersA)...), 200, "", `"protected":false`)
	check(t, do("GET", "/api/v1/protected-objects/"+objID, "", bearer(itemsA)...), 200, "", `"protected":false`)
	check(t, do("POST", "/api/v1/backups", `{"targetType":"protected_object","targetId":"`+objID+`"}`, bearer(restoreA)...), 422, app.EINVALID, "body.targetId")
	check(t, do("PUT", "/api/v1/directory/"+entry+"/protection", `{"protected":true}`, bearer(usersA)...), 200, "", `"protected":true`)

	// Deleting the source keeps the object and its snapshots.
	check(t, do("DELETE", "/api/v1/sources/"+source.ID, "", sessB...), 404, app.ENOTFOUND)
	r = do("DELETE", "/api/v1/sources/"+source.ID, "", sessA...)
	check(t, r, 204, "")
	check(t, do("GET", "/api/v1/protected-objects/"+objID, "", bearer(itemsA)...), 200, "", `"protected":false`, `"sourceId":null`, snap)
	check(t, do("GET", base, "", bearer(itemsA)...), 200, "", snap)
	check(t, do("GET", "/api/v1/directory", "", bearer(usersA)...), 200, "", `"items":[]`)

	for _, b := range bodies {
		if bytes.Contains(b, []byte(imapPassword)) {
			t.Fatalf("the password is in a response: %s", b)
		}
	}
}
