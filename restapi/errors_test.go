package restapi

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"backstop/app"
)

// testWriteInput is the body of a test-only key write route: no core route
// takes a body under a key scope yet, and CONTRACT §2 rules (scope before
// body, tenant_required) apply to every such route.
type testWriteInput struct {
	Body struct {
		TargetType string `json:"targetType" enum:"endpoint,protected_object"`
		TargetID   string `json:"targetId" minLength:"1" maxLength:"64"`
	}
}

type testWriteOutput struct {
	Body struct {
		TenantID string `json:"tenantId"`
	}
}

func withTestWrite(s *Server) {
	op(s, http.MethodPost, "test.create", "/api/v1/test-writes", accessKey, app.ScopeRestoreWrite, "Test write",
		func(ctx context.Context, in *testWriteInput) (*testWriteOutput, error) {
			out := &testWriteOutput{}
			out.Body.TenantID = principalFrom(ctx).tenantID
			return out, nil
		})
}

// TestUnauthorizedIsOneAnswer: missing, malformed, unknown, wrong-secret,
// expired and revoked keys all get the same 401, byte for byte.
func TestUnauthorizedIsOneAnswer(t *testing.T) {
	h := newHarness(t, app.EditionStandard, nil)
	good, k := h.key(h.tenantA.ID, app.ScopeStatusRead)
	expired, ek := h.key(h.tenantA.ID, app.ScopeStatusRead)
	revoked, rk := h.key(h.tenantA.ID, app.ScopeStatusRead)
	setExpiry(t, h, ek.ID, h.clock.Now().Add(time.Hour))
	if r := h.do("GET", "/api/v1/status", "", bearer(expired)...); r.code != 200 {
		t.Fatalf("key before its expiry: %d", r.code)
	}
	if r := h.do("GET", "/api/v1/status", "", bearer(revoked)...); r.code != 200 {
		t.Fatalf("key before revocation: %d", r.code)
	}
	h.clock.Add(time.Hour)
	if err := h.db.RevokeKey(context.Background(), rk.ID, h.clock.Now()); err != nil {
		t.Fatal(err)
	}
	providerKey, _ := h.key("", app.ScopeStatusRead) // standard edition: provider keys do not work

	if r := h.do("GET", "/api/v1/status", "", bearer(good)...); r.code != 200 {
		t.Fatalf("good key: %d %s", r.code, r.body)
	}
	cases := map[string][]any{
		"missing":              nil,
		"empty bearer":         {"Authorization", "Bearer "},
		"basic scheme":         {"Authorization", "Basic dXNlcjpwYXNz"},
		"malformed":            bearer("not-a-key"),
		"typo":                 bearer(good[:len(good)-1] + flip(good[len(good)-1])),
		"unknown id":           bearer(app.NewKeyValue(app.NewID(app.PrefixKey))),
		"wrong secret":         bearer(app.NewKeyValue(k.ID)),
		"expired":              bearer(expired),
		"revoked":              bearer(revoked),
		"provider in standard": bearer(providerKey),
	}
	var first []byte
	for name, hdr := range cases {
		t.Run(name, func(t *testing.T) {
			r := h.do("GET", "/api/v1/status", "", hdr...)
			check(t, r, 401, app.EUNAUTHORIZED)
			if got := r.header.Get("WWW-Authenticate"); got != `Bearer error="invalid_token"` {
				t.Errorf("WWW-Authenticate = %q", got)
			}
			if first == nil {
				first = r.body
			} else if string(r.body) != string(first) {
				t.Errorf("body differs:\n%s\n%s", r.body, first)
			}
		})
	}
}

func flip(c byte) string {
	if c == 'a' {
		return "b"
	}
	return "a"
}

// setExpiry changes a stored key's expiry.
func setExpiry(t *testing.T, h *harness, id string, at time.Time) {
	t.Helper()
	err := h.db.WriteTx(context.Background(), func(tx *sql.Tx) error {
		_, err := tx.Exec("UPDATE api_keys SET expires_at = ? WHERE id = ?", at.UnixMilli(), id)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestErrorTable(t *testing.T) {
	h := newHarness(t, app.EditionStandard, nil, withTestWrite)
	statusKey, _ := h.key(h.tenantA.ID, app.ScopeStatusRead)
	jobsKey, _ := h.key(h.tenantA.ID, app.ScopeJobsRead)
	writeKey, _ := h.key(h.tenantA.ID, app.ScopeRestoreWrite)
	own := h.endpoint(h.tenantA.ID, "db1", app.ProfileServer)
	other := h.endpoint(h.tenantB.ID, "db2", app.ProfileServer)

	t.Run("403 names the scope, before existence and body", func(t *testing.T) {
		for _, c := range []struct{ method, path, body string }{
			{"GET", "/api/v1/status", ""},
			{"GET", "/api/v1/endpoints/" + own.ID, ""},
			{"GET", "/api/v1/endpoints/ep_does_not_exist", ""},
			{"GET", "/api/v1/endpoints?profile=bogus", ""},
		} {
			r := h.do(c.method, c.path, c.body, bearer(jobsKey)...)
			check(t, r, 403, app.EFORBIDDEN, `"requiredScope":"status:read"`)
		}
		for _, body := range []string{`{"targetType":"endpoint","targetId":"x"}`, `{not json`, `{"targetType":"bogus"}`, strings.Repeat("x", 2<<20)} {
			r := h.do("POST", "/api/v1/test-writes", body, bearer(statusKey)...)
			check(t, r, 403, app.EFORBIDDEN, `"requiredScope":"restore:write"`)
		}
	})

	t.Run("404 for another tenant's resource equals 404 for none", func(t *testing.T) {
		missing := h.do("GET", "/api/v1/endpoints/ep_00000000000000000000000000", "", bearer(statusKey)...)
		check(t, missing, 404, app.ENOTFOUND)
		cross := h.do("GET", "/api/v1/endpoints/"+other.ID, "", bearer(statusKey)...)
		check(t, cross, 404, app.ENOTFOUND)
		if string(missing.body) != string(cross.body) {
			t.Errorf("bodies differ:\n%s\n%s", missing.body, cross.body)
		}
		check(t, h.do("GET", "/api/v1/endpoints/"+own.ID, "", bearer(statusKey)...), 200, "", `"hostname":"db1"`)
	})

	t.Run("400 malformed JSON", func(t *testing.T) {
		for _, body := range []string{`{`, `{"targetType":}`, `nope`, "\x00\xff"} {
			r := h.do("POST", "/api/v1/test-writes", body, bearer(writeKey)...)
			check(t, r, 400, "bad_request")
		}
	})

	t.Run("422 names the fields", func(t *testing.T) {
		for _, c := range []struct{ body, location string }{
			{`{"targetType":"bogus","targetId":"x"}`, "body.targetType"},
			{`{"targetType":"endpoint","targetId":""}`, "body.targetId"},
			{`{"targetType":"endpoint"}`, "body.targetId"},
			{`{"targetType":"endpoint","targetId":"x","extra":1}`, "body.extra"},
			{`{"targetType":"endpoint","targetId":5}`, "body.targetId"},
			{`[]`, "body"},
		} {
			r := h.do("POST", "/api/v1/test-writes", c.body, bearer(writeKey)...)
			check(t, r, 422, app.EINVALID, `"location":"`+c.location)
		}
		r := h.do("GET", "/api/v1/endpoints?profile=bogus", "", bearer(statusKey)...)
		check(t, r, 422, app.EINVALID, `"location":"query.profile"`)
	})

	t.Run("413 over 1 MiB", func(t *testing.T) {
		body := `{"targetType":"endpoint","targetId":"` + strings.Repeat("x", 1<<20) + `"}`
		check(t, h.do("POST", "/api/v1/test-writes", body, bearer(writeKey)...), 413, "too_large")
		// Just under the limit is parsed (and fails validation on length).
		body = `{"targetType":"endpoint","targetId":"` + strings.Repeat("x", 1<<20-60) + `"}`
		check(t, h.do("POST", "/api/v1/test-writes", body, bearer(writeKey)...), 422, app.EINVALID)
	})

	t.Run("415 for a body that is not JSON", func(t *testing.T) {
		r := h.do("POST", "/api/v1/test-writes", `<a/>`, append(bearer(writeKey), "Content-Type", "application/xml")...)
		if r.code != 415 && r.code != 400 {
			t.Fatalf("status %d: %s", r.code, r.body)
		}
	})

	t.Run("unknown route 404 and wrong method 405 as problem+json", func(t *testing.T) {
		check(t, h.do("GET", "/api/v1/nothing-here", ""), 404, app.ENOTFOUND)
		check(t, h.do("GET", "/elsewhere", ""), 404, app.ENOTFOUND)
		r := h.do("DELETE", "/api/v1/status", "", bearer(statusKey)...)
		check(t, r, 405, "method_not_allowed")
		if allow := r.header.Get("Allow"); !strings.Contains(allow, "GET") {
			t.Errorf("Allow = %q", allow)
		}
	})

	t.Run("X-Request-Id is echoed or made", func(t *testing.T) {
		r := h.do("GET", "/api/v1/status", "", append(bearer(statusKey), "X-Request-Id", "psa-1234")...)
		if got := r.header.Get("X-Request-Id"); got != "psa-1234" {
			t.Errorf("X-Request-Id = %q, want the echo", got)
		}
		for _, bad := range []string{strings.Repeat("a", 129), "has space", "tab\there"} {
			r := h.do("GET", "/healthz", "", "X-Request-Id", bad)
			if got := r.header.Get("X-Request-Id"); got == bad || !strings.HasPrefix(got, "req_") {
				t.Errorf("X-Request-Id for %q = %q, want a fresh one", bad, got)
			}
		}
		r = h.do("GET", "/api/v1/status", "")
		if got := r.header.Get("X-Request-Id"); !strings.HasPrefix(got, "req_") {
			t.Errorf("X-Request-Id = %q on a 401", got)
		}
	})
}

func TestRateLimit(t *testing.T) {
	h := newHarness(t, app.EditionStandard, func(o *Options) { o.RateLimit, o.RateWindow = 5, time.Minute })
	key, _ := h.key(h.tenantA.ID, app.ScopeStatusRead)
	other, _ := h.key(h.tenantA.ID, app.ScopeStatusRead)
	for i := range 5 {
		r := h.do("GET", "/api/v1/version", "", bearer(key)...)
		check(t, r, 200, "")
		if got, want := r.header.Get("RateLimit"), `"default";r=`+strconv.Itoa(4-i)+`;t=`+strconv.Itoa(60-i); got != want {
			t.Errorf("request %d: RateLimit = %q, want %q", i, got, want)
		}
		if got := r.header.Get("RateLimit-Policy"); got != `"default";q=5;w=60` {
			t.Errorf("RateLimit-Policy = %q", got)
		}
		h.clock.Add(time.Second)
	}
	// Five requests at 0s..4s; at 5s the window is full until 60s.
	r := h.do("GET", "/api/v1/version", "", bearer(key)...)
	check(t, r, 429, app.ERATELIMITED)
	if got := r.header.Get("Retry-After"); got != "55" {
		t.Errorf("Retry-After = %q, want 55", got)
	}
	if got := r.header.Get("RateLimit"); got != `"default";r=0;t=55` {
		t.Errorf("RateLimit = %q", got)
	}
	// Refused requests do not count; scope failures do (they used the key).
	check(t, h.do("GET", "/api/v1/version", "", bearer(other)...), 200, "")
	h.clock.Add(54 * time.Second) // 59s: still full
	check(t, h.do("GET", "/api/v1/version", "", bearer(key)...), 429, app.ERATELIMITED)
	h.clock.Add(time.Second) // 60s: the first request left the window
	r = h.do("GET", "/api/v1/version", "", bearer(key)...)
	check(t, r, 200, "")
	if got := r.header.Get("RateLimit"); got != `"default";r=0;t=1` {
		t.Errorf("after one slot freed: RateLimit = %q", got)
	}
	// Rate-limited answers are audited like any other.
	rows := h.auditRows(4)
	var got []int
	for _, r := range rows {
		got = append(got, r.Status)
	}
	if fmt.Sprint(got) != "[429 200 429 200]" {
		t.Errorf("audit statuses %v, want [429 200 429 200]", got)
	}
}

func TestRateLimitDefaultsAreSpec(t *testing.T) {
	h := newHarness(t, app.EditionStandard, nil)
	key, _ := h.key(h.tenantA.ID, app.ScopeStatusRead)
	r := h.do("GET", "/api/v1/version", "", bearer(key)...)
	if got := r.header.Get("RateLimit-Policy"); got != `"default";q=600;w=600` {
		t.Errorf("RateLimit-Policy = %q", got)
	}
	if got := r.header.Get("RateLimit"); got != `"default";r=599;t=600` {
		t.Errorf("RateLimit = %q", got)
	}
}

// TestUnreadableBodyIs4xx: a body that breaks off or has broken chunked
// framing is the client's fault, never a 500.
func TestUnreadableBodyIs4xx(t *testing.T) {
	h := newHarness(t, app.EditionStandard, nil, withTestWrite)
	key, _ := h.key(h.tenantA.ID, app.ScopeRestoreWrite)
	for name, raw := range map[string]string{
		"bad chunk size": "POST /api/v1/test-writes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key +
			"\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
		"short body": "POST /api/v1/test-writes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key +
			"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"targetType\":",
	} {
		t.Run(name, func(t *testing.T) {
			conn, err := net.Dial("tcp", h.ts.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.Write([]byte(raw))
			if name == "short body" {
				conn.(*net.TCPConn).CloseWrite()
			}
			conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			res, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode < 400 || res.StatusCode >= 500 {
				t.Errorf("status %d, want 4xx", res.StatusCode)
			}
			if rows := h.auditRows(1); len(rows) == 1 && rows[0].Status >= 500 {
				t.Errorf("audited as %d", rows[0].Status)
			}
		})
	}
}

// TestHumaErrorsKeepTheirStatus: errors huma raises itself map to our codes
// with their own status; only unknown ones become a detail-free 500.
func TestHumaErrorsKeepTheirStatus(t *testing.T) {
	for status, code := range map[int]string{400: "bad_request", 404: app.ENOTFOUND, 408: "request_timeout",
		413: "too_large", 415: "unsupported_media_type", 422: app.EINVALID, 429: app.ERATELIMITED} {
		p := humaError(status, "x").(*Problem)
		if p.Status != status || p.Code != code || p.Type != "urn:backstop:problem:"+code {
			t.Errorf("%d: %+v", status, p)
		}
	}
	p := humaError(500, "unexpected error occurred", fmt.Errorf("pq: secret table")).(*Problem)
	if p.Status != 500 || p.Code != app.EINTERNAL || strings.Contains(p.Detail, "secret") || len(p.Errors) != 0 {
		t.Errorf("500: %+v", p)
	}
}
