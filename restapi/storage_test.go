package restapi

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"backstop/app"
	"backstop/app/blobstore"
	"backstop/app/targets"
	"backstop/app/webhooks"
	"backstop/store"
)

// fakeBackends are real local backends (one directory per local path or
// S3 bucket) whose free space and write errors a test sets. They report
// plenty of free space unless told otherwise.
type fakeBackends struct {
	mu     sync.Mutex
	byRoot map[string]*fakeBackend
}

type fakeBackend struct {
	blobstore.Backend
	mu        sync.Mutex
	space     blobstore.Space
	createErr error
}

var plentyOfSpace = blobstore.Space{Known: true, CapacityBytes: 100 << 30, FreeBytes: 60 << 30}

func (f *fakeBackend) set(space blobstore.Space, createErr error) {
	f.mu.Lock()
	f.space, f.createErr = space, createErr
	f.mu.Unlock()
}

func (f *fakeBackend) Create(ctx context.Context, name string, r io.Reader, size int64) error {
	f.mu.Lock()
	err := f.createErr
	f.mu.Unlock()
	if err != nil {
		return err
	}
	return f.Backend.Create(ctx, name, r, size)
}

func (f *fakeBackend) Space(context.Context) (blobstore.Space, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.space, nil
}

func (fb *fakeBackends) open(dir string, space blobstore.Space) (*fakeBackend, error) {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	if b := fb.byRoot[dir]; b != nil {
		return b, nil
	}
	l, err := blobstore.NewLocal(dir)
	if err != nil {
		return nil, err
	}
	fb.byRoot[dir] = &fakeBackend{Backend: l, space: space}
	return fb.byRoot[dir], nil
}

func (fb *fakeBackends) get(dir string) *fakeBackend {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	return fb.byRoot[dir]
}

// deniedBucket is the S3 bucket the fake S3 refuses, as a provider refuses
// wrong credentials.
const deniedBucket = "denied-bucket"

// newTestStorage is the storage Manager of the harness: the default local
// target at dir/blobs made (as on a fresh install), S3 targets faked by
// local directories under dir/s3, the monitor not running (tests check
// targets when they choose).
func newTestStorage(t testing.TB, db *store.DB, dir string) (*targets.Manager, *fakeBackends) {
	box, err := webhooks.OpenSecretBox(dir)
	if err != nil {
		t.Fatal(err)
	}
	fb := &fakeBackends{byRoot: map[string]*fakeBackend{}}
	m := targets.New(targets.Config{Store: db, Box: box, DataDir: dir, MinFreeBytes: 1 << 30, Logger: slog.New(slog.DiscardHandler),
		OpenLocal: func(d string) (blobstore.Backend, error) { return fb.open(d, plentyOfSpace) },
		OpenS3: func(_ context.Context, s app.S3Settings) (blobstore.Backend, error) {
			if s.Bucket == deniedBucket {
				return nil, fmt.Errorf("bucket %s: AccessDenied: %w", s.Bucket, blobstore.ErrDenied)
			}
			return fb.open(filepath.Join(dir, "s3", s.Bucket), blobstore.Space{})
		},
	})
	if err := m.EnsureDefault(context.Background()); err != nil {
		t.Fatal(err)
	}
	return m, fb
}

// defaultBackend is the fake behind the default local target.
func (h *harness) defaultBackend() *fakeBackend {
	return h.backends.get(filepath.Join(h.dataDir, "blobs"))
}

func (h *harness) defaultTarget() *app.StorageTarget {
	ts, err := h.storage.Targets(context.Background(), app.StorageTargetFilter{})
	if err != nil {
		h.t.Fatal(err)
	}
	for _, t := range ts {
		if t.Default {
			return t
		}
	}
	h.t.Fatal("no default target")
	return nil
}

// pack records a pack of the blob store, as the blob store would.
func (h *harness) pack(tenantID, targetID string, size int64) {
	err := h.db.WriteTx(context.Background(), func(tx *sql.Tx) error {
		_, err := tx.Exec(`INSERT INTO blob_packs (tenant_id, pack_id, target_id, size, blobs, created_at) VALUES (?, ?, ?, ?, 1, 0)`,
			tenantID, app.NewID("pk_"), targetID, size)
		return err
	})
	if err != nil {
		h.t.Fatal(err)
	}
}

const testS3Secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzzSECRET"

func TestStorageRead(t *testing.T) {
	h := newHarness(t, app.EditionProvider, nil)
	ctx := context.Background()
	local := h.defaultTarget()
	s3, err := h.storage.Create(ctx, app.StorageTargetSpec{Name: "Wasabi", Kind: app.StorageKindS3, TenantIDs: []string{h.tenantB.ID},
		S3: app.S3Settings{Endpoint: "s3.wasabisys.com", Bucket: "tenant-b", AccessKeyID: "AKIAB", SecretAccessKey: testS3Secret, TLS: true}})
	if err != nil {
		t.Fatal(err)
	}
	h.pack(h.tenantA.ID, local.ID, 100)
	h.pack(h.tenantB.ID, local.ID, 30) // written before tenant B moved to S3
	h.pack(h.tenantB.ID, s3.ID, 5)

	keyA, _ := h.key(h.tenantA.ID, app.ScopeStatusRead)
	keyB, _ := h.key(h.tenantB.ID, app.ScopeStatusRead)
	noScope, _ := h.key(h.tenantA.ID, app.ScopeJobsRead)
	provider, _ := h.key("", app.ScopeStatusRead)

	type view struct {
		State       string
		UsedBytes   int64
		FreeBytes   int64
		StoredBytes int64
		Targets     []struct {
			ID          string
			Kind        string
			State       string
			Default     bool
			StoredBytes int64
			TenantIDs   []string
			FreeBytes   *int64
		}
	}
	read := func(hdr ...any) view {
		t.Helper()
		r := h.do("GET", "/api/v1/storage", "", hdr...)
		check(t, r, 200, "")
		if bytes.Contains(r.body, []byte(testS3Secret)) || bytes.Contains(r.body, []byte("ecretAccessKey")) {
			t.Fatalf("the secret is in %s", r.body)
		}
		var v view
		if err := json.Unmarshal(r.body, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}

	check(t, h.do("GET", "/api/v1/storage", "", bearer(noScope)...), 403, app.EFORBIDDEN)
	check(t, h.do("GET", "/api/v1/storage", ""), 401, app.EUNAUTHORIZED)

	a := read(bearer(keyA)...)
	if a.State != "ok" || len(a.Targets) != 1 || a.Targets[0].ID != local.ID || !a.Targets[0].Default ||
		a.StoredBytes != 100 || a.Targets[0].StoredBytes != 100 || a.FreeBytes != 60<<30 || a.UsedBytes != 40<<30 {
		t.Errorf("tenant A: %+v", a)
	}
	b := read(bearer(keyB)...)
	if len(b.Targets) != 2 || b.StoredBytes != 35 || b.Targets[1].ID != s3.ID || b.Targets[1].FreeBytes != nil ||
		len(b.Targets[1].TenantIDs) != 1 || b.Targets[1].TenantIDs[0] != h.tenantB.ID {
		t.Errorf("tenant B: %+v", b)
	}
	all := read(bearer(provider)...)
	if len(all.Targets) != 2 || all.StoredBytes != 135 || all.Targets[0].StoredBytes != 130 {
		t.Errorf("provider: %+v", all)
	}
	if one := read(append(bearer(provider), "X-Service-Tenant", h.tenantB.ID)...); one.StoredBytes != 35 || len(one.Targets) != 2 {
		t.Errorf("provider for tenant B: %+v", one)
	}

	// The state is the worst of the caller's targets.
	h.backends.get(filepath.Join(h.dataDir, "s3", "tenant-b")).set(blobstore.Space{}, fmt.Errorf("dial: %w", blobstore.ErrUnreachable))
	h.storage.CheckTarget(ctx, s3.ID)
	if got := read(bearer(keyB)...); got.State != "unreachable" || got.Targets[1].State != "unreachable" {
		t.Errorf("tenant B with its S3 target unreachable: %+v", got)
	}
	if got := read(bearer(keyA)...); got.State != "ok" {
		t.Errorf("tenant A is not on the unreachable target: %+v", got)
	}
	if got := read(bearer(provider)...); got.State != "unreachable" {
		t.Errorf("provider: %+v", got)
	}
	// Readiness looks at the default target only.
	check(t, h.do("GET", "/readyz", ""), 200, "", `"storage":"ok"`)
}

func TestStatusAndReadyzFollowTheDefaultTarget(t *testing.T) {
	h := newHarness(t, app.EditionStandard, nil)
	ctx := context.Background()
	key, _ := h.key(h.tenantA.ID, app.ScopeStatusRead)
	id := h.defaultTarget().ID
	for _, tc := range []struct {
		space     blobstore.Space
		createErr error
		state     string
		ready     int
	}{
		{plentyOfSpace, nil, "ok", 200},
		{blobstore.Space{Known: true, CapacityBytes: 100 << 30, FreeBytes: 10 << 20}, nil, "full", 503},
		{plentyOfSpace, fmt.Errorf("probe: %w", blobstore.ErrFull), "full", 503},
		{plentyOfSpace, fmt.Errorf("stale NFS handle: %w", blobstore.ErrUnreachable), "unreachable", 503},
		{plentyOfSpace, fmt.Errorf("read-only: %w", blobstore.ErrDenied), "degraded", 503},
		{plentyOfSpace, nil, "ok", 200},
	} {
		h.defaultBackend().set(tc.space, tc.createErr)
		h.storage.CheckTarget(ctx, id)
		check(t, h.do("GET", "/api/v1/status", "", bearer(key)...), 200, "",
			fmt.Sprintf(`"storage":{"targets":1,"state":"%s"`, tc.state))
		check(t, h.do("GET", "/api/v1/storage", "", bearer(key)...), 200, "", fmt.Sprintf(`"state":"%s"`, tc.state))
		want := `"storage":"ok"`
		if tc.ready != 200 {
			want = `"storage":"failing"`
		}
		check(t, h.do("GET", "/readyz", ""), tc.ready, "", want, `"database":"ok"`)
	}
	// A write that met a full target marks it full at once.
	h.storage.WriteFailed(id, fmt.Errorf("pack on %s: %w", id, blobstore.ErrFull))
	check(t, h.do("GET", "/api/v1/status", "", bearer(key)...), 200, "", `"storage":{"targets":1,"state":"full"`)
	check(t, h.do("GET", "/readyz", ""), 503, "", `"storage":"failing"`)
}

func TestStorageTargetManagement(t *testing.T) {
	h := newHarness(t, app.EditionProvider, nil)
	h.user("root@msp.example", "pw-provider-123", "")
	h.user("admin@acme.example", "pw-tenant-123", h.tenantA.ID)
	pc, pcsrf := h.session("root@msp.example", "pw-provider-123")
	tc, tcsrf := h.session("admin@acme.example", "pw-tenant-123")
	prov := func(method, path, body string) *response {
		t.Helper()
		r := h.do(method, path, body, pc, "X-CSRF-Token", pcsrf)
		for _, secret := range []string{testS3Secret, "new-secret-value"} {
			if bytes.Contains(r.body, []byte(secret)) {
				t.Fatalf("%s %s echoed a secret: %s", method, path, r.body)
			}
		}
		return r
	}
	local := h.defaultTarget()
	dir := t.TempDir()
	s3Body := func(bucket string) string {
		return `{"name":"Wasabi","kind":"s3","endpoint":"s3.wasabisys.com","region":"eu-central-1","bucket":"` + bucket +
			`","prefix":"/backstop/","accessKeyId":"AKIAEXAMPLE","secretAccessKey":"` + testS3Secret + `","pathStyle":true}`
	}

	t.Run("API keys get 401, tenant administrators 403", func(t *testing.T) {
		pk, _ := h.key("", app.ScopeStatusRead, app.ScopeWebhooksManage)
		for _, rt := range []struct{ method, path, body string }{
			{"GET", "/api/v1/storage-targets", ""},
			{"POST", "/api/v1/storage-targets", `{"name":"x","kind":"local","path":"` + dir + `"}`},
			{"PATCH", "/api/v1/storage-targets/" + local.ID, `{"name":"x"}`},
			{"POST", "/api/v1/storage/appliance-key", ""},
		} {
			check(t, h.do(rt.method, rt.path, rt.body, bearer(pk)...), 401, app.EUNAUTHORIZED)
			check(t, h.do(rt.method, rt.path, rt.body, append(bearer(pk), "X-Service-Tenant", h.tenantA.ID)...), 401, app.EUNAUTHORIZED)
			check(t, h.do(rt.method, rt.path, rt.body, tc, "X-CSRF-Token", tcsrf), 403, "forbidden")
		}
		check(t, h.do("POST", "/api/v1/storage-targets", `{"name":"x","kind":"local","path":"`+dir+`"}`, pc), 403, "csrf_failed")
	})

	var created struct {
		ID, Kind, Path, State, Name string
		Default                     bool
		TenantIDs                   []string
		CheckedAt                   *string
	}
	t.Run("create local", func(t *testing.T) {
		r := prov("POST", "/api/v1/storage-targets", `{"name":"NAS","kind":"local","path":"`+dir+`"}`)
		check(t, r, 201, "", `"kind":"local"`, `"path":"`+dir+`"`, `"state":"ok"`, `"default":false`, `"tenantIds":[]`,
			`"freeBytes":`, `"storedBytes":0`, `"lastError":null`)
		json.Unmarshal(r.body, &created)
		if !app.HasPrefix(created.ID, app.PrefixStorage) || created.CheckedAt == nil {
			t.Errorf("created %s", r.body)
		}
		if rows := h.auditRows(1); rows[0].Action != "storageTargets.create" || rows[0].Status != 201 || rows[0].ActorName != "root@msp.example" {
			t.Errorf("audit row %+v", rows[0])
		}
		check(t, prov("POST", "/api/v1/storage-targets", `{"name":"NAS again","kind":"local","path":"`+dir+`"}`), 409, app.ECONFLICT)
	})

	t.Run("strict bodies", func(t *testing.T) {
		for name, tc := range map[string]struct{ body, location string }{
			"unknown field":         {`{"name":"x","kind":"local","path":"/tmp","colour":"red"}`, "body.colour"},
			"bad kind":              {`{"name":"x","kind":"ftp","path":"/tmp"}`, "body.kind"},
			"no name":               {`{"kind":"local","path":"/tmp"}`, "body.name"},
			"local with a bucket":   {`{"name":"x","kind":"local","path":"/tmp","bucket":"b"}`, "body.bucket"},
			"local without a path":  {`{"name":"x","kind":"local"}`, "body.path"},
			"relative path":         {`{"name":"x","kind":"local","path":"data"}`, "body.path"},
			"s3 with a path":        {`{"name":"x","kind":"s3","path":"/tmp"}`, "body.path"},
			"s3 without the secret": {`{"name":"x","kind":"s3","endpoint":"s3.example.com","bucket":"bkt","accessKeyId":"A"}`, "body.secretAccessKey"},
			"s3 endpoint with scheme": {`{"name":"x","kind":"s3","endpoint":"https://s3.example.com","bucket":"bkt","accessKeyId":"A","secretAccessKey":"s"}`,
				"body.endpoint"},
		} {
			t.Run(name, func(t *testing.T) {
				r := prov("POST", "/api/v1/storage-targets", tc.body)
				check(t, r, 422, app.EINVALID, `"location":"`+tc.location+`"`)
			})
		}
		check(t, prov("PATCH", "/api/v1/storage-targets/"+created.ID, `{"path":"/elsewhere"}`), 422, app.EINVALID, `"location":"body.path"`)
		check(t, prov("POST", "/api/v1/storage-targets", `{"name":`), 400, "bad_request")
	})

	t.Run("create s3: checked, refused with the reason, secret never shown", func(t *testing.T) {
		r := prov("POST", "/api/v1/storage-targets", s3Body(deniedBucket))
		check(t, r, 422, app.ESTORAGEUNUSABLE, "refused the credentials or the bucket", "AccessDenied")
		r = prov("POST", "/api/v1/storage-targets", s3Body("backups"))
		check(t, r, 201, "", `"kind":"s3"`, `"endpoint":"s3.wasabisys.com"`, `"bucket":"backups"`, `"prefix":"backstop"`,
			`"accessKeyId":"AKIAEXAMPLE"`, `"pathStyle":true`, `"tls":true`, `"freeBytes":null`, `"capacityBytes":null`, `"state":"ok"`)
		if bytes.Contains(r.body, []byte(`"path"`)) {
			t.Errorf("an s3 target shows a path: %s", r.body)
		}
		// Nor in the database in the clear.
		var sealed []byte
		h.db.Reader().QueryRow("SELECT secret FROM storage_targets WHERE kind = 's3'").Scan(&sealed)
		if len(sealed) == 0 || bytes.Contains(sealed, []byte(testS3Secret)) {
			t.Errorf("stored secret %q", sealed)
		}
	})

	t.Run("list, paged", func(t *testing.T) {
		r := prov("GET", "/api/v1/storage-targets", "")
		check(t, r, 200, "", `"nextCursor":null`, local.ID, created.ID)
		var page struct {
			Items []struct {
				ID string `json:"id"`
			} `json:"items"`
			NextCursor *string `json:"nextCursor"`
		}
		json.Unmarshal(prov("GET", "/api/v1/storage-targets?limit=2", "").body, &page)
		if len(page.Items) != 2 || page.NextCursor == nil || page.Items[0].ID != local.ID {
			t.Fatalf("first page %+v", page)
		}
		r = prov("GET", "/api/v1/storage-targets?limit=2&cursor="+*page.NextCursor, "")
		check(t, r, 200, "", `"nextCursor":null`)
		json.Unmarshal(r.body, &page)
		if len(page.Items) != 1 {
			t.Errorf("second page %s", r.body)
		}
		check(t, prov("GET", "/api/v1/storage-targets?cursor=tn_x", ""), 422, app.EINVALID)
	})

	t.Run("update", func(t *testing.T) {
		path := "/api/v1/storage-targets/" + created.ID
		check(t, prov("PATCH", path, `{"name":"NAS 2","default":true,"tenantIds":["`+h.tenantA.ID+`"]}`), 200, "",
			`"name":"NAS 2"`, `"default":true`, `"tenantIds":["`+h.tenantA.ID+`"]`)
		check(t, prov("PATCH", "/api/v1/storage-targets/"+local.ID, `{}`), 200, "", `"default":false`)
		check(t, prov("PATCH", path, `{"default":false}`), 422, app.EINVALID, `"location":"body.default"`)
		check(t, prov("PATCH", path, `{"tenantIds":["tn_nope"]}`), 422, app.EINVALID, `"location":"body.tenantIds"`)
		check(t, prov("PATCH", path, `{"secretAccessKey":"x"}`), 422, app.EINVALID)
		check(t, prov("PATCH", "/api/v1/storage-targets/st_unknown", `{"name":"x"}`), 404, app.ENOTFOUND)
		// The tenant's new data goes there; its key sees it.
		key, _ := h.key(h.tenantA.ID, app.ScopeStatusRead)
		check(t, h.do("GET", "/api/v1/storage", "", bearer(key)...), 200, "", created.ID)
		if id, _, err := h.storage.ForTenant(context.Background(), h.tenantA.ID); err != nil || id != created.ID {
			t.Errorf("tenant A on %s (%v)", id, err)
		}
	})

	t.Run("new S3 credentials are checked first", func(t *testing.T) {
		var s3ID string
		h.db.Reader().QueryRow("SELECT id FROM storage_targets WHERE kind = 's3'").Scan(&s3ID)
		h.backends.get(filepath.Join(h.dataDir, "s3", "backups")).set(blobstore.Space{},
			fmt.Errorf("PUT: SignatureDoesNotMatch: %w", blobstore.ErrDenied))
		r := prov("PATCH", "/api/v1/storage-targets/"+s3ID, `{"accessKeyId":"AKIANEW","secretAccessKey":"new-secret-value"}`)
		check(t, r, 422, app.ESTORAGEUNUSABLE, "SignatureDoesNotMatch")
		h.backends.get(filepath.Join(h.dataDir, "s3", "backups")).set(blobstore.Space{}, nil)
		check(t, prov("PATCH", "/api/v1/storage-targets/"+s3ID, `{"accessKeyId":"AKIANEW","secretAccessKey":"new-secret-value"}`),
			200, "", `"accessKeyId":"AKIANEW"`)
		if rows := h.auditRows(1); rows[0].Action != "storageTargets.update" || rows[0].Status != 200 {
			t.Errorf("audit row %+v", rows[0])
		}
	})
}

func TestApplianceKeyDownload(t *testing.T) {
	h := newHarness(t, app.EditionStandard, nil)
	h.user("root@msp.example", "pw-provider-123", "")
	pc, pcsrf := h.session("root@msp.example", "pw-provider-123")
	const path = "/api/v1/storage/appliance-key"

	key := h.applianceKey
	h.applianceKey = nil // the blob store has not made it yet
	h.srv.ApplianceKey = func() ([]byte, error) {
		if h.applianceKey == nil {
			return nil, fs.ErrNotExist
		}
		return h.applianceKey, nil
	}
	check(t, h.do("POST", path, "", pc, "X-CSRF-Token", pcsrf), 503, "unavailable")
	h.applianceKey = key

	check(t, h.do("POST", path, "", pc), 403, "csrf_failed")
	r := h.do("POST", path, "", pc, "X-CSRF-Token", pcsrf)
	check(t, r, 200, "")
	if !bytes.Equal(r.body, key) || r.header.Get("Content-Type") != "application/octet-stream" ||
		r.header.Get("Content-Disposition") != `attachment; filename="backstop-appliance.key"` ||
		!strings.Contains(r.header.Get("Cache-Control"), "no-store") {
		t.Errorf("download: %q %v", r.body, r.header)
	}
	r = h.do("POST", path, "", pc, "X-CSRF-Token", pcsrf)
	check(t, r, http.StatusGone, app.EGONE, "already downloaded", "root@msp.example", "2026-11-21T15:00:00.000Z")
	if bytes.Contains(r.body, key) {
		t.Error("the key was sent twice")
	}
	rows := h.auditRows(2)
	if rows[0].Action != "storage.applianceKey" || rows[0].Status != 200 || rows[1].Status != 410 {
		t.Errorf("audit rows %+v %+v", rows[0], rows[1])
	}
}

func TestStorageInOpenAPI(t *testing.T) {
	h := newHarness(t, app.EditionStandard, nil)
	r := h.do("GET", "/api/v1/openapi.json", "")
	check(t, r, 200, "", `"/api/v1/storage"`, `"/api/v1/storage-targets"`, `"/api/v1/storage-targets/{id}"`,
		`"/api/v1/storage/appliance-key"`, `"StorageTarget"`, `"storedBytes"`, `"application/octet-stream"`,
		`The worst state of the listed targets`)
	doc := h.srv.OpenAPI()
	if sec := doc.Paths["/api/v1/storage"].Get.Security; len(sec) == 0 || sec[0]["bearer"][0] != "status:read" {
		t.Errorf("GET /storage security %v", sec)
	}
	if _, ok := doc.Paths["/api/v1/storage/appliance-key"].Post.Responses["410"]; !ok {
		t.Error("410 of the appliance key undocumented")
	}
}
