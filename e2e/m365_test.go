package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"backstop/app/graph/graphtest"

	"github.com/chromedp/chromedp"
)

// TestM365 walks the Microsoft 365 pages against the real binary and the
// fake Microsoft Graph: the tenant added through the dialog (the consent
// link shown as soon as the ids are in, the Graph and login URLs of the
// fake in the advanced section), refused first for a wrong secret with
// Microsoft's AADSTS reason shown; the directory with licences and a
// protection switch; a backup of a mailbox and of a OneDrive started from
// their pages; one message and one file restored and found in the fake as
// real (non-draft) items; the billing summary's counts; and the new pages
// on a phone.
func TestM365(t *testing.T) {
	const azureTenant, clientID, secret = "8f3c1a52-5d0e-4c4b-9f61-2a7d3b9e0c11", "3b6f2d9a-7c1e-4e8a-b5d4-6a0f1e2c3d44", "right~secret.value"
	fake := graphtest.New(graphtest.Tenant{AzureTenantID: azureTenant, ClientID: clientID, ClientSecret: secret}, graphtest.Options{})
	t.Cleanup(fake.Close)
	e3 := fake.Sku("SPE_E3")
	bp := fake.Sku("O365_BUSINESS_PREMIUM")
	adele := fake.AddUser(graphtest.User{DisplayName: "Adele Vance", UserPrincipalName: "adele@acme.example", Mail: "adele@acme.example", Licenses: []string{e3}})
	fake.AddUser(graphtest.User{DisplayName: "Megan Bowen", UserPrincipalName: "megan@acme.example", Mail: "megan@acme.example", Licenses: []string{bp, e3}})
	fake.AddUser(graphtest.User{DisplayName: "Reception", UserPrincipalName: "reception@acme.example", Mail: "reception@acme.example", Purpose: "shared"})
	base := time.Date(2026, 3, 2, 9, 30, 0, 0, time.UTC)
	inbox := fake.WellKnownFolder(adele, "inbox")
	for i, subject := range []string{"Quarterly plan for the new surgery", "Invoice 2026-117", "Appointment on Tuesday"} {
		at := base.Add(time.Duration(i) * time.Hour)
		fake.AddMessage(adele, inbox, mail("Dana Smith <dana@patients.example>", subject, at, "Body of "+subject), at)
	}
	planText := []byte("Floor plan, second draft.\n")
	fake.AddFile(adele, "Documents/plan.txt", planText)
	fake.AddFile(adele, "Documents/Budget/2026.csv", []byte("item,amount\nchairs,1200\n"))

	a := startAppliance(t)
	a.createAdmin(t, adminEmail, adminPassword)
	b := newBrowser(t, a.URL, 1280, 900)
	b.setSession(a.signIn(t, adminEmail, adminPassword))
	b.open("/ui/tenants")
	b.fill("Name", "Acme Dental")
	b.click("Create tenant")
	b.waitText("Tenant “Acme Dental” created.")

	// The dialog: the consent link appears with the ids, then follows the
	// login URL of the advanced section.
	b.click("Microsoft 365")
	b.waitText("No Microsoft 365 tenants yet")
	b.click("Add Microsoft 365 tenant")
	b.selectLabelled("Tenant", "Acme Dental")
	b.fill("Display name", "Acme M365")
	b.waitText("The link appears here as soon as")
	b.fill("Azure tenant id", azureTenant)
	b.fill("Client id", clientID)
	consentHref := func() string {
		b.waitTrue("the consent link", `!!document.querySelector('dialog [data-testid=consent-link]')`)
		return eval[string](b, `document.querySelector('dialog [data-testid=consent-link]').href`)
	}
	if got, want := consentHref(), "https://login.microsoftonline.com/"+azureTenant+"/adminconsent?client_id="+clientID; got != want {
		t.Fatalf("the consent link is %q, want %q", got, want)
	}
	dialog := eval[string](b, `document.querySelector('dialog').innerText`)
	for _, p := range []string{"User.Read.All", "Organization.Read.All", "MailboxSettings.Read", "Mail.ReadWrite", "Files.ReadWrite.All", "admin consent"} {
		if !strings.Contains(dialog, p) {
			t.Fatalf("the dialog does not name %q:\n%s", p, dialog)
		}
	}
	b.click("Advanced settings")
	b.fill("Graph URL", fake.GraphURL())
	b.fill("Login URL", fake.LoginURL())
	if got, want := consentHref(), strings.TrimRight(fake.LoginURL(), "/")+"/"+azureTenant+"/adminconsent?client_id="+clientID; got != want {
		t.Fatalf("with the login URL set the consent link is %q, want %q", got, want)
	}
	b.fill("Client secret", "wrong secret")
	b.shotViewport("50-m365-add")
	b.click("Check and add tenant")
	value(b, "the check's refusal", chromedp.Poll[bool](`document.querySelector('[data-testid=check-failed]')?.dataset.code === 'source_auth_failed'`,
		chromedp.WithPollingTimeout(40*time.Second)))
	reason := eval[string](b, `document.querySelector('[data-testid=check-failed]').innerText`)
	t.Logf("wrong secret: %q", reason)
	if !strings.Contains(reason, "AADSTS") || !strings.Contains(reason, "Nothing was saved") {
		t.Fatalf("the refusal does not name Microsoft's reason: %q", reason)
	}
	b.shotViewport("51-m365-wrong-secret")
	b.fill("Client secret", secret)
	b.click("Check and add tenant")
	value(b, "the tenant added", chromedp.Poll[bool](`!!document.querySelector('[data-testid=tenant-added]')`, chromedp.WithPollingTimeout(40*time.Second)))
	if strings.Contains(b.text(), secret) {
		t.Fatal("the client secret is on the page")
	}
	b.waitTrue("the tenant's row", `!!document.querySelector('table.m365-tenants tr[data-source]')`)
	b.shot("52-m365-list")

	// The tenant's page: a directory sync followed to its end.
	b.click("open it")
	b.waitText("Sync directory now")
	b.click("Sync directory now")
	b.waitTrue("the job link", `!!document.querySelector('[data-testid=job-started] a')`)
	b.click("Follow its progress")
	if state := finishedJob(b, 60*time.Second); state != "Succeeded" {
		t.Fatalf("the directory sync ended %q:\n%s", state, b.text())
	}

	// The directory: licences as badges, protection switched off and on.
	b.click("Directory")
	row := func(email string) string {
		sel := `document.querySelector('table.directory tr[data-email="` + email + `"]')`
		b.waitTrue("the directory row of "+email, `!!`+sel)
		return eval[string](b, sel+`.innerText`)
	}
	if r := row("adele@acme.example"); !strings.Contains(r, "Adele Vance") || !strings.Contains(r, "SPE_E3") {
		t.Fatalf("Adele's row: %q", r)
	}
	if r := row("megan@acme.example"); !strings.Contains(r, "O365_BUSINESS_PREMIUM") || !strings.Contains(r, "SPE_E3") {
		t.Fatalf("Megan's row: %q", r)
	}
	if r := row("reception@acme.example"); !strings.Contains(r, "Shared mailbox") {
		t.Fatalf("the shared mailbox's row: %q", r)
	}
	b.shot("53-m365-directory")
	protectedOf := func(email string) bool {
		return eval[bool](b, `fetch('/api/v1/directory?q=`+email+`').then((r) => r.json()).then((d) => d.items.find((e) => e.email === '`+email+`').protected)`)
	}
	before := protectedOf("megan@acme.example")
	b.clickLabelled("Protect Megan Bowen")
	waitFor(t, "Megan's protection switched", 10*time.Second, func() bool { return protectedOf("megan@acme.example") != before })
	b.clickLabelled("Protect Megan Bowen")
	waitFor(t, "Megan's protection switched back", 10*time.Second, func() bool { return protectedOf("megan@acme.example") == before })
	// A refused change: the switch moves at once, then back, with the reason.
	eval[bool](b, `(() => { const real = window.fetch; window.restoreFetch = () => { window.fetch = real; };
		window.fetch = (u, o) => (o && o.method === 'PUT' && String(u).includes('/protection'))
			? Promise.resolve(new Response(JSON.stringify({ status: 503, title: 'Service Unavailable', detail: 'refused for the test', code: 'internal' }),
				{ status: 503, headers: { 'Content-Type': 'application/problem+json' } }))
			: real(u, o);
		return true; })()`)
	b.clickLabelled("Protect Megan Bowen")
	b.waitTrue("the refusal", `!!document.querySelector('[data-testid=toggle-failed]')`)
	if got := eval[bool](b, `document.querySelector('input[aria-label="Protect Megan Bowen"]').checked`); got != before || protectedOf("megan@acme.example") != before {
		t.Fatalf("after a refused change the switch shows %v, want %v", got, before)
	}
	if msg := eval[string](b, `document.querySelector('[data-testid=toggle-failed]').textContent`); !strings.Contains(msg, "refused for the test") {
		t.Fatalf("the refusal says %q", msg)
	}
	eval[bool](b, `(window.restoreFetch(), true)`)
	if !protectedOf("adele@acme.example") {
		b.clickLabelled("Protect Adele Vance")
		waitFor(t, "Adele protected", 10*time.Second, func() bool { return protectedOf("adele@acme.example") })
	}
	b.fill("Search name or email", "adele")
	b.click("Search")
	b.waitTrue("the search", `document.querySelectorAll('table.directory tr[data-entry]').length === 1`)

	// Adele's mailbox: back up, browse, restore one message.
	objectID := func(kind string) string {
		return eval[string](b, `fetch('/api/v1/protected-objects?kind=`+kind+`').then((r) => r.json()).then((d) => (d.items.find((o) => o.address === 'adele@acme.example') || {}).id || '')`)
	}
	b.waitTrue("Adele's mailbox link", `[...document.querySelectorAll('table.directory a.obj-link')].some((a) => a.textContent === 'Mailbox')`)
	mailboxID, driveID := objectID("mailbox"), objectID("drive")
	if mailboxID == "" || driveID == "" {
		t.Fatalf("Adele's protected objects: mailbox %q, drive %q", mailboxID, driveID)
	}
	b.click("Mailbox")
	backup := func(id, what string) {
		t.Helper()
		b.waitText("No snapshots yet")
		b.click("Back up now")
		b.waitTrue("the job link", `!!document.querySelector('[data-testid=job-started] a')`)
		eval[bool](b, watchJobPage)
		b.click("Follow its progress")
		if state := finishedJob(b, 90*time.Second); state != "Succeeded" {
			t.Fatalf("the %s backup ended %q:\n%s", what, state, b.text())
		}
		b.shot("54-m365-" + what + "-backup-job")
		b.open("/ui/objects/" + id)
		b.waitTrue("the snapshot browser", `!!document.querySelector('[data-testid=snapshot-browser] tr[data-folder]')`)
	}
	restore := func(what string) {
		t.Helper()
		b.click("Restore…")
		b.waitText("The selected items (1)")
		b.shotViewport("55-m365-" + what + "-restore-dialog")
		b.click("Start restore")
		b.waitText("Restore · ")
		if state := finishedJob(b, 90*time.Second); state != "Succeeded" {
			t.Fatalf("the %s restore ended %q:\n%s", what, state, b.text())
		}
	}
	backup(mailboxID, "mailbox")
	b.click("Inbox")
	b.waitTrue("the inbox", `document.querySelectorAll('[data-testid=snapshot-browser] tr[data-item]').length === 3`)
	if !strings.Contains(b.text(), "Quarterly plan for the new surgery") {
		t.Fatalf("the inbox of the snapshot:\n%s", b.text())
	}
	b.shot("56-m365-mailbox-snapshot")
	b.clickLabelled("Select Quarterly plan for the new surgery")
	snapAt := eval[string](b, `fetch('/api/v1/protected-objects/`+mailboxID+`/snapshots').then((r) => r.json()).then((d) => d.items[0].at)`)
	at, err := time.Parse(time.RFC3339Nano, snapAt)
	if err != nil {
		t.Fatal(err)
	}
	b.click("Restore…")
	b.waitText("Restored " + at.UTC().Format("2006-01-02 15:04") + " UTC")
	b.click("Cancel")
	restore("mailbox")
	var restored []graphtest.StoredMessage
	for _, m := range fake.Messages(adele) {
		if strings.Contains(m.FolderPath, "Restored ") {
			restored = append(restored, m)
		}
	}
	if len(restored) != 1 || restored[0].Subject != "Quarterly plan for the new surgery" || restored[0].IsDraft {
		t.Fatalf("restored messages in the fake: %+v", restored)
	}
	t.Logf("restored message in %q, draft %v", restored[0].FolderPath, restored[0].IsDraft)

	// Adele's OneDrive: back up, browse, restore one file.
	b.open("/ui/objects/" + driveID)
	backup(driveID, "drive")
	b.click("Documents")
	b.waitTrue("the Documents folder", `!!document.querySelector('[data-testid=snapshot-browser] tr[data-item]')`)
	files := b.text()
	if !strings.Contains(files, "plan.txt") || !strings.Contains(files, "Budget") || !strings.Contains(files, fmt.Sprintf("%d B", len(planText))) {
		t.Fatalf("the Documents folder of the snapshot:\n%s", files)
	}
	b.shot("57-m365-drive-snapshot")
	downloads := t.TempDir()
	b.allowDownloads(downloads)
	b.clickLabelled("Download plan.txt")
	waitFor(t, "the downloaded file", 10*time.Second, func() bool {
		got, _ := os.ReadFile(filepath.Join(downloads, "plan.txt"))
		return bytes.Equal(got, planText)
	})
	b.clickLabelled("Select plan.txt")
	restore("drive")
	var restoredFiles []graphtest.StoredFile
	for _, f := range fake.Files(adele) {
		if strings.HasPrefix(f.Path, "Restored ") {
			restoredFiles = append(restoredFiles, f)
		}
	}
	if len(restoredFiles) != 1 || !strings.HasSuffix(restoredFiles[0].Path, "plan.txt") || !bytes.Equal(restoredFiles[0].Content, planText) {
		t.Fatalf("restored files in the fake: %+v", restoredFiles)
	}
	t.Logf("restored file at %q", restoredFiles[0].Path)

	// Verify now on the mailbox, followed to its end.
	b.open("/ui/objects/" + mailboxID)
	b.waitText("Verify now")
	b.click("Verify now")
	b.click("Follow its progress")
	b.waitText("Verify · ")
	if state := finishedJob(b, 60*time.Second); state != "Succeeded" {
		t.Fatalf("the verify ended %q:\n%s", state, b.text())
	}

	// Editing the tenant: a wrong new secret is refused with Microsoft's
	// reason; the right one and autoProtect off are saved.
	srcID := eval[string](b, `fetch('/api/v1/sources').then((r) => r.json()).then((d) => d.items.find((s) => s.kind === 'm365').id)`)
	b.open("/ui/m365/" + srcID)
	b.waitText("Protected automatically")
	// Three mailboxes and three OneDrives (the shared mailbox has both).
	b.waitTrue("the tenant's mailboxes and OneDrives", `document.querySelectorAll('table.objects tr[data-object]').length === 6`)
	b.shot("58-m365-tenant")
	b.click("Edit")
	b.waitText("New client secret")
	eval[bool](b, `(document.querySelector('dialog input[type=checkbox]').click(), true)`)
	b.fill("New client secret", "another wrong secret")
	b.click("Save changes")
	value(b, "the new secret refused", chromedp.Poll[bool](`document.querySelector('dialog [data-testid=check-failed]')?.dataset.code === 'source_auth_failed'`,
		chromedp.WithPollingTimeout(40*time.Second)))
	if r := eval[string](b, `document.querySelector('dialog [data-testid=check-failed]').innerText`); !strings.Contains(r, "AADSTS") || !strings.Contains(r, "old one stays in use") {
		t.Fatalf("the refused secret: %q", r)
	}
	b.fill("New client secret", secret)
	b.click("Save changes")
	b.waitText("Chosen in the Directory")
	if auto := eval[bool](b, `fetch('/api/v1/sources').then((r) => r.json()).then((d) => d.items.find((s) => s.kind === 'm365').autoProtect)`); auto {
		t.Fatal("autoProtect is still on after the edit")
	}

	// The billing summary: the tenant's counts now.
	b.open("/ui/directory/billing")
	b.waitTrue("the counts", `!!document.querySelector('[data-testid=billing-now] tr[data-tenant]')`)
	count := func(k string) string {
		return eval[string](b, `document.querySelector('[data-testid=billing-now] tr[data-tenant] td[data-count=`+k+`]').textContent`)
	}
	if count("users") != "2" || count("sharedMailboxes") != "1" || count("licensed") != "2" {
		t.Fatalf("billing counts: users %s, shared %s, licensed %s\n%s", count("users"), count("sharedMailboxes"), count("licensed"), b.text())
	}
	b.shot("58-m365-billing-now")

	t.Run("phone", func(t *testing.T) {
		p := newBrowser(t, a.URL, 390, 844)
		p.run("phone screen", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulatePortrait))
		p.setSession(a.signIn(t, adminEmail, adminPassword))
		for _, pg := range []struct{ path, wait string }{
			{"/ui/m365", "Acme M365"},
			{"/ui/directory", "Adele Vance"},
			{"/ui/directory/billing", "Daily counts"},
			{"/ui/objects/" + mailboxID, "Inbox"},
			{"/ui/objects/" + driveID, "Documents"},
		} {
			p.open(pg.path)
			p.waitText(pg.wait)
			noOverflow(t, p, pg.path)
			p.shot("59-phone" + sanitize(pg.path))
		}
	})
	if n := b.dialogs.Load(); n != 0 {
		t.Fatalf("%d JavaScript dialogs opened", n)
	}

	// A restart records today's counts when the day has none yet (as an
	// appliance that was off at midnight does): the daily row, the chart
	// and the CSV of the billing summary.
	a.stop()
	a2 := startAppliance(t, "SERVICE_DATA_DIR="+a.DataDir)
	b2 := newBrowser(t, a2.URL, 1280, 900)
	b2.setSession(a2.signIn(t, adminEmail, adminPassword))
	b2.open("/ui/directory/billing")
	today := time.Now().UTC().Format(time.DateOnly)
	daySel := `document.querySelector('[data-testid=billing-daily] tr[data-date="` + today + `"]')`
	// (The tenant's name arrives with the tenant list, after the row.)
	b2.waitTrue("today's daily row", daySel+`?.innerText.includes('Acme Dental')`)
	if r := normalizeSpace(eval[string](b2, daySel+`.innerText`)); !strings.Contains(r, "Acme Dental") || !strings.Contains(strings.Join(strings.Fields(r), " "), "2 1 0 0 2") {
		t.Fatalf("today's daily row: %q", r)
	}
	b2.waitTrue("the chart's points", `document.querySelectorAll('[data-testid=billing-chart] circle').length === 3`)
	b2.shot("60-m365-billing-daily")
	downloads = t.TempDir()
	b2.allowDownloads(downloads)
	b2.click("Download CSV")
	var csvText string
	waitFor(t, "the CSV", 10*time.Second, func() bool {
		entries, _ := os.ReadDir(downloads)
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".csv") {
				data, _ := os.ReadFile(filepath.Join(downloads, e.Name()))
				csvText = string(data)
				return len(data) > 0
			}
		}
		return false
	})
	if !strings.HasPrefix(csvText, "date,tenantId,tenant,users,sharedMailboxes,rooms,imapAccounts,licensed,protected,protectedMailboxes,protectedDrives\r\n") ||
		!strings.Contains(csvText, today+",") || !strings.Contains(csvText, ",Acme Dental,2,1,0,0,2,") {
		t.Fatalf("the CSV:\n%s", csvText)
	}

	// Deleting the tenant keeps the snapshots.
	b2.open("/ui/m365/" + srcID)
	b2.click("Delete")
	b2.waitText("The snapshots are kept.")
	b2.click("Delete tenant")
	b2.waitText("No Microsoft 365 tenants yet")
	b2.open("/ui/objects/" + mailboxID)
	b2.waitText("Its Microsoft 365 tenant was deleted")
	b2.waitTrue("the snapshot still listed", `document.querySelectorAll('table.snapshots tr[data-snapshot]').length >= 1`)
	b2.shot("61-m365-deleted-tenant-mailbox")
}
