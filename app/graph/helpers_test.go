package graph

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeGraph is a minimal Graph for this package's tests: a token endpoint
// that counts its calls and a handler for everything under /v1.0.
type fakeGraph struct {
	srv        *httptest.Server
	tokenCalls atomic.Int64
	tokenDelay time.Duration
	tokenFail  string // a JSON error body for the token endpoint
}

func newFake(t *testing.T, graph http.HandlerFunc) *fakeGraph {
	t.Helper()
	f := &fakeGraph{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /tenant-1/oauth2/v2.0/token", func(w http.ResponseWriter, r *http.Request) {
		n := f.tokenCalls.Add(1)
		time.Sleep(f.tokenDelay)
		if f.tokenFail != "" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(f.tokenFail))
			return
		}
		if r.PostFormValue("grant_type") != "client_credentials" || r.PostFormValue("client_secret") != "s3cret" ||
			r.PostFormValue("client_id") != "app-1" || r.PostFormValue("scope") != f.srv.URL+"/.default" {
			http.Error(w, "bad form "+r.PostForm.Encode(), http.StatusBadRequest)
			return
		}
		writeJSON(w, 200, map[string]any{"token_type": "Bearer", "expires_in": 3599, "access_token": "tok-" + itoa(n)})
	})
	mux.HandleFunc("/v1.0/", func(w http.ResponseWriter, r *http.Request) {
		r.URL.Path = strings.TrimPrefix(r.URL.Path, "/v1.0")
		graph(w, r)
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeGraph) client(t *testing.T, mod func(*Config)) *Client {
	t.Helper()
	cfg := Config{GraphURL: f.srv.URL + "/v1.0", LoginURL: f.srv.URL, AzureTenantID: "tenant-1",
		ClientID: "app-1", ClientSecret: "s3cret"}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.backoff = 5 * time.Millisecond
	return c
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func graphError(w http.ResponseWriter, status int, code string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"code": code, "message": "m",
		"innerError": map[string]any{"request-id": "rid-1"}}})
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }
