package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"backstop/agentapi/wire"
	"backstop/app/blobstore/s3backend/s3test"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
)

// sessionFetch calls the API from the page with the session's CSRF token,
// as the interface does, and answers the parsed JSON.
func sessionFetch[T any](b *browser, method, path string, body any) T {
	b.t.Helper()
	payload := "undefined"
	if body != nil {
		payload = "JSON.stringify(" + mustJSON(body) + ")"
	}
	return eval[T](b, fmt.Sprintf(`fetch('/api/v1/session').then((r) => r.json()).then((s) => fetch(%s, { method: %s,
		headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': s.csrfToken }, body: %s })).then((r) => r.json())`,
		js("/api/v1"+path), js(method), payload))
}

func mustJSON(v any) string {
	out, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(out)
}

// allowDownloads makes the browser save downloads into dir under the name
// the page gives them, as a person's browser would into ~/Downloads.
func (b *browser) allowDownloads(dir string) {
	b.t.Helper()
	value(b, "allow downloads", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.CallBrowser(ctx, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
			Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllow, DownloadPath: dir})
		return err
	}))
}

// tick clicks the checkbox or radio button whose label's text is label.
func (b *browser) tick(label string) {
	b.t.Helper()
	value(b, "tick "+label, chromedp.Poll[bool](fmt.Sprintf(`(() => {
		const l = [...document.querySelectorAll('label')].reverse().find((l) => l.textContent.trim() === %s && l.offsetParent !== null);
		if (!l) return false; l.querySelector('input').click(); return true; })()`, js(label)), chromedp.WithPollingTimeout(10*time.Second)))
}

// targetRow is one row of the storage targets table as the page shows it.
type targetRow struct {
	Name    string `json:"name"`
	State   string `json:"state"`
	Where   string `json:"where"`
	Tenants string `json:"tenants"`
	Text    string `json:"text"`
}

func targetRows(b *browser) []targetRow {
	b.t.Helper()
	return eval[[]targetRow](b, `[...document.querySelectorAll('table.targets tbody tr')].map((tr) => ({
		name: tr.querySelector('.name').textContent, state: tr.querySelector('td.state .badge').textContent,
		where: tr.querySelector('td.where').innerText, tenants: tr.children[5].innerText, text: tr.innerText }))`)
}

// waitRow waits until the targets table lists name (it reloads after a change).
func (b *browser) waitRow(name string) {
	b.t.Helper()
	b.waitTrue("the row of "+name, fmt.Sprintf(`[...document.querySelectorAll('table.targets .name')].some((e) => e.textContent === %s)`, js(name)))
}

func findRow(t *testing.T, rows []targetRow, name string) targetRow {
	t.Helper()
	for _, r := range rows {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no target %q in the table: %+v", name, rows)
	return targetRow{}
}

// freePort is a port on 127.0.0.1 nothing listens on.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestStoragePage walks the Storage page as a provider administrator
// against the real binary: the default local target is OK; a second local
// target passes the check; an S3 target on a closed port fails it with the
// appliance's reason shown in the form; a real S3 server (versitygw) is
// added and listed OK with a tenant placed on it; another tenant is placed
// on a target through Edit; a wrong S3 secret is refused with the old one
// kept; the appliance key is downloaded once (the
// bytes are data_dir/blobstore.key) and refused after with who and when;
// a tenant's retention policy is edited (a warning for a tier of 0, the
// appliance's error for a tier shorter than the one before), reset, and
// run now, followed to its job; a machine gets its own policy and drops
// it; the dashboard card agrees with GET /storage; a tenant administrator
// sees their targets read-only; and the page fits a phone.
func TestStoragePage(t *testing.T) {
	a := startAppliance(t)
	a.createAdmin(t, adminEmail, adminPassword)
	b := newBrowser(t, a.URL, 1280, 900)
	b.setSession(a.signIn(t, adminEmail, adminPassword))
	b.open("/ui/tenants")
	for _, name := range []string{"Acme Dental", "Beta Bakery"} {
		b.fill("Name", name)
		b.click("Create tenant")
		b.waitText("Tenant “" + name + "” created.")
	}

	// The default target of a fresh install.
	b.click("Storage")
	b.waitText("Local disk")
	if r := findRow(t, targetRows(b), "Local disk"); r.State != "OK" || !strings.Contains(r.Where, filepath.Join(a.DataDir, "blobs")) ||
		!strings.Contains(r.Text, "Default") || !strings.Contains(r.Tenants, "Every tenant not placed elsewhere") {
		t.Fatalf("the default target's row: %+v", r)
	}
	b.waitText("Appliance key")
	b.shot("20-storage")

	// A second local target, in a directory that exists.
	dir := t.TempDir()
	b.click("Add storage target")
	b.fill("Name", "Second disk")
	b.fill("Directory path", dir)
	b.click("Check and add target")
	b.waitText("Target “Second disk” added: the check passed")
	b.waitRow("Second disk")
	if r := findRow(t, targetRows(b), "Second disk"); r.State != "OK" || !strings.Contains(r.Where, dir) {
		t.Fatalf("the new local target's row: %+v", r)
	}

	// S3 on a port nothing listens on: the check's reason, in the form.
	closed := freePort(t)
	b.click("Add storage target")
	b.fill("Name", "Closed S3")
	b.tick("S3-compatible")
	b.fill("Endpoint", closed)
	b.fill("Bucket", "backstop")
	b.fill("Access key ID", "AKIAEXAMPLE")
	b.fill("Secret access key", "not-a-secret")
	b.tick("Use HTTPS")
	// Record whether "Checking the target…" was ever on screen: the check of
	// a closed port may end quickly.
	eval[bool](b, `(() => { window.sawChecking = false; new MutationObserver(() => {
		if (document.body.innerText.includes('Checking the target…')) window.sawChecking = true; })
		.observe(document.body, { subtree: true, childList: true, characterData: true }); return true; })()`)
	b.click("Check and add target")
	value(b, "the check's failure", chromedp.Poll[bool](`!!document.querySelector('[data-testid=check-failed]')`,
		chromedp.WithPollingTimeout(60*time.Second)))
	reason := eval[string](b, `document.querySelector('[data-testid=check-failed]').innerText`)
	t.Logf("closed port: %q", reason)
	if low := strings.ToLower(reason); !strings.Contains(low, "unreachable") && !strings.Contains(low, "connection refused") {
		t.Fatalf("the failed check says %q, want its reason (unreachable / connection refused)", reason)
	}
	if !eval[bool](b, `window.sawChecking`) {
		t.Error(`"Checking the target…" was never shown while the check ran`)
	}
	if !eval[bool](b, `!!document.querySelector('dialog[open]')`) {
		t.Fatal("the dialog closed after a failed check")
	}
	b.shotViewport("21-storage-check-failed")

	// The same form, pointed at a real S3 server, with a tenant placed on it.
	srv := s3test.StartVersity(t)
	b.fill("Name", "Versity")
	b.fill("Endpoint", srv.Endpoint)
	b.fill("Bucket", srv.Bucket)
	b.fill("Access key ID", srv.AccessKey)
	b.fill("Secret access key", srv.SecretKey)
	b.tick("Path-style addressing")
	b.tick("Acme Dental")
	b.click("Check and add target")
	value(b, "the S3 target added", chromedp.Poll[bool](`document.body.innerText.includes('Target “Versity” added')`,
		chromedp.WithPollingTimeout(60*time.Second)))
	b.waitRow("Versity")
	if r := findRow(t, targetRows(b), "Versity"); r.State != "OK" || !strings.Contains(r.Where, "http://"+srv.Endpoint) ||
		!strings.Contains(r.Where, srv.Bucket) || r.Tenants != "Acme Dental" || !strings.Contains(r.Text, "not reported") {
		t.Fatalf("the S3 target's row: %+v", r)
	}
	if strings.Contains(b.text(), srv.SecretKey) {
		t.Fatal("the S3 secret is on the page")
	}
	b.shot("22-storage-s3-added")

	// Place Beta Bakery on the second disk through Edit.
	b.run("edit Second disk", chromedp.Click(chromedp.CSS(`button[aria-label="Edit Second disk"]`)))
	b.waitText("Tenants placed on this target")
	b.tick("Beta Bakery")
	b.click("Save changes")
	b.waitTrue("Beta Bakery placed", `[...document.querySelectorAll('table.targets tbody tr')].some((tr) =>
		tr.innerText.includes('Second disk') && tr.children[5].innerText.includes('Beta Bakery'))`)
	type target struct {
		Name      string   `json:"name"`
		State     string   `json:"state"`
		TenantIDs []string `json:"tenantIds"`
	}
	type targetList struct {
		Items []target `json:"items"`
	}
	tenantID := func(name string) string {
		return eval[string](b, fmt.Sprintf(`fetch('/api/v1/tenants').then((r) => r.json()).then((d) => d.items.find((t) => t.name === %s).id)`, js(name)))
	}
	acme, bakery := tenantID("Acme Dental"), tenantID("Beta Bakery")
	placed := map[string][]string{}
	for _, tg := range eval[targetList](b, `fetch('/api/v1/storage-targets').then((r) => r.json())`).Items {
		placed[tg.Name] = tg.TenantIDs
	}
	if fmt.Sprint(placed["Versity"]) != fmt.Sprint([]string{acme}) || fmt.Sprint(placed["Second disk"]) != fmt.Sprint([]string{bakery}) {
		t.Fatalf("placements as the API gives them: %v", placed)
	}

	// New S3 credentials are checked before they replace the old ones.
	b.run("edit Versity", chromedp.Click(chromedp.CSS(`button[aria-label="Edit Versity"]`)))
	b.waitText("New credentials")
	b.fill("Secret access key", "not-the-secret")
	b.click("Save changes")
	value(b, "the refused credentials", chromedp.Poll[bool](`!!document.querySelector('dialog [data-testid=check-failed]')`,
		chromedp.WithPollingTimeout(60*time.Second)))
	refused := eval[string](b, `document.querySelector('dialog [data-testid=check-failed]').innerText`)
	t.Logf("wrong secret: %q", refused)
	if !strings.Contains(refused, "The old ones stay in use.") || strings.Contains(refused, "not-the-secret") {
		t.Fatalf("the refused credentials say %q", refused)
	}
	b.shotViewport("22-storage-credentials-refused")
	b.click("Cancel")
	b.waitTrue("the dialog closed", `!document.querySelector('dialog')`)
	b.click("Refresh")
	b.waitRow("Versity")
	if r := findRow(t, targetRows(b), "Versity"); r.State != "OK" {
		t.Fatalf("after refused credentials the S3 target is %+v", r)
	}

	t.Run("appliance key", func(t *testing.T) { applianceKeySteps(t, a, b) })
	t.Run("retention", func(t *testing.T) { retentionSteps(t, a, b) })
	t.Run("dashboard", func(t *testing.T) {
		b.click("Dashboard")
		b.waitTrue("the storage card from GET /storage", `document.querySelector('[data-testid=storage-card]')?.innerText.includes('stored')`)
		card := eval[string](b, `document.querySelector('[data-testid=storage-card]').innerText`)
		type overview struct {
			State   string   `json:"state"`
			Targets []target `json:"targets"`
		}
		o := eval[overview](b, `fetch('/api/v1/storage').then((r) => r.json())`)
		if o.State != "ok" || len(o.Targets) != 3 || !strings.Contains(card, "OK") || !strings.Contains(card, "3 targets") {
			t.Fatalf("the dashboard's storage card says %q; GET /storage: %+v", card, o)
		}
		b.shot("26-dashboard-storage")
		b.click("Open storage")
		b.waitText("Appliance key")
	})
	t.Run("tenant administrator", func(t *testing.T) { storageTenantAdminSteps(t, a, acme) })
	t.Run("phone", func(t *testing.T) {
		p := newBrowser(t, a.URL, 390, 844)
		p.run("phone screen", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulatePortrait))
		p.setSession(a.signIn(t, adminEmail, adminPassword))
		p.open("/ui/storage")
		p.waitText("Versity")
		p.waitText("Run retention now")
		noOverflow(t, p, "/ui/storage")
		p.shot("28-phone-storage")
	})
	if n := b.dialogs.Load(); n != 0 {
		t.Fatalf("%d JavaScript dialogs opened", n)
	}
}

// applianceKeySteps downloads the appliance key through the page into a
// download directory, compares it with data_dir/blobstore.key, and sees a
// second download refused with who and when.
func applianceKeySteps(t *testing.T, a *appliance, b *browser) {
	downloads := t.TempDir()
	b.allowDownloads(downloads)
	b.waitText("This key decrypts every backup this appliance stores.")
	b.click("Download appliance key")
	b.waitTrue("the download confirmed", `!!document.querySelector('[data-testid=key-downloaded]')`)
	file := filepath.Join(downloads, "backstop-appliance.key")
	var got []byte
	waitFor(t, "the downloaded key file", 10*time.Second, func() bool {
		var err error
		got, err = os.ReadFile(file)
		return err == nil && len(got) > 0
	})
	want, err := os.ReadFile(filepath.Join(a.DataDir, "blobstore.key"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) || len(want) != 32 {
		t.Fatalf("downloaded %d bytes, want the %d bytes of data_dir/blobstore.key", len(got), len(want))
	}
	if s := eval[string](b, `document.querySelector('[data-testid=key-downloaded]').innerText`); !strings.Contains(s, adminEmail) {
		t.Fatalf("the download's confirmation says %q", s)
	}
	b.shot("23-appliance-key-downloaded")

	b.open("/ui/storage")
	b.click("Download appliance key")
	b.waitTrue("the refusal", `!!document.querySelector('[data-testid=key-gone]')`)
	gone := eval[string](b, `document.querySelector('[data-testid=key-gone]').innerText`)
	if !strings.Contains(gone, "already downloaded") || !strings.Contains(gone, adminEmail) {
		t.Fatalf("the second download says %q", gone)
	}
	if entries, _ := os.ReadDir(downloads); len(entries) != 1 {
		t.Fatalf("%d files in the download directory after the refused download", len(entries))
	}
	b.shot("23-appliance-key-gone")
}

// retentionSteps edits Acme Dental's retention policy on the Storage page
// and a machine's own policy on its page, and runs retention now.
func retentionSteps(t *testing.T, a *appliance, b *browser) {
	b.selectOption("#ret-tenant", "Acme Dental")
	b.waitText("Keep every backup for 30 days, then one a day up to 90 days, then one a week up to 1 year, then one a month up to 7 years.")
	b.waitText("Default policy")

	// A tier of 0: the warning while typing, then saved.
	b.fill("Then one a month up to", "0")
	b.waitTrue("the warning for a tier of 0", `document.querySelector('[data-testid=zero-tier-warning]')?.innerText.includes('“One a month” is 0')`)
	b.shot("24-retention-zero-warning")
	b.click("Save policy")
	b.waitText("Retention policy saved.")
	type policy struct {
		KeepAllDays     int `json:"keepAllDays"`
		KeepDailyDays   int `json:"keepDailyDays"`
		KeepWeeklyDays  int `json:"keepWeeklyDays"`
		KeepMonthlyDays int `json:"keepMonthlyDays"`
	}
	type tenantPolicy struct {
		TenantID  string `json:"tenantId"`
		Policy    policy `json:"policy"`
		IsDefault bool   `json:"isDefault"`
	}
	acme := eval[string](b, `document.querySelector('#ret-tenant').value`)
	read := func() tenantPolicy {
		return eval[tenantPolicy](b, fmt.Sprintf(`fetch('/api/v1/retention?tenantId=%s').then((r) => r.json())`, acme))
	}
	if p := read(); p.IsDefault || p.Policy != (policy{30, 90, 365, 0}) {
		t.Fatalf("after saving a monthly tier of 0 the API has %+v", p)
	}

	// Not a number: said at the field, nothing sent.
	b.fill("Keep every backup for", "ten")
	b.click("Save policy")
	b.waitTrue("the field's own error", `document.querySelector('#ret-keepAllDays-err')?.textContent.includes('whole number')`)
	b.fill("Keep every backup for", "30")

	// A weekly tier shorter than the daily one: the appliance's message at the field.
	b.fill("Then one a week up to", "30")
	b.click("Save policy")
	b.waitTrue("the appliance's error at the weekly field", `(() => { const e = document.querySelector('#ret-keepWeeklyDays-err');
		return !!e && e.textContent.includes('keepDailyDays') && document.querySelector('#ret-keepWeeklyDays').getAttribute('aria-invalid') === 'true'; })()`)
	b.shot("24-retention-invalid")
	if p := read(); p.Policy != (policy{30, 90, 365, 0}) {
		t.Fatalf("a refused policy changed the stored one: %+v", p)
	}

	b.click("Reset to default")
	b.waitText("The default policy is back in place.")
	b.waitTrue("the form shows the default", `document.querySelector('#ret-keepWeeklyDays').value === '365' && document.querySelector('#ret-keepMonthlyDays').value === '2557'`)
	if p := read(); p.Policy != (policy{30, 90, 365, 2557}) {
		t.Fatalf("after reset the API has %+v", p)
	}

	b.click("Run retention now")
	b.waitTrue("the job queued", `!!document.querySelector('[data-testid=retention-job]')`)
	b.shot("25-retention-run")
	b.click("Follow the job")
	b.waitText("Retention · Acme Dental")
	value(b, "the retention job finished", chromedp.Poll[bool](`['Succeeded', 'Partly succeeded', 'Failed'].some((s) => document.querySelector('main .badge')?.textContent === s)`,
		chromedp.WithPollingTimeout(30*time.Second)))
	if state := eval[string](b, `document.querySelector('main .badge').textContent`); state != "Succeeded" {
		t.Errorf("the retention job of a tenant without backups ended %q", state)
	}
	b.shot("25-retention-job")

	// A machine of Acme Dental: its own policy, then the tenant's again.
	type token struct {
		InstallCommand string `json:"installCommand"`
	}
	tok := sessionFetch[token](b, "POST", "/enrollment-tokens", map[string]string{"tenantId": acme, "profile": "server"})
	i := strings.Index(tok.InstallCommand, "--token ")
	if i < 0 {
		t.Fatalf("install command without a token: %q", tok.InstallCommand)
	}
	var enrolled wire.EnrollResponse
	agentCall(t, a, "", "", "/agent/v1/enroll", wire.EnrollRequest{Token: strings.Fields(tok.InstallCommand[i+len("--token "):])[0],
		Hostname: "nas-01", OS: "linux", Arch: "amd64", AgentVersion: "1.0.0"}, &enrolled)
	b.open("/ui/endpoints/" + enrolled.EndpointID)
	b.waitText("Tenant’s policy")
	b.waitText("Not applied yet") // no retention run has pruned its repository
	// The agent's version pin (CONTRACT §9), set and dropped from the page.
	b.click("Agent updates")
	b.fill("Pin to version", "1.2.3")
	b.click("Pin")
	b.waitText("pinned to 1.2.3")
	if v := eval[string](b, `fetch('/api/v1/endpoints/`+enrolled.EndpointID+`').then((r) => r.json()).then((e) => e.pinnedAgentVersion)`); v != "1.2.3" {
		t.Fatalf("pinnedAgentVersion after pinning from the page: %q", v)
	}
	b.click("Agent updates")
	b.click("Follow the appliance")
	b.waitTrue("the pin is gone", `!document.body.innerText.includes('pinned to 1.2.3')`)
	b.click("Give this machine its own policy")
	b.fill("Keep every backup for", "7")
	b.fill("Then one a day up to", "14")
	b.click("Save this machine’s policy")
	b.waitText("Own policy")
	b.waitText("Keep every backup for 7 days, then one a day up to 14 days")
	b.shot("27-endpoint-retention")
	type endpointPolicy struct {
		Policy    policy `json:"policy"`
		Inherited bool   `json:"inherited"`
	}
	if p := eval[endpointPolicy](b, `fetch('/api/v1/endpoints/`+enrolled.EndpointID+`/retention').then((r) => r.json())`); p.Inherited || p.Policy != (policy{7, 14, 365, 2557}) {
		t.Fatalf("the machine's policy as the API gives it: %+v", p)
	}
	b.click("Use the tenant’s policy")
	b.waitText("Tenant’s policy")
	if p := eval[endpointPolicy](b, `fetch('/api/v1/endpoints/`+enrolled.EndpointID+`/retention').then((r) => r.json())`); !p.Inherited {
		t.Fatalf("after using the tenant's policy the API says %+v", p)
	}
	b.open("/ui/storage")
	b.waitText("Appliance key")
}

// storageTenantAdminSteps signs in as Acme Dental's administrator: the
// Storage page lists the targets holding Acme's data read-only, without the
// appliance key, and their own retention policy.
func storageTenantAdminSteps(t *testing.T, a *appliance, acme string) {
	const email, password = "tech@acme.example", "tenant admin password"
	cmd := exec.Command(binary(t), "admin", "create-user", "--data-dir", a.DataDir, "--tenant", acme, "--email", email, "--password-stdin")
	cmd.Env = append(os.Environ(), "SERVICE_EDITION=provider")
	cmd.Stdin = strings.NewReader(password + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("admin create-user: %v\n%s", err, out)
	}
	b := newBrowser(t, a.URL, 1280, 900)
	b.setSession(a.signIn(t, email, password))
	b.open("/ui/storage")
	b.waitText("Versity")
	b.waitText("Run retention now")
	page := b.text()
	for _, absent := range []string{"Second disk", "Appliance key", "Add storage target", "Edit"} {
		if strings.Contains(page, absent) {
			t.Fatalf("a tenant administrator's Storage page shows %q:\n%s", absent, page)
		}
	}
	if r := findRow(t, targetRows(b), "Versity"); r.State != "OK" {
		t.Fatalf("the tenant administrator's row: %+v", r)
	}
	b.shot("27-tenant-admin-storage")
}
