package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"backstop/app/jobs"
)

// lockedBuffer is an io.Writer the server logs into while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// appliance is a running `backstop serve` inside the test process, driven
// only through run() and HTTP, as an operator and an integrator would.
type appliance struct {
	t    *testing.T
	vars map[string]string
	base string
	logs *lockedBuffer
	// shutdown stops serve as SIGTERM would and waits for it (once; the
	// test's cleanup calls it too).
	shutdown func()
	// jobKinds are registered with serve's runner beside the real ones.
	jobKinds []jobs.Kind
}

func (a *appliance) env(stdin string, stdout io.Writer) env {
	return env{stdin: strings.NewReader(stdin), stdout: stdout, stderr: a.logs, getenv: func(k string) string { return a.vars[k] },
		jobKinds: a.jobKinds}
}

// admin runs `backstop admin ...` through run() and returns its stdout.
func (a *appliance) admin(stdin string, args ...string) string {
	a.t.Helper()
	var out bytes.Buffer
	if err := run(context.Background(), append([]string{"admin"}, args...), a.env(stdin, &out)); err != nil {
		a.t.Fatalf("admin %v: %v", args, err)
	}
	return strings.TrimSpace(out.String())
}

type reply struct {
	code   int
	header http.Header
	body   []byte
}

func (r reply) problemCode() string {
	var p struct{ Code string }
	json.Unmarshal(r.body, &p)
	return p.Code
}

// call makes one HTTP request; hdr are name/value pairs.
func (a *appliance) call(method, path, body string, hdr ...string) reply {
	a.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, a.base+path, rd)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return reply{res.StatusCode, res.Header, b}
}

func (a *appliance) expect(r reply, status int, code string) {
	a.t.Helper()
	if r.code != status {
		a.t.Fatalf("status %d, want %d: %s", r.code, status, r.body)
	}
	if code != "" {
		if got := r.problemCode(); got != code {
			a.t.Errorf("code %q, want %q: %s", got, code, r.body)
		}
		if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
			a.t.Errorf("Content-Type %q for a %d", ct, status)
		}
	}
	if status >= 500 {
		a.t.Errorf("5xx: %s", r.body)
	}
}

// startAppliance runs serve on 127.0.0.1:0 with a temp data dir and stops it
// (as SIGTERM would, by cancelling the context) when the test ends,
// checking that it shut down cleanly and in time.
func startAppliance(t *testing.T, vars map[string]string) *appliance {
	t.Helper()
	return startApplianceWith(t, vars)
}

// startApplianceWith is startAppliance with extra job kinds.
func startApplianceWith(t *testing.T, vars map[string]string, kinds ...jobs.Kind) *appliance {
	t.Helper()
	a := &appliance{t: t, logs: &lockedBuffer{}, jobKinds: kinds, vars: map[string]string{
		"SERVICE_LISTEN": "127.0.0.1:0", "SERVICE_DATA_DIR": t.TempDir(), "SERVICE_LOG_LEVEL": "warn",
	}}
	for k, v := range vars {
		a.vars[k] = v
	}
	addrc := make(chan string, 1)
	e := a.env("", io.Discard)
	e.listening = func(addr string) { addrc <- addr }
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- run(ctx, []string{"serve"}, e) }()
	select {
	case addr := <-addrc:
		a.base = "http://" + addr
	case err := <-served:
		t.Fatalf("serve ended before listening: %v\n%s", err, a.logs)
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not start listening")
	}
	a.shutdown = sync.OnceFunc(func() {
		stop()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("serve after shutdown: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("serve did not shut down within 10 s")
		}
	})
	t.Cleanup(a.shutdown)
	return a
}

// TestEndToEnd drives the appliance as shipped: admin commands through
// run(), everything else over HTTP against the live server.
func TestEndToEnd(t *testing.T) {
	a := startAppliance(t, map[string]string{"SERVICE_EDITION": "provider", "SERVICE_API_RATE_LIMIT": "40"})

	acme := a.admin("", "create-tenant", "--name", "Acme")
	beta := a.admin("", "create-tenant", "--name", "Beta")
	statusKey := a.admin("", "create-key", "--tenant", acme, "--name", "RMM", "--scopes", "status:read", "--expires-days", "30")
	jobsKey := a.admin("", "create-key", "--tenant", acme, "--name", "PSA", "--scopes", "jobs:read,items:read")
	betaKey := a.admin("", "create-key", "--tenant", beta, "--name", "Beta RMM", "--scopes", "status:read")
	providerKey := a.admin("", "create-key", "--provider", "--name", "MSP", "--scopes", "status:read")
	a.admin("root-password-123\n", "create-user", "--email", "root@example.com", "--password-stdin")
	auth := func(k string) []string { return []string{"Authorization", "Bearer " + k} }

	t.Run("probes and OpenAPI need no credentials", func(t *testing.T) {
		a.expect(a.call("GET", "/healthz", ""), 200, "")
		r := a.call("GET", "/readyz", "")
		a.expect(r, 200, "")
		if !bytes.Contains(r.body, []byte(`"database":"ok"`)) {
			t.Errorf("readyz %s", r.body)
		}
		r = a.call("GET", "/api/v1/openapi.json", "")
		a.expect(r, 200, "")
		var doc struct {
			OpenAPI string
			Paths   map[string]any
		}
		json.Unmarshal(r.body, &doc)
		if !strings.HasPrefix(doc.OpenAPI, "3.1") || doc.Paths["/api/v1/endpoints"] == nil || doc.Paths["/api/v1/status"] == nil {
			t.Errorf("openapi %q with %d paths", doc.OpenAPI, len(doc.Paths))
		}
	})

	t.Run("keys, scopes and tenants", func(t *testing.T) {
		r := a.call("GET", "/api/v1/status", "", append(auth(statusKey), "X-Request-Id", "e2e-status")...)
		a.expect(r, 200, "")
		if r.header.Get("X-Request-Id") != "e2e-status" || r.header.Get("RateLimit-Policy") != `"default";q=40;w=600` {
			t.Errorf("headers %v", r.header)
		}
		var st struct {
			TenantID *string
			Version  struct{ UpdateCheck, Running string }
		}
		json.Unmarshal(r.body, &st)
		if st.TenantID == nil || *st.TenantID != acme || st.Version.UpdateCheck != "disabled" {
			t.Errorf("status %s", r.body)
		}
		r = a.call("GET", "/api/v1/status", "", auth(jobsKey)...)
		a.expect(r, 403, "insufficient_scope")
		if !bytes.Contains(r.body, []byte(`"requiredScope":"status:read"`)) {
			t.Errorf("403 body %s", r.body)
		}
		typo := statusKey[:len(statusKey)-1] + "0"
		if typo == statusKey {
			typo = statusKey[:len(statusKey)-1] + "1"
		}
		for _, bad := range [][]string{nil, auth("bsk_garbage"), auth(typo)} {
			r := a.call("GET", "/api/v1/endpoints", "", bad...)
			a.expect(r, 401, "unauthorized")
			if r.header.Get("WWW-Authenticate") != `Bearer error="invalid_token"` {
				t.Errorf("WWW-Authenticate %q", r.header.Get("WWW-Authenticate"))
			}
		}
		a.expect(a.call("GET", "/api/v1/endpoints", "", append(auth(statusKey), "X-Service-Tenant", beta)...), 404, "not_found")
		a.expect(a.call("GET", "/api/v1/endpoints/ep_00000000000000000000000000", "", auth(betaKey)...), 404, "not_found")
	})

	t.Run("provider key across tenants", func(t *testing.T) {
		r := a.call("GET", "/api/v1/status", "", auth(providerKey)...)
		a.expect(r, 200, "")
		if !bytes.Contains(r.body, []byte(`"tenantId":null`)) {
			t.Errorf("provider status without header: %s", r.body)
		}
		r = a.call("GET", "/api/v1/status", "", append(auth(providerKey), "X-Service-Tenant", beta)...)
		a.expect(r, 200, "")
		if !bytes.Contains(r.body, []byte(`"tenantId":"`+beta+`"`)) {
			t.Errorf("provider status for beta: %s", r.body)
		}
		a.expect(a.call("GET", "/api/v1/endpoints", "", append(auth(providerKey), "X-Service-Tenant", "tn_nope")...), 404, "not_found")
	})

	t.Run("web session", func(t *testing.T) {
		r := a.call("POST", "/api/v1/session", `{"email":"root@example.com","password":"root-password-123"}`)
		a.expect(r, 200, "")
		cookie := r.header.Get("Set-Cookie")
		if !strings.Contains(cookie, "HttpOnly") || !strings.Contains(cookie, "SameSite=Lax") || strings.Contains(cookie, "Secure") {
			t.Errorf("Set-Cookie %q", cookie)
		}
		var s struct{ CSRFToken string }
		json.Unmarshal(r.body, &s)
		c := strings.SplitN(cookie, ";", 2)[0]
		a.expect(a.call("POST", "/api/v1/tenants", `{"name":"Gamma"}`, "Cookie", c), 403, "csrf_failed")
		a.expect(a.call("POST", "/api/v1/tenants", `{"name":"Gamma"}`, "Cookie", c, "X-CSRF-Token", s.CSRFToken), 201, "")
		a.expect(a.call("GET", "/api/v1/tenants", "", auth(statusKey)...), 401, "unauthorized")
		r = a.call("POST", "/api/v1/api-keys", `{"tenantId":"`+acme+`","name":"web key","scopes":["status:read"],"expiresInDays":90}`,
			"Cookie", c, "X-CSRF-Token", s.CSRFToken)
		a.expect(r, 201, "")
		var k struct{ Value string }
		json.Unmarshal(r.body, &k)
		a.expect(a.call("GET", "/api/v1/endpoints", "", auth(k.Value)...), 200, "")
		a.expect(a.call("GET", "/api/v1/endpoints", "", "Cookie", c), 200, "")
	})

	t.Run("bad input is 4xx problem+json, never 5xx", func(t *testing.T) {
		r := a.call("POST", "/api/v1/session", `{"email":`)
		a.expect(r, 400, "bad_request")
		a.expect(a.call("POST", "/api/v1/session", `{"email":"a@example.com","password":"x","extra":true}`), 422, "validation_failed")
		a.expect(a.call("POST", "/api/v1/session", `{"email":"`+strings.Repeat("a", 1<<20)+`"}`), 413, "too_large")
		a.expect(a.call("GET", "/api/v1/no-such-thing", ""), 404, "not_found")
		a.expect(a.call("PUT", "/api/v1/status", "", auth(statusKey)...), 405, "method_not_allowed")
		a.expect(a.call("GET", "/api/v1/endpoints?profile=desktop", "", auth(statusKey)...), 422, "validation_failed")
		r = a.call("GET", "/api/v1/status", "", "X-Huge", strings.Repeat("h", 200<<10))
		if r.code < 400 || r.code >= 500 {
			t.Errorf("oversized header: %d", r.code)
		}
	})

	t.Run("revocation from the CLI acts on the next request", func(t *testing.T) {
		a.expect(a.call("GET", "/api/v1/endpoints", "", auth(betaKey)...), 200, "")
		var keyID string
		for _, line := range strings.Split(a.admin("", "audit", "--json", "--tenant", beta, "--limit", "1"), "\n") {
			var row struct{ ActorID string }
			json.Unmarshal([]byte(line), &row)
			keyID = row.ActorID
		}
		out := a.admin("", "revoke-key", keyID)
		if !strings.Contains(out, keyID) {
			t.Errorf("revoke-key printed %q", out)
		}
		a.expect(a.call("GET", "/api/v1/endpoints", "", auth(betaKey)...), 401, "unauthorized")
	})

	t.Run("rate limit", func(t *testing.T) {
		limited := a.admin("", "create-key", "--tenant", acme, "--name", "busy", "--scopes", "status:read")
		var last reply
		for range 41 {
			last = a.call("GET", "/api/v1/version", "", auth(limited)...)
		}
		a.expect(last, 429, "rate_limited")
		if last.header.Get("Retry-After") == "" || !strings.HasPrefix(last.header.Get("RateLimit"), `"default";r=0;t=`) {
			t.Errorf("429 headers %v", last.header)
		}
	})

	t.Run("audit rows, one JSON object a line", func(t *testing.T) {
		out := a.admin("", "audit", "--json", "--limit", "1000")
		sc := bufio.NewScanner(strings.NewReader(out))
		sc.Buffer(nil, 1<<20)
		var keyRead, userRead, statusRow bool
		want := []string{"id", "at", "actorType", "actorId", "actorName", "tenantId", "action", "target", "status", "ip", "userAgent", "requestId"}
		for sc.Scan() {
			var row map[string]any
			if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
				t.Fatalf("line %q: %v", sc.Text(), err)
			}
			for _, f := range want {
				if _, ok := row[f]; !ok {
					t.Fatalf("row %s lacks %s", sc.Text(), f)
				}
			}
			if row["action"] == "endpoints.list" && row["status"] == float64(200) {
				switch row["actorType"] {
				case "key":
					keyRead = true
				case "user":
					userRead = row["actorName"] == "root@example.com"
				}
			}
			if row["requestId"] == "e2e-status" {
				statusRow = row["tenantId"] == acme && row["actorName"] == "RMM" && row["ip"] == "127.0.0.1"
			}
			if strings.Contains(sc.Text(), "bsk_") {
				t.Errorf("audit row holds a key value: %s", sc.Text())
			}
		}
		if !keyRead || !userRead || !statusRow {
			t.Errorf("audit rows missing: key read %v, session read %v, status row %v\n%s", keyRead, userRead, statusRow, out)
		}
	})
}

// TestCommandFailures: every failing command returns an error naming the
// problem (one line), and an invalid configuration stops start-up.
func TestCommandFailures(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		args []string
		vars map[string]string
		want string
	}{
		{[]string{"serve"}, map[string]string{"SERVICE_EDITION": "bogus", "SERVICE_DATA_DIR": dir}, "edition"},
		{[]string{"serve"}, map[string]string{"SERVICE_LISTEN": "nowhere", "SERVICE_DATA_DIR": dir}, "listen"},
		{[]string{"serve"}, map[string]string{"SERVICE_ENDPOINTS_SILENT_AFTER_CLIENT": "soon", "SERVICE_DATA_DIR": dir}, "silent_after"},
		{[]string{"admin", "create-tenant", "--data-dir", dir}, nil, "name"},
		{[]string{"admin", "create-key", "--data-dir", dir, "--tenant", "tn_x", "--name", "k", "--scopes", "status:write"}, nil, "status:write"},
		{[]string{"admin", "create-key", "--data-dir", dir, "--tenant", "tn_x", "--name", "k", "--scopes", "status:read", "--expires-days", "60"}, nil, "expires-days"},
		{[]string{"admin", "create-key", "--data-dir", dir, "--tenant", "tn_missing", "--name", "k", "--scopes", "status:read"}, nil, "tn_missing"},
		{[]string{"admin", "create-key", "--data-dir", dir, "--provider", "--name", "k", "--scopes", "status:read"}, nil, "provider"},
		{[]string{"admin", "revoke-key", "--data-dir", dir, "key_missing"}, nil, "key_missing"},
		{[]string{"admin", "revoke-key", "--data-dir", dir}, nil, "key id"},
		{[]string{"admin", "create-user", "--data-dir", dir, "--email", "not-an-address"}, nil, "email"},
		{[]string{"admin", "audit", "--data-dir", dir, "--limit", "0"}, nil, "limit"},
		{[]string{"admin", "frobnicate"}, nil, "frobnicate"},
		{[]string{"frobnicate"}, nil, "frobnicate"},
		{[]string{"serve", "--no-such-flag"}, nil, "no-such-flag"},
	} {
		var out, errOut bytes.Buffer
		e := env{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut, getenv: func(k string) string { return tt.vars[k] }}
		err := run(context.Background(), tt.args, e)
		if err == nil {
			t.Errorf("%v: succeeded", tt.args)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, tt.want) || strings.Contains(msg, "\n") {
			t.Errorf("%v: error %q should be one line naming %q", tt.args, msg, tt.want)
		}
		if out.Len() != 0 {
			t.Errorf("%v: printed %q on stdout while failing", tt.args, out.String())
		}
	}
}
