package restapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/targets"
	"backstop/store"

	"golang.org/x/crypto/argon2"
)

// fakeClock is the injected clock of the scenario tests; the server reads it
// from its own goroutines, so it is locked.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// harness is a real server over a real SQLite file in t.TempDir(), served
// on 127.0.0.1 by httptest, with two tenants ready.
type harness struct {
	t       *testing.T
	db      *store.DB
	srv     *Server
	ts      *httptest.Server
	clock   *fakeClock
	tenantA *app.Tenant
	tenantB *app.Tenant

	dataDir      string
	storage      *targets.Manager // default local target made, monitor not running
	backends     *fakeBackends
	applianceKey []byte
}

var harnessStart = time.Date(2026, 11, 21, 15, 0, 0, 0, time.UTC)

// extra registers more operations before the server starts (test-only
// routes that exercise rules no core route has yet).
func newHarness(t testing.TB, edition string, tweak func(*Options), extra ...func(*Server)) *harness {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	db, err := store.Open(ctx, filepath.Join(dir, "backstop.db"))
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: harnessStart}
	db.Now = clock.Now
	opts := Options{Edition: edition, Version: "1.2.0", DataDir: dir, Now: clock.Now, Rules: app.DefaultEndpointRules(),
		Logger: discardLogger()}
	if tweak != nil {
		tweak(&opts)
	}
	h := &harness{db: db, clock: clock, dataDir: dir}
	h.storage, h.backends = newTestStorage(t, db, dir)
	h.applianceKey = []byte("appliance key bytes\n")
	srv := New(Services{Tenants: db, Keys: db, Users: db, Audit: db, Endpoints: db, Enrollment: db, Settings: db,
		Versions: db, Jobs: db, Events: db, Ping: db.Ping, Storage: h.storage, ApplianceKeys: db, Maintenance: db,
		ApplianceKey: func() ([]byte, error) { return h.applianceKey, nil }}, opts)
	h.srv = srv
	if tt, ok := t.(*testing.T); ok {
		h.t = tt
	}
	for _, x := range extra {
		x(srv)
	}
	h.ts = httptest.NewServer(srv)
	t.Cleanup(func() {
		h.ts.Close()
		db.Close()
	})
	h.tenantA, h.tenantB = &app.Tenant{Name: "Acme"}, &app.Tenant{Name: "Beta"}
	for _, tn := range []*app.Tenant{h.tenantA, h.tenantB} {
		if err := db.CreateTenant(ctx, tn); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// key stores an API key directly and returns its value. tenantID "" makes a
// provider key.
func (h *harness) key(tenantID string, scopes ...app.Scope) (value string, k *app.APIKey) {
	k = &app.APIKey{ID: app.NewID(app.PrefixKey), TenantID: tenantID, Name: "key for " + tenantID, Provider: tenantID == "",
		Scopes: scopes, CreatedAt: app.At(h.clock.Now())}
	value = app.NewKeyValue(k.ID)
	k.Fingerprint = app.Fingerprint(value)
	if err := h.db.CreateKey(context.Background(), k); err != nil {
		h.t.Fatal(err)
	}
	return value, k
}

// endpoint stores an endpoint of the tenant.
func (h *harness) endpoint(tenantID, hostname, profile string) *app.Endpoint {
	e := &app.Endpoint{TenantID: tenantID, Hostname: hostname, Profile: profile, OS: "linux", Arch: "amd64",
		Schedule: app.DefaultEndpointSchedule}
	if err := h.db.CreateEndpoint(context.Background(), e); err != nil {
		h.t.Fatal(err)
	}
	return e
}

// cheapHash is an argon2id hash in app.HashPassword's PHC form with the
// smallest parameters CheckPassword accepts, so tests that sign in many
// times stay fast. Production hashes come from app.HashPassword.
func cheapHash(pw string) string {
	salt := []byte(app.RandomToken(16))
	sum := argon2.IDKey([]byte(pw), salt, 1, 8, 1, 32)
	enc := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=8,t=1,p=1$%s$%s", argon2.Version, enc.EncodeToString(salt), enc.EncodeToString(sum))
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// user stores an administrator (tenantID "" = provider administrator).
func (h *harness) user(email, password, tenantID string) *app.User {
	u := &app.User{Email: email, TenantID: tenantID, PasswordHash: cheapHash(password)}
	if err := h.db.CreateUser(context.Background(), u); err != nil {
		h.t.Fatal(err)
	}
	return u
}

// session signs in and returns the cookie and CSRF token.
func (h *harness) session(email, password string) (cookie *http.Cookie, csrf string) {
	r := h.do("POST", "/api/v1/session", `{"email":"`+email+`","password":"`+password+`"}`)
	if r.code != 200 {
		h.t.Fatalf("sign-in: %d %s", r.code, r.body)
	}
	for _, c := range r.cookies {
		if c.Name == sessionCookie {
			cookie = c
		}
	}
	var b struct{ CSRFToken string }
	json.Unmarshal(r.body, &b)
	return cookie, b.CSRFToken
}

type response struct {
	code    int
	header  http.Header
	body    []byte
	cookies []*http.Cookie
}

func (r *response) json() map[string]any {
	var m map[string]any
	json.Unmarshal(r.body, &m)
	return m
}

// do sends a request over real HTTP. Extra arguments are header name/value
// pairs; a *http.Cookie argument is sent as a cookie.
func (h *harness) do(method, path, body string, extra ...any) *response {
	h.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, h.ts.URL+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i < len(extra); i++ {
		switch v := extra[i].(type) {
		case *http.Cookie:
			req.AddCookie(v)
		case string:
			req.Header.Set(v, extra[i+1].(string))
			i++
		}
	}
	res, err := h.ts.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return &response{code: res.StatusCode, header: res.Header, body: b, cookies: res.Cookies()}
}

func bearer(v string) []any { return []any{"Authorization", "Bearer " + v} }

// check asserts status, problem code (when wantCode is set) and that the
// body contains each wantBody fragment.
func check(t *testing.T, r *response, wantStatus int, wantCode string, wantBody ...string) {
	t.Helper()
	if r.code != wantStatus {
		t.Fatalf("status %d, want %d; body %s", r.code, wantStatus, r.body)
	}
	if wantCode != "" {
		if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
			t.Errorf("Content-Type %q, want application/problem+json", ct)
		}
		m := r.json()
		if m["code"] != wantCode || m["status"] != float64(wantStatus) || m["type"] != "urn:backstop:problem:"+wantCode {
			t.Errorf("problem %s, want code %s status %d", r.body, wantCode, wantStatus)
		}
	}
	for _, w := range wantBody {
		if !bytes.Contains(r.body, []byte(w)) {
			t.Errorf("body %s lacks %s", r.body, w)
		}
	}
	if r.header.Get("X-Request-Id") == "" {
		t.Error("no X-Request-Id")
	}
}

// auditRows returns the newest n audit rows, oldest first.
func (h *harness) auditRows(n int) []*app.AuditEntry {
	rows, err := h.db.AuditEntries(context.Background(), app.AuditFilter{Limit: n})
	if err != nil {
		h.t.Fatal(err)
	}
	for i, j := 0, len(rows)-1; i < j; i, j = i+1, j-1 {
		rows[i], rows[j] = rows[j], rows[i]
	}
	return rows
}

func (h *harness) auditCount() int {
	rows, _ := h.db.AuditEntries(context.Background(), app.AuditFilter{Limit: 1000})
	return len(rows)
}
