package restapi

import (
	"context"
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"backstop/app"
)

// TestKeyLifecycle creates a key through the management API, uses it, and
// revokes it: value shown once, fingerprint stored, lastUsedAt, immediate
// and permanent revocation, still listed.
func TestKeyLifecycle(t *testing.T) {
	h := newHarness(t, app.EditionStandard, nil)
	h.user("admin@example.com", "tenant-password-1", h.tenantA.ID)
	c, csrf := h.session("admin@example.com", "tenant-password-1")
	post := func(body string) *response {
		return h.do("POST", "/api/v1/api-keys", body, c, "X-CSRF-Token", csrf)
	}

	t.Run("validation", func(t *testing.T) {
		for _, tt := range []struct{ body, location string }{
			{`{"name":"x","scopes":["status:read"],"expiresInDays":31}`, "body.expiresInDays"},
			{`{"name":"x","scopes":["status:read"]}`, "body.expiresInDays"},
			{`{"name":"x","scopes":["status:write"],"expiresInDays":null}`, "body.scopes[0]"},
			{`{"name":"x","scopes":[],"expiresInDays":null}`, "body.scopes"},
			{`{"name":"x","scopes":["jobs:read","jobs:read"],"expiresInDays":null}`, "body.scopes"},
			{`{"name":"","scopes":["status:read"],"expiresInDays":null}`, "body.name"},
			{`{"name":"   ","scopes":["status:read"],"expiresInDays":null}`, "body.name"},
			{`{"name":"x","scopes":["status:read"],"expiresInDays":null,"admin":true}`, "body.admin"},
			{`{"name":"x","scopes":["status:read"],"expiresInDays":null,"provider":true}`, "body.provider"},
		} {
			check(t, post(tt.body), 422, app.EINVALID, `"location":"`+tt.location)
		}
		// Another tenant's id looks like no tenant at all.
		check(t, post(`{"tenantId":"`+h.tenantB.ID+`","name":"x","scopes":["status:read"],"expiresInDays":null}`), 404, app.ENOTFOUND)
	})

	for _, days := range []int{30, 90, 180, 365} {
		r := post(`{"name":"PSA ` + strings.Repeat("x", days%7) + `","scopes":["status:read"],"expiresInDays":` + itoa(days) + `}`)
		check(t, r, 201, "")
		var k struct{ ExpiresAt app.Time }
		json.Unmarshal(r.body, &k)
		if want := h.clock.Now().Add(time.Duration(days) * 24 * time.Hour); !k.ExpiresAt.Equal(want) {
			t.Errorf("%d days: expiresAt %v, want %v", days, k.ExpiresAt, want)
		}
	}

	r := post(`{"name":"RMM","scopes":["status:read","jobs:read"],"expiresInDays":null}`)
	check(t, r, 201, "", `"expiresAt":null`, `"tenantId":"`+h.tenantA.ID+`"`)
	var created struct {
		ID, Value, Fingerprint string
		Scopes                 []string
	}
	json.Unmarshal(r.body, &created)
	if _, ok := app.ParseKeyValue(created.Value); !ok || created.Fingerprint != app.Fingerprint(created.Value) {
		t.Fatalf("created key %+v", created)
	}
	if !reflect.DeepEqual(created.Scopes, []string{"status:read", "jobs:read"}) {
		t.Errorf("scopes %v", created.Scopes)
	}

	// The value is shown once: never in the list, never in the database.
	list := h.do("GET", "/api/v1/api-keys", "", c)
	check(t, list, 200, "", created.ID)
	if strings.Contains(string(list.body), created.Value) || strings.Contains(string(list.body), `"value"`) {
		t.Error("key list shows the value")
	}
	var n int
	h.db.Reader().QueryRow("SELECT count(*) FROM api_keys WHERE fingerprint = ? AND instr(fingerprint, ?) = 0",
		app.Fingerprint(created.Value), created.Value[10:]).Scan(&n)
	if n != 1 {
		t.Error("stored row is not exactly the fingerprint")
	}

	use := h.clock.Now().Add(time.Minute)
	h.clock.Add(time.Minute)
	check(t, h.do("GET", "/api/v1/status", "", bearer(created.Value)...), 200, "")
	k, _ := h.db.Key(context.Background(), created.ID)
	if k.LastUsedAt == nil || !k.LastUsedAt.Equal(use) {
		t.Errorf("lastUsedAt = %v, want %v", k.LastUsedAt, use)
	}

	// Revocation: immediate, idempotent, permanent, still listed.
	check(t, h.do("DELETE", "/api/v1/api-keys/"+created.ID, "", c), 403, "csrf_failed")
	check(t, h.do("DELETE", "/api/v1/api-keys/"+created.ID, "", c, "X-CSRF-Token", csrf), 200, "", `"revokedAt":"`)
	check(t, h.do("GET", "/api/v1/status", "", bearer(created.Value)...), 401, app.EUNAUTHORIZED)
	check(t, h.do("DELETE", "/api/v1/api-keys/"+created.ID, "", c, "X-CSRF-Token", csrf), 200, "")
	h.clock.Add(400 * 24 * time.Hour)
	check(t, h.do("GET", "/api/v1/status", "", bearer(created.Value)...), 401, app.EUNAUTHORIZED)
	c, csrf = h.session("admin@example.com", "tenant-password-1") // the old session expired meanwhile
	check(t, h.do("GET", "/api/v1/api-keys", "", c), 200, "", created.ID)
	check(t, h.do("DELETE", "/api/v1/api-keys/key_00000000000000000000000000", "", c, "X-CSRF-Token", csrf), 404, app.ENOTFOUND)

	// A tenant administrator cannot see or revoke another tenant's key.
	_, bk := h.key(h.tenantB.ID, app.ScopeStatusRead)
	check(t, h.do("DELETE", "/api/v1/api-keys/"+bk.ID, "", c, "X-CSRF-Token", csrf), 404, app.ENOTFOUND)
	if list := h.do("GET", "/api/v1/api-keys", "", c); strings.Contains(string(list.body), bk.ID) {
		t.Error("tenant administrator lists another tenant's key")
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestScopesAreIndependent: each of the nine scopes grants only itself; a
// key with every scope but status:read cannot read status.
func TestScopesAreIndependent(t *testing.T) {
	h := newHarness(t, app.EditionStandard, nil)
	for _, s := range app.AllScopes {
		v, _ := h.key(h.tenantA.ID, s)
		want := 403
		if s == app.ScopeStatusRead {
			want = 200
		}
		if r := h.do("GET", "/api/v1/endpoints", "", bearer(v)...); r.code != want {
			t.Errorf("key with only %s: GET /endpoints = %d, want %d", s, r.code, want)
		}
	}
	var others []app.Scope
	for _, s := range app.AllScopes {
		if s != app.ScopeStatusRead {
			others = append(others, s)
		}
	}
	v, _ := h.key(h.tenantA.ID, others...)
	check(t, h.do("GET", "/api/v1/status", "", bearer(v)...), 403, app.EFORBIDDEN, `"requiredScope":"status:read"`)
}

func TestProviderEdition(t *testing.T) {
	h := newHarness(t, app.EditionProvider, nil, withTestWrite)
	a1 := h.endpoint(h.tenantA.ID, "a1", app.ProfileServer)
	h.endpoint(h.tenantA.ID, "a2", app.ProfileClient)
	b1 := h.endpoint(h.tenantB.ID, "b1", app.ProfileServer)
	pk, _ := h.key("", app.ScopeStatusRead, app.ScopeRestoreWrite)
	tk, _ := h.key(h.tenantA.ID, app.ScopeStatusRead, app.ScopeRestoreWrite)

	endpoints := func(r *response) (ids, tenants []string) {
		var b struct {
			Items []app.EndpointView
			Total int
		}
		json.Unmarshal(r.body, &b)
		for _, it := range b.Items {
			ids, tenants = append(ids, it.Hostname), append(tenants, it.TenantID)
		}
		if b.Total != len(b.Items) {
			t.Errorf("total %d for %d items", b.Total, len(b.Items))
		}
		sort.Strings(ids)
		return ids, tenants
	}

	r := h.do("GET", "/api/v1/endpoints", "", bearer(pk)...)
	check(t, r, 200, "")
	if ids, tenants := endpoints(r); strings.Join(ids, ",") != "a1,a2,b1" || strings.Contains(strings.Join(tenants, ","), ",,") || len(tenants) != 3 {
		t.Errorf("provider key without header sees %v (tenants %v), want every tenant's, each with tenantId", ids, tenants)
	}
	r = h.do("GET", "/api/v1/endpoints?profile=server", "", append(bearer(pk), "X-Service-Tenant", h.tenantA.ID)...)
	if ids, _ := endpoints(r); strings.Join(ids, ",") != "a1" {
		t.Errorf("provider key with header, servers: %v", ids)
	}
	check(t, h.do("GET", "/api/v1/endpoints", "", append(bearer(pk), "X-Service-Tenant", "tn_unknown")...), 404, app.ENOTFOUND)
	check(t, h.do("GET", "/api/v1/endpoints/"+b1.ID, "", append(bearer(pk), "X-Service-Tenant", h.tenantA.ID)...), 404, app.ENOTFOUND)
	check(t, h.do("GET", "/api/v1/endpoints/"+b1.ID, "", bearer(pk)...), 200, "", `"tenantId":"`+h.tenantB.ID)
	check(t, h.do("GET", "/api/v1/status", "", bearer(pk)...), 200, "", `"tenantId":null`, `"total":3`)
	check(t, h.do("GET", "/api/v1/status", "", append(bearer(pk), "X-Service-Tenant", h.tenantB.ID)...), 200, "",
		`"tenantId":"`+h.tenantB.ID+`"`, `"total":1`)

	// Writes need the header.
	body := `{"targetType":"endpoint","targetId":"` + a1.ID + `"}`
	check(t, h.do("POST", "/api/v1/test-writes", body, bearer(pk)...), 400, app.ETENANTREQUIRED)
	check(t, h.do("POST", "/api/v1/test-writes", body, append(bearer(pk), "X-Service-Tenant", h.tenantA.ID)...), 201, "",
		`"tenantId":"`+h.tenantA.ID+`"`)
	check(t, h.do("POST", "/api/v1/test-writes", body, append(bearer(pk), "X-Service-Tenant", "tn_unknown")...), 404, app.ENOTFOUND)

	// A tenant key is confined to its tenant; naming another is 404.
	check(t, h.do("POST", "/api/v1/test-writes", body, bearer(tk)...), 201, "")
	check(t, h.do("GET", "/api/v1/endpoints", "", append(bearer(tk), "X-Service-Tenant", h.tenantB.ID)...), 404, app.ENOTFOUND)
	check(t, h.do("GET", "/api/v1/endpoints", "", append(bearer(tk), "X-Service-Tenant", h.tenantA.ID)...), 200, "")
	if ids, _ := endpoints(h.do("GET", "/api/v1/endpoints", "", bearer(tk)...)); strings.Join(ids, ",") != "a1,a2" {
		t.Errorf("tenant key sees %v", ids)
	}
}

func TestProviderKeysThroughManagementAPI(t *testing.T) {
	std := newHarness(t, app.EditionStandard, nil)
	std.user("root@example.com", "provider-password-1", "")
	c, csrf := std.session("root@example.com", "provider-password-1")
	check(t, std.do("POST", "/api/v1/api-keys", `{"name":"p","scopes":["status:read"],"expiresInDays":null,"provider":true}`, c, "X-CSRF-Token", csrf),
		422, app.EINVALID, `"location":"body.provider"`)

	prov := newHarness(t, app.EditionProvider, nil)
	prov.user("root@example.com", "provider-password-1", "")
	prov.user("tenant@example.com", "tenant-password-1", prov.tenantA.ID)
	c, csrf = prov.session("root@example.com", "provider-password-1")
	r := prov.do("POST", "/api/v1/api-keys", `{"name":"p","scopes":["status:read"],"expiresInDays":90,"provider":true}`, c, "X-CSRF-Token", csrf)
	check(t, r, 201, "", `"provider":true`)
	var k struct{ Value string }
	json.Unmarshal(r.body, &k)
	check(t, prov.do("GET", "/api/v1/endpoints", "", bearer(k.Value)...), 200, "")
	check(t, prov.do("POST", "/api/v1/api-keys", `{"tenantId":"`+prov.tenantA.ID+`","name":"p","scopes":["status:read"],"expiresInDays":null,"provider":true}`,
		c, "X-CSRF-Token", csrf), 422, app.EINVALID, `"location":"body.tenantId"`)

	tc, tcsrf := prov.session("tenant@example.com", "tenant-password-1")
	check(t, prov.do("POST", "/api/v1/api-keys", `{"name":"p","scopes":["status:read"],"expiresInDays":null,"provider":true}`, tc, "X-CSRF-Token", tcsrf),
		403, "forbidden")
	check(t, prov.do("POST", "/api/v1/tenants", `{"name":"New"}`, tc, "X-CSRF-Token", tcsrf), 403, "forbidden")
	check(t, prov.do("PATCH", "/api/v1/settings", `{"updateCheck":true}`, tc, "X-CSRF-Token", tcsrf), 403, "forbidden")
}

// TestAuditRows: a read by key and the same read by web session write rows
// of identical shape, committed before the answer; probes write none.
func TestAuditRows(t *testing.T) {
	h := newHarness(t, app.EditionStandard, nil)
	h.user("admin@example.com", "tenant-password-1", h.tenantA.ID)
	c, _ := h.session("admin@example.com", "tenant-password-1")
	key, k := h.key(h.tenantA.ID, app.ScopeStatusRead)
	u, _ := h.db.UserByEmail(context.Background(), "admin@example.com")

	before := h.auditCount()
	check(t, h.do("GET", "/healthz", ""), 200, "")
	check(t, h.do("GET", "/readyz", ""), 200, "")
	check(t, h.do("GET", "/api/v1/openapi.json", ""), 200, "")
	check(t, h.do("GET", "/api/v1/status", ""), 401, app.EUNAUTHORIZED)
	if n := h.auditCount(); n != before {
		t.Errorf("probes, OpenAPI and anonymous calls wrote %d audit rows", n-before)
	}

	kr := h.do("GET", "/api/v1/endpoints?profile=server", "", append(bearer(key), "User-Agent", "PSA/1.0", "X-Request-Id", "req-key")...)
	keyRow := h.auditRows(1)[0] // read right after the answer: already committed
	sr := h.do("GET", "/api/v1/endpoints?profile=server", "", c, "User-Agent", "PSA/1.0", "X-Request-Id", "req-session")
	sessRow := h.auditRows(1)[0]
	check(t, kr, 200, "")
	check(t, sr, 200, "")

	want := app.AuditEntry{ID: keyRow.ID, At: app.At(h.clock.Now()), ActorType: app.ActorKey, ActorID: k.ID, ActorName: k.Name,
		TenantID: h.tenantA.ID, Action: "endpoints.list", Target: "/api/v1/endpoints", Status: 200, IP: "127.0.0.1",
		UserAgent: "PSA/1.0", RequestID: "req-key"}
	if *keyRow != want {
		t.Errorf("key row\n%+v\nwant\n%+v", *keyRow, want)
	}
	want.ID, want.ActorType, want.ActorID, want.ActorName, want.RequestID = sessRow.ID, app.ActorUser, u.ID, u.Email, "req-session"
	if *sessRow != want {
		t.Errorf("session row\n%+v\nwant\n%+v", *sessRow, want)
	}
	var a, b map[string]any
	ja, _ := json.Marshal(keyRow)
	jb, _ := json.Marshal(sessRow)
	json.Unmarshal(ja, &a)
	json.Unmarshal(jb, &b)
	if len(a) != len(b) || len(a) != 12 {
		t.Errorf("row shapes differ: %s vs %s", ja, jb)
	}
	for f := range a {
		if _, ok := b[f]; !ok {
			t.Errorf("field %s only in the key row", f)
		}
	}

	// Refusals by an authenticated caller are audited with their status.
	jobsKey, _ := h.key(h.tenantA.ID, app.ScopeJobsRead)
	h.do("GET", "/api/v1/status", "", bearer(jobsKey)...)
	if row := h.auditRows(1)[0]; row.Status != 403 || row.Action != "status.get" {
		t.Errorf("403 row %+v", row)
	}
	h.do("GET", "/api/v1/endpoints/ep_none", "", bearer(key)...)
	if row := h.auditRows(1)[0]; row.Status != 404 || row.Target != "/api/v1/endpoints/ep_none" {
		t.Errorf("404 row %+v", row)
	}
}

// TestAuditFailureAnswers500: when the audit row cannot be written, the
// caller gets a 500 and not the data.
func TestAuditFailureAnswers500(t *testing.T) {
	h := newHarness(t, app.EditionStandard, nil, func(s *Server) { s.Audit = failingAudit{} })
	key, _ := h.key(h.tenantA.ID, app.ScopeStatusRead)
	h.endpoint(h.tenantA.ID, "secret-host", app.ProfileServer)
	r := h.do("GET", "/api/v1/endpoints", "", bearer(key)...)
	check(t, r, 500, app.EINTERNAL, r.header.Get("X-Request-Id"))
	if strings.Contains(string(r.body), "secret-host") {
		t.Error("unaudited answer leaked the data")
	}
}

type failingAudit struct{}

func (failingAudit) WriteAudit(context.Context, *app.AuditEntry) error {
	return context.DeadlineExceeded
}
func (failingAudit) AuditEntries(context.Context, app.AuditFilter) ([]*app.AuditEntry, error) {
	return nil, nil
}

// TestAuditClientAddress: X-Forwarded-For counts only from trusted proxies,
// and then the right-most address that is not a proxy is the client.
func TestAuditClientAddress(t *testing.T) {
	for _, tt := range []struct {
		name    string
		trusted []string
		xff     string
		want    string
	}{
		{"no trusted proxies: header ignored", nil, "203.0.113.9", "127.0.0.1"},
		{"trusted peer: right-most untrusted hop", []string{"127.0.0.1", "10.0.0.0/8"}, "198.51.100.1, 203.0.113.9, 10.1.2.3", "203.0.113.9"},
		{"trusted peer, garbage hop: stop there", []string{"127.0.0.1"}, "203.0.113.9, nonsense", "127.0.0.1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, app.EditionStandard, func(o *Options) {
				for _, p := range tt.trusted {
					prefix, _ := app.ParsePrefix(p)
					o.TrustedProxies = append(o.TrustedProxies, prefix)
				}
			})
			key, _ := h.key(h.tenantA.ID, app.ScopeStatusRead)
			check(t, h.do("GET", "/api/v1/version", "", append(bearer(key), "X-Forwarded-For", tt.xff)...), 200, "")
			if got := h.auditRows(1)[0].IP; got != tt.want {
				t.Errorf("audited ip %q, want %q", got, tt.want)
			}
		})
	}
}
