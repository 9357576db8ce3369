package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// settingsSteps turns the update check on and picks the beta channel as a
// provider administrator, and checks both survive a reload. The appliance
// runs with its release feed on 127.0.0.1 (see TestWebInterface).
func settingsSteps(t *testing.T, b *browser) {
	b.click("Settings")
	b.waitText("Check for updates daily")
	if eval[bool](b, `document.querySelector('main input[type=checkbox]').checked`) {
		t.Fatal("the update check is on in a fresh installation")
	}
	b.run("tick the update check", chromedpClickSelector("main input[type=checkbox]"))
	b.selectOption("main select", "Beta (early releases)")
	b.click("Save settings")
	b.waitText("Settings saved.")
	b.shot("13-settings-saved")
	b.open("/ui/settings")
	b.waitText("Check for updates daily")
	b.waitTrue("the saved settings after a reload", `(() => { const c = document.querySelector('main input[type=checkbox]');
		return !!c && c.checked && document.querySelector('main select').value === 'beta'; })()`)
	type settings struct {
		UpdateCheck   bool   `json:"updateCheck"`
		UpdateChannel string `json:"updateChannel"`
	}
	if s := eval[settings](b, `fetch('/api/v1/settings').then((r) => r.json())`); !s.UpdateCheck || s.UpdateChannel != "beta" {
		t.Fatalf("the API says %+v after saving", s)
	}
}

// auditRow is one row of the audit table as the page shows it.
type auditRow struct {
	At     string `json:"at"` // the datetime attribute: the API's UTC time
	Shown  string `json:"shown"`
	Title  string `json:"title"`
	Actor  string `json:"actor"`
	Tenant string `json:"tenant"`
}

// auditRows waits until the audit table shows the answer to a request
// whose decoded path p makes the JavaScript expression match true, then
// returns its rows.
func auditRows(b *browser, match string) []auditRow {
	b.t.Helper()
	// The tenant column shows a tenant's id until the tenant list (loaded
	// beside the audit answer) names it: wait for the names too.
	b.waitTrue("the audit answer for "+match, fmt.Sprintf(`(() => { const w = document.querySelector('[data-loaded]');
		if (!w || w.getAttribute('aria-busy') !== 'false') return false;
		if ([...w.querySelectorAll('tbody > tr')].some((tr) => tr.children[3].innerText.startsWith('tn_'))) return false;
		const p = decodeURIComponent(w.dataset.loaded); return %s; })()`, match))
	return eval[[]auditRow](b, `[...document.querySelectorAll('[data-loaded] > table > tbody > tr')].map((tr) => {
		const t = tr.querySelector('time');
		return { at: t.getAttribute('datetime'), shown: t.textContent, title: t.title, actor: tr.children[1].innerText, tenant: tr.children[3].innerText };
	})`)
}

// setLocal sets a datetime-local input as a person picking a time would.
func setLocal(b *browser, id string, at time.Time) {
	b.t.Helper()
	eval[bool](b, fmt.Sprintf(`(() => { const e = document.getElementById(%s); e.value = %s;
		e.dispatchEvent(new Event('input', { bubbles: true })); return true; })()`, js(id), js(at.Format("2006-01-02T15:04:05"))))
}

// auditSteps reads the audit log in a browser set to New York time: times
// are shown in that zone with the UTC time on hover, and the tenant, actor
// and time filters each narrow the rows to the ones that match.
func auditSteps(t *testing.T, b *browser, keyName string) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	b.timezone("America/New_York")
	b.open("/ui/audit")
	if tz := eval[string](b, `Intl.DateTimeFormat().resolvedOptions().timeZone`); tz != "America/New_York" {
		t.Fatalf("the page runs in time zone %q", tz)
	}
	b.selectOption("#au-tenant", "All tenants")
	b.click("Apply filters")
	all := auditRows(b, `!p.includes('tenantId=')`)
	if len(all) < 10 {
		t.Fatalf("the audit log shows %d rows", len(all))
	}
	b.shotViewport("14-audit-new-york")
	if !eval[bool](b, `(() => { const w = document.querySelector('[data-loaded]'); return w.scrollWidth <= w.clientWidth; })()`) {
		t.Fatal("the audit table is wider than the page at 1280 px: columns are cut off")
	}

	// Local time shown, UTC on hover.
	at, err := time.Parse(time.RFC3339Nano, all[0].At)
	if err != nil {
		t.Fatalf("row time %q: %v", all[0].At, err)
	}
	local, utc := at.In(ny).Format("3:04:05"), at.UTC().Format("15:04:05")
	if shown := normalizeSpace(all[0].Shown); !strings.Contains(shown, local) || strings.Contains(shown, utc) {
		t.Fatalf("the newest entry at %s is shown as %q; want New York time %s", all[0].At, shown, local)
	}
	if want := "UTC " + at.UTC().Format("2006-01-02 15:04:05Z"); all[0].Title != want {
		t.Fatalf("hover text %q, want %q", all[0].Title, want)
	}

	// Tenant: only the chosen tenant's rows.
	tenants := map[string]bool{}
	for _, r := range all {
		tenants[r.Tenant] = true
	}
	if !tenants["Beta Bakery"] || len(tenants) < 2 {
		t.Fatalf("all tenants' rows name the tenants %v", tenants)
	}
	b.selectOption("#au-tenant", "Beta Bakery")
	b.click("Apply filters")
	bakery := auditRows(b, `p.includes('tenantId=')`)
	if len(bakery) == 0 || len(bakery) >= len(all) {
		t.Fatalf("tenant filter: %d rows of %d", len(bakery), len(all))
	}
	for _, r := range bakery {
		if r.Tenant != "Beta Bakery" {
			t.Fatalf("tenant filter Beta Bakery shows a row of %q", r.Tenant)
		}
	}

	// Actor: the API key that read the status.
	keyID := eval[string](b, fmt.Sprintf(`fetch('/api/v1/api-keys').then((r) => r.json()).then((d) => d.items.find((k) => k.name === %s).id)`, js(keyName)))
	b.selectOption("#au-tenant", "All tenants")
	b.fill("Actor id", keyID)
	b.click("Apply filters")
	byKey := auditRows(b, fmt.Sprintf(`p.includes('actorId=' + %s) && !p.includes('tenantId=')`, js(keyID)))
	if len(byKey) == 0 || len(byKey) >= len(all) {
		t.Fatalf("actor filter: %d rows of %d", len(byKey), len(all))
	}
	for _, r := range byKey {
		if !strings.Contains(r.Actor, keyID) {
			t.Fatalf("actor filter %s shows a row of %q", keyID, r.Actor)
		}
	}
	b.fill("Actor id", "")

	// Time: a boundary between two rows a second or more apart, entered in
	// New York time as the person sees it.
	var boundary time.Time
	split := -1
	for i := 0; i+1 < len(all); i++ {
		newer, _ := time.Parse(time.RFC3339Nano, all[i].At)
		older, _ := time.Parse(time.RFC3339Nano, all[i+1].At)
		if newer.Truncate(time.Second).After(older) && i > 0 {
			boundary, split = newer.Truncate(time.Second), i
			break
		}
	}
	if split < 0 {
		t.Fatalf("no two audit rows a second apart among %d", len(all))
	}
	setLocal(b, "au-since", boundary.In(ny))
	b.click("Apply filters")
	since := auditRows(b, fmt.Sprintf(`p.includes('since=' + %s) && !p.includes('actorId=')`, js(boundary.UTC().Format("2006-01-02T15:04:05"))))
	if len(since) == 0 || len(since) >= len(all) {
		t.Fatalf("from %s: %d rows of %d", boundary, len(since), len(all))
	}
	for _, r := range since {
		if at, _ := time.Parse(time.RFC3339Nano, r.At); at.Before(boundary) {
			t.Fatalf("from %s shows a row at %s", boundary, r.At)
		}
	}
	eval[bool](b, `(() => { const e = document.getElementById('au-since'); e.value = ''; e.dispatchEvent(new Event('input', { bubbles: true })); return true; })()`)
	setLocal(b, "au-until", boundary.In(ny))
	b.click("Apply filters")
	until := auditRows(b, `p.includes('until=') && !p.includes('since=')`)
	if len(until) == 0 {
		t.Fatalf("until %s: no rows", boundary)
	}
	for _, r := range until {
		if at, _ := time.Parse(time.RFC3339Nano, r.At); !at.Before(boundary.Add(time.Second)) {
			t.Fatalf("until %s shows a row at %s", boundary, r.At)
		}
	}
	b.shotViewport("14-audit-filtered")
}

// tenantAdminSteps signs in as a tenant administrator of tenantName in a
// browser of its own: settings are read-only, only its tenant's data is
// shown, and there is no tenant menu and no Tenants page.
func tenantAdminSteps(t *testing.T, a *appliance, tenantID, tenantName, ownKey, otherKey string) {
	const email, password = "tech@acme.example", "tenant admin password"
	cmd := exec.Command(binary(t), "admin", "create-user", "--data-dir", a.DataDir, "--tenant", tenantID, "--email", email, "--password-stdin")
	cmd.Env = append(os.Environ(), "SERVICE_EDITION=provider")
	cmd.Stdin = strings.NewReader(password + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("admin create-user: %v\n%s", err, out)
	}
	b := newBrowser(t, a.URL, 1280, 860)
	b.open("/ui/")
	b.fill("E-mail address", email)
	b.fill("Password", password)
	b.click("Sign in")
	b.waitText("Needs attention first")
	if n := eval[int](b, `document.querySelectorAll('#tenant-switch').length`); n != 0 {
		t.Fatal("a tenant administrator gets the tenant menu")
	}
	if nav := eval[string](b, `document.querySelector('nav').innerText`); strings.Contains(nav, "Tenants") {
		t.Fatalf("a tenant administrator's navigation offers Tenants:\n%s", nav)
	}
	b.open("/ui/tenants")
	b.waitText("Page not found")

	b.open("/ui/settings")
	b.waitText("Only provider administrators change appliance settings.")
	if !eval[bool](b, `(() => { const c = document.querySelector('main input[type=checkbox]'), s = document.querySelector('main select');
		return c.disabled && s.disabled && c.checked && s.value === 'beta'; })()`) {
		t.Fatal("the settings are not shown read-only with the saved values")
	}
	if strings.Contains(b.text(), "Save settings") {
		t.Fatal("a tenant administrator gets a Save button")
	}
	b.shot("15-tenant-admin-settings")

	b.click("API keys")
	b.waitText(ownKey)
	if strings.Contains(b.text(), otherKey) {
		t.Fatalf("a tenant administrator of %s sees another tenant's key %q", tenantName, otherKey)
	}

	b.click("Audit log")
	rows := auditRows(b, `p.includes('limit=')`)
	if len(rows) == 0 || eval[int](b, `document.querySelectorAll('#au-tenant').length`) != 0 {
		t.Fatalf("tenant administrator's audit log: %d rows, tenant filter offered: %v", len(rows), eval[int](b, `document.querySelectorAll('#au-tenant').length`) != 0)
	}
	for _, r := range rows {
		if r.Tenant != tenantName {
			t.Fatalf("a tenant administrator of %s sees an audit row of %q", tenantName, r.Tenant)
		}
	}
	b.shotViewport("15-tenant-admin-audit")
	if n := b.dialogs.Load(); n != 0 {
		t.Fatalf("%d JavaScript dialogs opened", n)
	}
}
