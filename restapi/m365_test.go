package restapi

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"backstop/app"
	"backstop/app/blobstore"
	"backstop/app/graph"
	"backstop/app/jobs"
	"backstop/app/m365"
	"backstop/app/protect"
	"backstop/app/webhooks"
)

const m365Secret = "Q~client.secret-0123456789abcdef"

// withM365 adds the protected-object layer with a fake Microsoft 365
// engine (one user) and a running runner with the directory sync kind.
func (h *harness) withM365(t *testing.T) {
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
	runner := jobs.New(jobs.Config{Store: h.db, Schedules: h.db, Now: h.clock.Now, Logger: discardLogger()})
	engine := protect.M365Engine{
		NewClient: func(graph.Config) (*graph.Client, error) { return &graph.Client{}, nil },
		ConsentURL: func(login, tenant, client string) string {
			return login + "/" + tenant + "/adminconsent?client_id=" + client
		},
		Check: func(context.Context, *graph.Client) error { return nil },
		SyncDirectory: func(context.Context, *graph.Client, m365.Progress) ([]m365.DirectoryUser, error) {
			return []m365.DirectoryUser{{ExternalID: "u-1", Kind: app.DirectoryUser, DisplayName: "Alice", Email: "alice@contoso.example",
				Enabled: true, Licensed: true, Licenses: []string{"SPE_E3"}, HasMailbox: true}}, nil
		},
	}
	m := protect.New(protect.Config{Sources: h.db, Objects: h.db, Directory: h.db, Jobs: runner, Box: box, Blobs: blobs, Catalog: h.db,
		M365: engine, Now: h.clock.Now, Logger: discardLogger()})
	runner.Register(m.BackupKind())
	runner.Register(m.SyncKind())
	if err := runner.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { runner.Close() })
	h.srv.Sources, h.srv.Protected, h.srv.Snapshots, h.srv.Directory, h.srv.Protection = m, h.db, m, h.db, m
	h.srv.JobStore, h.srv.JobRunner, h.srv.JobFeed = h.db, runner, runner.Broker()
}

func TestM365SourceSyncAndDirectorySummary(t *testing.T) {
	h := newHarness(t, app.EditionProvider, nil)
	h.withM365(t)
	h.user("admin@acme.example", "pw-tenant-123", h.tenantA.ID)
	h.user("admin@beta.example", "pw-tenant-456", h.tenantB.ID)
	ac, acsrf := h.session("admin@acme.example", "pw-tenant-123")
	bc, bcsrf := h.session("admin@beta.example", "pw-tenant-456")
	sessA, sessB := []any{ac, "X-CSRF-Token", acsrf}, []any{bc, "X-CSRF-Token", bcsrf}
	body := func(extra string) string {
		return `{"kind":"m365","tenantId":"` + h.tenantA.ID + `","azureTenantId":"contoso.onmicrosoft.com",` +
			`"clientId":"11111111-2222-3333-4444-555555555555","clientSecret":"` + m365Secret + `"` + extra + `}`
	}

	check(t, h.do("POST", "/api/v1/sources", strings.Replace(body(""), `,"clientSecret":"`+m365Secret+`"`, "", 1), sessA...),
		422, app.EINVALID, "body.clientSecret")
	check(t, h.do("POST", "/api/v1/sources", body(`,"graphUrl":"ftp://graph"`), sessA...), 422, app.EINVALID, "body.graphUrl")
	r := h.do("POST", "/api/v1/sources", body(`,"autoProtect":true`), sessA...)
	check(t, r, 201, "", `"kind":"m365"`, `"clientId":"11111111-2222-3333-4444-555555555555"`, `"autoProtect":true`,
		`"consentUrl":"https://login.microsoftonline.com/contoso.onmicrosoft.com/adminconsent?client_id=`,
		`"graphUrl":"https://graph.microsoft.com/v1.0"`)
	if strings.Contains(string(r.body), m365Secret) {
		t.Fatalf("the secret is shown: %s", r.body)
	}
	var src app.SourceView
	json.Unmarshal(r.body, &src)
	r = h.do("GET", "/api/v1/sources", "", sessA...)
	check(t, r, 200, "", src.ID)
	if strings.Contains(string(r.body), m365Secret) {
		t.Fatalf("the secret is listed: %s", r.body)
	}
	check(t, h.do("PATCH", "/api/v1/sources/"+src.ID, `{"clientSecret":"another-secret-value","autoProtect":false}`, sessA...),
		200, "", `"autoProtect":false`)

	// POST /sources/{id}/sync: session only, 202 with the job, tenant-scoped.
	usersA, _ := h.key(h.tenantA.ID, app.ScopeUsersRead, app.ScopeUsersWrite)
	check(t, h.do("POST", "/api/v1/sources/"+src.ID+"/sync", "", bearer(usersA)...), 401, app.EUNAUTHORIZED)
	check(t, h.do("POST", "/api/v1/sources/"+src.ID+"/sync", "", sessB...), 404, app.ENOTFOUND)
	r = h.do("POST", "/api/v1/sources/"+src.ID+"/sync", "", sessA...)
	check(t, r, 202, "", `"queue":"directory_sync"`, `"type":"source"`)
	var j app.Job
	json.Unmarshal(r.body, &j)
	if got := h.waitJob(j.ID); got.State != app.JobSucceeded {
		t.Fatalf("sync job %+v", got)
	}

	// The directory: filters, and the entry protected (autoProtect was
	// on at the first sync, queued at creation).
	check(t, h.do("GET", "/api/v1/directory?q=ALICE&licensed=true", "", bearer(usersA)...), 200, "", `"email":"alice@contoso.example"`, `"removedAt":null`)
	check(t, h.do("GET", "/api/v1/directory?q=nobody", "", bearer(usersA)...), 200, "", `"items":[]`)
	check(t, h.do("GET", "/api/v1/directory?protected=maybe", "", bearer(usersA)...), 422, app.EINVALID)

	// Daily rows.
	if err := h.db.RecordDailyCounts(context.Background(), "2026-11-21"); err != nil {
		t.Fatal(err)
	}
	check(t, h.do("GET", "/api/v1/directory/summary", "", bearer(usersA)...), 200, "", `"users":1`)
	r = h.do("GET", "/api/v1/directory/summary?from=2026-11-01&to=2026-11-30", "", bearer(usersA)...)
	check(t, r, 200, "", `"daily":[{"date":"2026-11-21","tenantId":"`+h.tenantA.ID+`","users":1`)
	usersB, _ := h.key(h.tenantB.ID, app.ScopeUsersRead)
	check(t, h.do("GET", "/api/v1/directory/summary?from=2026-11-01&to=2026-11-30", "", bearer(usersB)...), 200, "", `"daily":[]`)
	check(t, h.do("GET", "/api/v1/directory/summary?from=2026-11-30&to=2026-11-01", "", bearer(usersA)...), 422, app.EINVALID, "query.to")
	check(t, h.do("GET", "/api/v1/directory/summary?from=2025-01-01&to=2026-11-01", "", bearer(usersA)...), 422, app.EINVALID, "366")
	check(t, h.do("GET", "/api/v1/directory/summary?from=2026-13-01&to=2026-12-01", "", bearer(usersA)...), 422, app.EINVALID, "query.from")
	check(t, h.do("GET", "/api/v1/directory/summary?from=2026-01-01", "", bearer(usersA)...), 422, app.EINVALID, "query.to")
	check(t, h.do("GET", "/api/v1/directory/summary?from=2026-01-01&to=2026-12-31", "", bearer(usersA)...), 200, "")
}
