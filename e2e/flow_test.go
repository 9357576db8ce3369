package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"backstop/app/update/githubtest"
	"backstop/store"
)

const (
	adminEmail    = "admin@msp.example"
	adminPassword = "correct horse battery"
	xssName       = `<img src=x onerror=alert(1)>`
)

// TestWebInterface walks the interface as an administrator would, against
// the real binary: first-run setup, sign out and in (with a wrong password
// first), tenants (one named with HTML), an API key read once, used and
// revoked (its copy button read back from the clipboard), a stale CSRF
// token, webhooks (test event, rotated secret, replay), a job's live
// progress and its failure explained, settings, the audit log in New York
// time, a tenant administrator's narrower view, the phone layout and the
// keyboard, and an expired session. Each step leaves a screenshot.
func TestWebInterface(t *testing.T) {
	// The release feed the update check asks, on 127.0.0.1.
	feed := githubtest.New("backstop-dev/backstop", nil, githubtest.Release{Tag: "v1.4.0", Prerelease: true,
		CreatedAt: time.Now().Add(-time.Hour), PublishedAt: time.Now().Add(-time.Hour)})
	t.Cleanup(feed.Close)
	a := startAppliance(t, "SERVICE_WEBHOOK_ALLOW_PRIVATE=true", "SERVICE_UPDATE_API_URL="+feed.URL, "SERVICE_UPDATE_REPOSITORY=backstop-dev/backstop")
	b := newBrowser(t, a.URL, 1280, 860)

	// First run: the link printed by serve.
	b.open("/setup#token=" + a.SetupToken)
	b.waitText("Create the first administrator")
	b.fill("E-mail address", adminEmail)
	b.fill("Password", adminPassword)
	b.fill("Repeat the password", adminPassword)
	b.shot("01-setup")
	b.click("Create administrator")
	b.waitText("Needs attention first")
	if loc := eval[string](b, `location.pathname + location.hash`); loc != "/ui/" {
		t.Fatalf("after setup the address is %q; the spent token must leave the address bar", loc)
	}
	b.shot("02-dashboard")

	// Sign out, then a wrong password, then the right one.
	b.click("Sign out")
	b.waitText("You have signed out.")
	b.fill("E-mail address", adminEmail)
	b.fill("Password", "not the password")
	b.click("Sign in")
	b.waitText("The e-mail address or password is not correct.")
	b.shot("03-wrong-password")
	b.fill("Password", adminPassword)
	b.click("Sign in")
	b.waitText("Needs attention first")

	// Tenants, one of them named with markup that must stay text.
	b.click("Tenants")
	b.waitText("No tenants yet")
	b.fill("Name", xssName)
	b.click("Create tenant")
	b.waitText(xssName)
	b.fill("Name", "Acme Dental")
	b.click("Create tenant")
	b.waitText("Tenant “Acme Dental” created.")
	if n := eval[int](b, `document.querySelectorAll('img[src="x"]').length`); n != 0 {
		t.Fatalf("the tenant name became %d <img> elements", n)
	}
	b.shot("04-tenants")

	// Switch to the tenant from the menu, then create a key and read it once.
	b.selectOption("#tenant-switch", "Acme Dental")
	b.click("API keys")
	b.waitText("No API keys yet")
	b.click("New API key")
	b.fill("Name", "PSA sync")
	b.click("Create key")
	b.waitText("Copy this key now.")
	b.shot("05-key-once")
	key := eval[string](b, `document.querySelector('#secret-value').value`)
	if !strings.HasPrefix(key, "bsk_") {
		t.Fatalf("key value %q", key)
	}
	copyKeySteps(t, b, key)
	if code, body := a.call(t, http.MethodGet, "/api/v1/status", key, nil); code != http.StatusOK {
		t.Fatalf("new key: GET /status = %d %v", code, body)
	}
	b.click("I have stored the key")
	b.waitText("PSA sync")
	if strings.Contains(eval[string](b, `document.body.innerText`), key) {
		t.Fatal("the key value is still on the page after its dialog closed")
	}
	b.click("Revoke")
	b.waitText("Revoke this key?")
	b.click("Revoke key")
	b.waitText("Revoked")
	b.shot("06-key-revoked")
	if code, _ := a.call(t, http.MethodGet, "/api/v1/status", key, nil); code != http.StatusUnauthorized {
		t.Fatalf("revoked key: GET /status = %d, want 401", code)
	}

	// A stale CSRF token (signed in again in another tab): a clear message,
	// and the retry works.
	eval[bool](b, `fetch('/api/v1/session', {method: 'POST', headers: {'Content-Type': 'application/json'},
		body: JSON.stringify({email: '`+adminEmail+`', password: '`+adminPassword+`'})}).then((r) => r.ok)`)
	b.click("Tenants")
	b.fill("Name", "Beta Bakery")
	b.click("Create tenant")
	b.waitText("security token is out of date")
	b.shot("07-csrf")
	b.click("Create tenant")
	b.waitText("Tenant “Beta Bakery” created.")

	t.Run("webhooks", func(t *testing.T) { webhookSteps(t, a, b) })
	var jobID string
	t.Run("job progress", func(t *testing.T) { jobID = jobSteps(t, a, b) })
	t.Run("settings", func(t *testing.T) { settingsSteps(t, b) })
	// Another tenant's key, which Acme Dental's administrator must not see.
	tenantID := func(name string) string {
		return eval[string](b, fmt.Sprintf(`fetch('/api/v1/tenants').then((r) => r.json()).then((d) => d.items.find((t) => t.name === %s).id)`, js(name)))
	}
	acme, bakery := tenantID("Acme Dental"), tenantID("Beta Bakery")
	eval[bool](b, fmt.Sprintf(`fetch('/api/v1/session').then((r) => r.json()).then((s) => fetch('/api/v1/api-keys', { method: 'POST',
		headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': s.csrfToken, 'X-Service-Tenant': %[1]s },
		body: JSON.stringify({ tenantId: %[1]s, name: 'Bakery till', scopes: ['status:read'], expiresInDays: null }) })).then((r) => r.ok)`, js(bakery)))
	t.Run("audit log", func(t *testing.T) { auditSteps(t, b, "PSA sync") })
	t.Run("tenant administrator", func(t *testing.T) { tenantAdminSteps(t, a, acme, "Acme Dental", "PSA sync", "Bakery till") })
	t.Run("phone and keyboard", func(t *testing.T) { phoneSteps(t, a, jobID) })
	b.shot("10-api-reference-before")
	b.click("API reference")
	b.waitText("Getting started")
	b.waitText("/api/v1/status")
	b.shot("11-api-reference")

	// An expired session: the next request is refused and the page asks to
	// sign in again.
	expireSessions(t, a)
	b.click("Audit log")
	b.waitText("Your session has ended. Sign in again to continue.")
	b.shot("12-session-ended")

	if n := b.dialogs.Load(); n != 0 {
		t.Fatalf("%d JavaScript dialogs opened: injected script ran", n)
	}
}

// expireSessions moves every session's expiry into the past, through the
// same SQLite file the running appliance uses.
func expireSessions(t *testing.T, a *appliance) {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(a.DataDir, "backstop.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	past := time.Now().Add(-time.Hour).UnixMilli()
	if err := db.WriteTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE sessions SET expires_at = ?`, past)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}
