package restapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"backstop/app"
)

func TestSessionFlow(t *testing.T) {
	h := newHarness(t, app.EditionProvider, nil)
	h.user("root@example.com", "provider-password-1", "")
	key, _ := h.key(h.tenantA.ID, app.AllScopes...)

	t.Run("wrong password and unknown account are one answer", func(t *testing.T) {
		a := h.do("POST", "/api/v1/session", `{"email":"root@example.com","password":"wrong-password-1"}`)
		b := h.do("POST", "/api/v1/session", `{"email":"nobody@example.com","password":"wrong-password-1"}`)
		check(t, a, 401, app.EUNAUTHORIZED)
		check(t, b, 401, app.EUNAUTHORIZED)
		if string(a.body) != string(b.body) || len(a.cookies) != 0 {
			t.Errorf("answers differ or set a cookie:\n%s\n%s", a.body, b.body)
		}
	})

	r := h.do("POST", "/api/v1/session", `{"email":" Root@Example.com ","password":"provider-password-1"}`)
	check(t, r, 200, "", `"csrfToken":"`, `"provider":true`, `"edition":"provider"`)
	var c *http.Cookie
	for _, x := range r.cookies {
		if x.Name == sessionCookie {
			c = x
		}
	}
	if c == nil || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Secure || c.Path != "/" || c.MaxAge <= 0 || len(c.Value) < 40 {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Lax, not Secure without TLS, Path=/", c)
	}
	var body struct{ CSRFToken string }
	json.Unmarshal(r.body, &body)
	csrf := body.CSRFToken

	check(t, h.do("GET", "/api/v1/session", "", c), 200, "", `"email":"root@example.com"`)
	check(t, h.do("GET", "/api/v1/status", "", c), 200, "", `"tenantId":null`)

	t.Run("unsafe methods need the CSRF token", func(t *testing.T) {
		check(t, h.do("POST", "/api/v1/tenants", `{"name":"Gamma"}`, c), 403, "csrf_failed")
		check(t, h.do("POST", "/api/v1/tenants", `{"name":"Gamma"}`, c, "X-CSRF-Token", "wrong"), 403, "csrf_failed")
		check(t, h.do("POST", "/api/v1/tenants", `{"name":"Gamma"}`, c, "X-CSRF-Token", csrf), 201, "", `"name":"Gamma"`)
		// A key cannot reach session routes, whatever its scopes.
		for _, rt := range []struct{ method, path, body string }{
			{"GET", "/api/v1/tenants", ""}, {"POST", "/api/v1/tenants", `{"name":"x"}`}, {"GET", "/api/v1/api-keys", ""},
			{"POST", "/api/v1/api-keys", `{}`}, {"DELETE", "/api/v1/api-keys/key_x", ""}, {"GET", "/api/v1/audit", ""},
			{"GET", "/api/v1/settings", ""}, {"PATCH", "/api/v1/settings", `{}`}, {"GET", "/api/v1/session", ""},
			{"POST", "/api/v1/enrollment-tokens", `{}`},
		} {
			check(t, h.do(rt.method, rt.path, rt.body, bearer(key)...), 401, app.EUNAUTHORIZED)
		}
	})

	t.Run("sign out ends the session", func(t *testing.T) {
		check(t, h.do("DELETE", "/api/v1/session", "", c), 403, "csrf_failed")
		r := h.do("DELETE", "/api/v1/session", "", c, "X-CSRF-Token", csrf)
		if r.code != 200 && r.code != 204 {
			t.Fatalf("sign out: %d %s", r.code, r.body)
		}
		if len(r.cookies) != 1 || r.cookies[0].MaxAge >= 0 {
			t.Errorf("sign out does not clear the cookie: %+v", r.cookies)
		}
		check(t, h.do("GET", "/api/v1/session", "", c), 401, app.EUNAUTHORIZED)
		check(t, h.do("GET", "/api/v1/status", "", c), 401, app.EUNAUTHORIZED)
	})

	t.Run("a session expires", func(t *testing.T) {
		c2, _ := h.session("root@example.com", "provider-password-1")
		check(t, h.do("GET", "/api/v1/session", "", c2), 200, "")
		h.clock.Add(12 * time.Hour)
		check(t, h.do("GET", "/api/v1/session", "", c2), 401, app.EUNAUTHORIZED)
	})
}

func TestSecureCookieUnderTLS(t *testing.T) {
	h := newHarness(t, app.EditionStandard, func(o *Options) { o.SecureCookies = true })
	h.user("admin@example.com", "tenant-password-1", h.tenantA.ID)
	c, _ := h.session("admin@example.com", "tenant-password-1")
	if !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode {
		t.Errorf("cookie %+v: want Secure, HttpOnly, SameSite=Lax", c)
	}
}

func TestLoginLimiting(t *testing.T) {
	h := newHarness(t, app.EditionStandard, nil)
	h.user("admin@example.com", "tenant-password-1", h.tenantA.ID)
	login := func(email, pw string) *response {
		return h.do("POST", "/api/v1/session", `{"email":"`+email+`","password":"`+pw+`"}`)
	}
	for range 5 {
		check(t, login("admin@example.com", "wrong-password"), 401, app.EUNAUTHORIZED)
	}
	// The account is locked, even for the right password, until the oldest
	// failure leaves the 15-minute window.
	r := login("admin@example.com", "tenant-password-1")
	check(t, r, 429, app.ERATELIMITED)
	if r.header.Get("Retry-After") != "900" {
		t.Errorf("Retry-After = %q, want 900", r.header.Get("Retry-After"))
	}
	// Other accounts from this address are not locked by it.
	check(t, login("other@example.com", "wrong-password"), 401, app.EUNAUTHORIZED)
	h.clock.Add(15 * time.Minute)
	check(t, login("admin@example.com", "tenant-password-1"), 200, "")

	// Failed sign-ins are audited, without the password.
	rows := h.auditRows(20)
	failed := 0
	for _, row := range rows {
		if row.Action == "session.create" && row.Status == 401 {
			failed++
			if row.ActorName == "" || strings.Contains(row.ActorName, "wrong") {
				t.Errorf("failed sign-in row %+v", row)
			}
		}
	}
	if failed != 6 {
		t.Errorf("%d failed sign-ins audited, want 6", failed)
	}
}

func TestLoginLimiterPerIP(t *testing.T) {
	l := newLoginLimiter()
	now := harnessStart
	for i := range 20 {
		if blocked, _ := l.blocked("192.0.2.1", "a"+strings.Repeat("x", i), now); blocked {
			t.Fatalf("blocked after %d failures", i)
		}
		l.failed("192.0.2.1", "a"+strings.Repeat("x", i), now)
	}
	if blocked, wait := l.blocked("192.0.2.1", "fresh-account", now); !blocked || wait != 900 {
		t.Errorf("21st attempt from one address: blocked=%v wait=%d", blocked, wait)
	}
	if blocked, _ := l.blocked("192.0.2.2", "fresh-account", now); blocked {
		t.Error("another address is blocked")
	}
	if blocked, _ := l.blocked("192.0.2.1", "fresh-account", now.Add(15*time.Minute)); blocked {
		t.Error("still blocked after the window")
	}
}

func TestFirstRunSetup(t *testing.T) {
	h := newHarness(t, app.EditionStandard, func(o *Options) { o.SetupToken = "setup-token-123" })
	check(t, h.do("GET", "/api/v1/setup", ""), 200, "", `"open":true`)
	good := `{"token":"setup-token-123","email":"first@example.com","password":"first-password-1"}`
	check(t, h.do("POST", "/api/v1/setup", strings.Replace(good, "123", "124", 1)), 403, "forbidden")
	check(t, h.do("POST", "/api/v1/setup", strings.Replace(good, "first-password-1", "short", 1)), 422, app.EINVALID, `"location":"body.password"`)
	check(t, h.do("POST", "/api/v1/setup", strings.Replace(good, "first@example.com", "not an address", 1)), 422, app.EINVALID, `"location":"body.email"`)
	r := h.do("POST", "/api/v1/setup", good)
	check(t, r, 201, "", `"provider":true`, `"csrfToken"`)
	if len(r.cookies) == 0 {
		t.Error("setup does not sign in")
	}
	check(t, h.do("GET", "/api/v1/setup", ""), 200, "", `"open":false`)
	check(t, h.do("POST", "/api/v1/setup", strings.Replace(good, "first@", "second@", 1)), 403, "forbidden")

	// Without a setup token (an administrator exists at start-up) setup is closed.
	h2 := newHarness(t, app.EditionStandard, nil)
	check(t, h2.do("GET", "/api/v1/setup", ""), 200, "", `"open":false`)
	check(t, h2.do("POST", "/api/v1/setup", `{"token":"","email":"a@example.com","password":"first-password-1"}`), 403, "forbidden")
}

func TestEnrollmentTokens(t *testing.T) {
	h := newHarness(t, app.EditionStandard, func(o *Options) { o.PublicURL = "https://backup.example.com/" })
	h.user("admin@example.com", "tenant-password-1", h.tenantA.ID)
	c, csrf := h.session("admin@example.com", "tenant-password-1")
	r := h.do("POST", "/api/v1/enrollment-tokens", `{"tenantId":"`+h.tenantA.ID+`","profile":"client"}`, c, "X-CSRF-Token", csrf)
	check(t, r, 201, "", `"profile":"client"`,
		`"installCommand":"curl -fsSL https://backup.example.com/install/agent.sh | sudo sh -s -- --server https://backup.example.com --token bse_`)
	var tok struct{ Token string }
	json.Unmarshal(r.body, &tok)
	got, err := h.db.ConsumeEnrollmentToken(t.Context(), app.Fingerprint(tok.Token), h.clock.Now())
	if err != nil || got.TenantID != h.tenantA.ID || got.Profile != app.ProfileClient {
		t.Fatalf("stored token %+v, %v", got, err)
	}
	check(t, h.do("POST", "/api/v1/enrollment-tokens", `{"tenantId":"`+h.tenantB.ID+`","profile":"server"}`, c, "X-CSRF-Token", csrf),
		422, app.EINVALID, `"location":"body.tenantId"`)
	check(t, h.do("POST", "/api/v1/enrollment-tokens", `{"tenantId":"`+h.tenantA.ID+`","profile":"desktop"}`, c, "X-CSRF-Token", csrf),
		422, app.EINVALID, `"location":"body.profile"`)
}

func TestSettingsAndAuditList(t *testing.T) {
	h := newHarness(t, app.EditionStandard, nil)
	h.user("root@example.com", "provider-password-1", "")
	h.user("admin@example.com", "tenant-password-1", h.tenantA.ID)
	c, csrf := h.session("root@example.com", "provider-password-1")
	key, _ := h.key(h.tenantA.ID, app.ScopeStatusRead)

	check(t, h.do("GET", "/api/v1/settings", "", c), 200, "", `"updateCheck":false`, `"updateChannel":"stable"`)
	check(t, h.do("GET", "/api/v1/version", "", bearer(key)...), 200, "", `"updateCheck":"disabled"`)
	check(t, h.do("PATCH", "/api/v1/settings", `{"updateCheck":true}`, c, "X-CSRF-Token", csrf), 200, "", `"updateCheck":true`)
	check(t, h.do("GET", "/api/v1/version", "", bearer(key)...), 200, "", `"updateCheck":"pending"`, `"channel":"stable"`)
	check(t, h.do("PATCH", "/api/v1/settings", `{"updateChannel":"nightly"}`, c, "X-CSRF-Token", csrf), 422, app.EINVALID, `"location":"body.updateChannel"`)
	check(t, h.do("PATCH", "/api/v1/settings", `{"updateChannel":"beta"}`, c, "X-CSRF-Token", csrf), 200, "", `"updateChannel":"beta"`)

	// Paging: limit and nextCursor walk the log newest first without overlap.
	var ids []float64
	cursor := ""
	for range 10 {
		r := h.do("GET", "/api/v1/audit?limit=2"+cursor, "", c)
		check(t, r, 200, "")
		var page struct {
			Items      []struct{ ID float64 }
			NextCursor *string
		}
		json.Unmarshal(r.body, &page)
		for _, it := range page.Items {
			ids = append(ids, it.ID)
		}
		if page.NextCursor == nil {
			break
		}
		cursor = "&cursor=" + *page.NextCursor
	}
	for i := 1; i < len(ids); i++ {
		if ids[i] >= ids[i-1] {
			t.Fatalf("audit pages overlap or go backwards: %v", ids)
		}
	}
	if len(ids) < 5 {
		t.Errorf("only %d rows paged", len(ids))
	}
	check(t, h.do("GET", "/api/v1/audit?cursor=abc", "", c), 422, app.EINVALID, `"location":"query.cursor"`)
	check(t, h.do("GET", "/api/v1/audit?limit=1001", "", c), 422, app.EINVALID, `"location":"query.limit"`)

	// A tenant administrator reads only its tenant's rows.
	tc, _ := h.session("admin@example.com", "tenant-password-1")
	check(t, h.do("GET", "/api/v1/audit?tenantId="+h.tenantB.ID, "", tc), 422, app.EINVALID, `"location":"query.tenantId"`)
	r := h.do("GET", "/api/v1/audit?limit=1000", "", tc)
	check(t, r, 200, "")
	if strings.Contains(string(r.body), `"tenantId":""`) || !strings.Contains(string(r.body), h.tenantA.ID) {
		t.Errorf("tenant administrator's audit view: %s", r.body)
	}
}
