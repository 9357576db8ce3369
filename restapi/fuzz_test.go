package restapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"backstop/app"
)

// fuzzRoutes are the operations that decode a request body. A session
// cookie and CSRF token go with every request, so bodies reach the handler.
var fuzzRoutes = []struct{ method, path string }{
	{http.MethodPost, "/api/v1/api-keys"},
	{http.MethodPost, "/api/v1/tenants"},
	{http.MethodPost, "/api/v1/session"},
	{http.MethodPost, "/api/v1/setup"},
	{http.MethodPatch, "/api/v1/settings"},
}

// FuzzRequestBodies sends arbitrary bodies to every body-decoding route and
// requires an answer below 500, as problem+json when it is an error. Seeds
// live in testdata/fuzz/FuzzRequestBodies and below.
func FuzzRequestBodies(f *testing.F) {
	// Sign-in runs argon2 against a dummy hash for unknown accounts; at
	// production cost that is a fraction of a second per input. The fuzzer
	// checks decoding and handling, not the hash cost.
	dummy := app.DummyPasswordHash
	cheap := cheapHash("not the password")
	app.DummyPasswordHash = func() string { return cheap }
	f.Cleanup(func() { app.DummyPasswordHash = dummy })

	h := newHarness(f, app.EditionProvider, func(o *Options) { o.SetupToken = "fuzz-setup-token" })
	admin := &app.User{Email: "root@example.com", PasswordHash: cheapHash("provider-password-1")}
	if err := h.db.CreateUser(f.Context(), admin); err != nil {
		f.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.srv.ServeHTTP(rec, httptest.NewRequest("POST", "/api/v1/session",
		strings.NewReader(`{"email":"root@example.com","password":"provider-password-1"}`)))
	if rec.Code != 200 {
		f.Fatalf("sign-in: %d %s", rec.Code, rec.Body)
	}
	var cookie *http.Cookie
	for _, c := range rec.Result().Cookies() {
		if c.Name == sessionCookie {
			cookie = c
		}
	}
	var sess struct{ CSRFToken string }
	json.Unmarshal(rec.Body.Bytes(), &sess)

	tenant := h.tenantA.ID
	for i, body := range []string{
		`{"tenantId":"` + tenant + `","name":"k","scopes":["status:read"],"expiresInDays":30}`,
		`{"name":"Gamma"}`,
		`{"email":"root@example.com","password":"provider-password-1"}`,
		`{"token":"fuzz-setup-token","email":"a@example.com","password":"long-enough-password"}`,
		`{"updateCheck":true,"updateChannel":"beta"}`,
	} {
		f.Add(uint8(i), []byte(body))
	}
	f.Add(uint8(0), []byte(`{"name":"k","scopes":["status:read"],"expiresInDays":30.0,"provider":true}`))
	f.Add(uint8(0), []byte(`{"tenantId":"`+tenant+`","name":"\u0000","scopes":["webhooks:manage"],"expiresInDays":null}`))
	f.Add(uint8(1), []byte(`{"name":"`+strings.Repeat("é", 201)+`"}`))
	f.Add(uint8(2), []byte(`{"email":"a@b","password":""}`))
	f.Add(uint8(4), []byte(`{"updateChannel":null}`))
	f.Add(uint8(4), []byte(`[]`))

	var n int
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		rt := fuzzRoutes[int(route)%len(fuzzRoutes)]
		req := httptest.NewRequest(rt.method, rt.path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-CSRF-Token", sess.CSRFToken)
		req.AddCookie(cookie)
		// Spread sign-ins over addresses so the per-IP limit is reached
		// now and then, not on every input.
		n++
		req.RemoteAddr = fmt.Sprintf("10.0.%d.%d:40000", n/256%256, n%256)
		rec := httptest.NewRecorder()
		h.srv.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s %q: %d %s", rt.method, rt.path, body, rec.Code, rec.Body)
		}
		if rec.Code >= 400 {
			var p Problem
			if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
				t.Fatalf("%s %s %q: %d with Content-Type %q", rt.method, rt.path, body, rec.Code, ct)
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.Status != rec.Code || p.Code == "" {
				t.Fatalf("%s %s %q: problem %s (%v)", rt.method, rt.path, body, rec.Body, err)
			}
		}
	})
}
