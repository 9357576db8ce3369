package graph

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestNewValidatesURLs(t *testing.T) {
	base := Config{AzureTenantID: "t", ClientID: "c", ClientSecret: "s"}
	for _, bad := range []string{"graph.microsoft.com/v1.0", "ftp://x/v1.0", "/v1.0", "http://"} {
		cfg := base
		cfg.GraphURL = bad
		if _, err := New(cfg); err == nil {
			t.Errorf("GraphURL %q accepted", bad)
		}
	}
	c, err := New(base)
	if err != nil || c.cfg.GraphURL != DefaultGraphURL || c.tokenScope() != "https://graph.microsoft.com/.default" {
		t.Fatalf("defaults: %v %+v", err, c.cfg)
	}
}

func TestTokenCachedRefreshedAndSingleFlight(t *testing.T) {
	f := newFake(t, nil)
	f.tokenDelay = 50 * time.Millisecond
	c := f.client(t, nil)
	now := time.Now()
	c.now = func() time.Time { return now }

	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if tok, err := c.Token(context.Background()); err != nil || tok != "tok-1" {
				t.Errorf("Token = %q, %v", tok, err)
			}
		}()
	}
	wg.Wait()
	if n := f.tokenCalls.Load(); n != 1 {
		t.Fatalf("%d token fetches for 20 concurrent callers, want 1", n)
	}
	now = now.Add(3599*time.Second - 6*time.Minute) // more than 5 minutes left
	if tok, _ := c.Token(context.Background()); tok != "tok-1" {
		t.Fatalf("token refetched early: %q", tok)
	}
	now = now.Add(2 * time.Minute) // within 5 minutes of expiry
	if tok, _ := c.Token(context.Background()); tok != "tok-2" {
		t.Fatalf("token not refreshed 5 minutes before expiry: %q", tok)
	}
}

func TestTokenRefusedIsAuthError(t *testing.T) {
	f := newFake(t, nil)
	f.tokenFail = `{"error":"invalid_client","error_description":"AADSTS7000215: Invalid client secret provided. Ensure the secret being sent in the request is the client secret value.\r\nTrace ID: 1\r\nCorrelation ID: 2","error_codes":[7000215],"timestamp":"2024-01-01 00:00:00Z"}`
	_, err := f.client(t, nil).Token(context.Background())
	var ae *AuthError
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v, want *AuthError", err)
	}
	if ae.Status != 401 || ae.Err != "invalid_client" || ae.Reason() != "AADSTS7000215: the client secret is not valid" {
		t.Fatalf("AuthError = %+v, reason %q", ae, ae.Reason())
	}
	if strings.Contains(ae.Description, "Trace ID") {
		t.Errorf("description keeps more than its first line: %q", ae.Description)
	}
}

func TestAuthErrorReasons(t *testing.T) {
	tests := []struct {
		body, want string
	}{
		{`{"error":"invalid_client","error_codes":[7000222]}`, "AADSTS7000222: the client secret has expired"},
		{`{"error":"unauthorized_client","error_codes":[700016]}`, "AADSTS700016: the application was not found in the tenant (not consented, or the wrong tenant)"},
		{`{"error":"invalid_request","error_description":"AADSTS90002: Tenant 'x' not found. More."}`, "AADSTS90002: the tenant was not found (check the tenant id and the cloud)"},
		{`{"error":"invalid_request","error_description":"AADSTS99999: Something new. More text."}`, "AADSTS99999: Something new."},
		{`not json`, "not json"},
	}
	for _, tt := range tests {
		if got := parseAuthError(400, []byte(tt.body)).Reason(); got != tt.want {
			t.Errorf("Reason(%s) = %q, want %q", tt.body, got, tt.want)
		}
	}
}

func TestExpiredTokenIsRefreshedOnce(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		if r.Header.Get("Authorization") == "Bearer tok-1" {
			graphError(w, 401, "InvalidAuthenticationToken")
			return
		}
		writeJSON(w, 200, map[string]string{"id": "u1"})
	})
	c := f.client(t, nil)
	var u User
	if err := c.JSON(context.Background(), ScopeDirectory, "GET", "/users/u1", nil, nil, &u); err != nil || u.ID != "u1" {
		t.Fatalf("JSON = %+v, %v", u, err)
	}
	if len(seen) != 2 || seen[1] != "Bearer tok-2" {
		t.Fatalf("authorizations sent: %q", seen)
	}
}

func TestRetriesServerErrorsAndGivesUp(t *testing.T) {
	var calls int
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		calls++
		graphError(w, 503, "serviceNotAvailable")
	})
	c := f.client(t, func(c *Config) { c.MaxRetries = 2 })
	err := c.JSON(context.Background(), ScopeDirectory, "GET", "/users", nil, nil, nil)
	if StatusOf(err) != 503 || !IsCode(err, "SERVICENOTAVAILABLE") || calls != 3 {
		t.Fatalf("err %v after %d calls, want 503 after 3", err, calls)
	}
}

func TestLongRetryAfterIsReturned(t *testing.T) {
	var calls int
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		calls++
		w.Header().Set("Retry-After", "120")
		graphError(w, 429, "ApplicationThrottled")
	})
	c := f.client(t, func(c *Config) { c.MaxRetryAfter = time.Second })
	start := time.Now()
	err := c.JSON(context.Background(), Mailbox("u1"), "GET", "/users/u1/messages", nil, nil, nil)
	var ge *Error
	if !errors.As(err, &ge) || ge.RetryAfter != 120*time.Second || calls != 1 || time.Since(start) > time.Second {
		t.Fatalf("err %v after %d calls", err, calls)
	}
	// The scope stays fenced: the next request is refused without being sent.
	err = c.JSON(context.Background(), Mailbox("u1"), "GET", "/users/u1/messages", nil, nil, nil)
	if !errors.As(err, &ge) || ge.RetryAfter < 100*time.Second || calls != 1 {
		t.Fatalf("fenced scope: err %v, %d calls", err, calls)
	}
}

func TestMailboxRequestsPreferImmutableIDs(t *testing.T) {
	var prefer []string
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		prefer = append(prefer, r.Header.Get("Prefer"))
		writeJSON(w, 200, map[string]any{"value": []any{}, "@odata.deltaLink": "d"})
	})
	c := f.client(t, nil)
	if _, err := c.MessagesDelta(context.Background(), "u1", "inbox", "", func([]Message) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DriveDelta(context.Background(), "d1", "", func([]DriveItem) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if prefer[0] != `odata.maxpagesize=500, IdType="ImmutableId"` || prefer[1] != "" {
		t.Fatalf("Prefer headers: %q", prefer)
	}
}
