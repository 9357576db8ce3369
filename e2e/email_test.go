package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"backstop/app/imapbackup/dovecottest"

	"github.com/chromedp/chromedp"
)

// selectLabelled chooses the option whose text starts with optionText in
// the select labelled label (the label's text starts with it).
func (b *browser) selectLabelled(label, optionText string) {
	b.t.Helper()
	value(b, "select "+optionText+" in "+label, chromedp.Poll[bool](fmt.Sprintf(`(() => {
		const l = [...document.querySelectorAll('label')].reverse().find((l) => l.textContent.trim().startsWith(%s) && l.htmlFor);
		const s = l && document.getElementById(l.htmlFor); if (!s) return false;
		const o = [...s.options].find((o) => o.textContent.trim().startsWith(%s)); if (!o) return false;
		s.value = o.value; s.dispatchEvent(new Event('change', { bubbles: true })); return true; })()`, js(label), js(optionText)),
		chromedp.WithPollingTimeout(10*time.Second)))
}

// clickLabelled clicks the visible, enabled button whose aria-label is label.
func (b *browser) clickLabelled(label string) {
	b.t.Helper()
	value(b, "click "+label, chromedp.Poll[bool](fmt.Sprintf(`(() => {
		const el = [...document.querySelectorAll('button[aria-label], input[aria-label]')].find((e) => e.getAttribute('aria-label') === %s && e.offsetParent !== null && !e.disabled);
		if (!el) return false; el.click(); return true; })()`, js(label)), chromedp.WithPollingTimeout(10*time.Second)))
}

// mail is one message delivered to Dovecot, with CRLF line ends as IMAP
// serves them, so the stored bytes are the bytes on Dovecot's disk.
func mail(from, subject string, date time.Time, body string) []byte {
	return []byte(strings.ReplaceAll(fmt.Sprintf("From: %s\nTo: Front Desk <frontdesk@acme.example>\nSubject: %s\nDate: %s\nMessage-ID: <%d.%s@acme.example>\nMIME-Version: 1.0\nContent-Type: text/plain; charset=utf-8\n\n%s\n",
		from, subject, date.Format(time.RFC1123Z), date.UnixNano(), strings.ReplaceAll(strings.ToLower(subject), " ", "-"), body), "\n", "\r\n"))
}

// finishedJob waits on an open job page until the job ends and answers
// its state as the page shows it.
func finishedJob(b *browser, timeout time.Duration) string {
	b.t.Helper()
	value(b, "the job finished", chromedp.Poll[bool](`['Succeeded', 'Partly succeeded', 'Failed', 'Interrupted', 'Cancelled'].some((s) => document.querySelector('main .panel .badge')?.textContent === s)`,
		chromedp.WithPollingTimeout(timeout)))
	return eval[string](b, `document.querySelector('main .panel .badge').textContent`)
}

// watchJobPage records, from before the job page renders, every
// percentage and "Live" the page shows, to see progress arrive over the
// stream rather than only in the final answer.
const watchJobPage = `(() => { window.seen = { percents: [], live: false }; new MutationObserver(() => {
	const p = document.querySelector('[data-testid=job-percent]');
	if (p && window.seen.percents[window.seen.percents.length - 1] !== p.textContent) window.seen.percents.push(p.textContent);
	if (document.querySelector('main .page-head [aria-live]')?.textContent === 'Live') window.seen.live = true;
}).observe(document.body, { subtree: true, childList: true, characterData: true }); return true; })()`

type jobSeen struct {
	Percents []string `json:"percents"`
	Live     bool     `json:"live"`
}

// TestEmailAccounts walks the Email accounts pages against the real binary
// and a real Dovecot: an IMAP account refused for its certificate and for a
// wrong password, with the reason shown, then added with the right password
// and the server's self-signed certificate trusted by fingerprint; a backup
// started from the account's page and followed live to success; the
// snapshot browsed by folder, searched by subject and by sender; one
// message downloaded as .eml with Dovecot's exact bytes; two chosen
// messages restored (and restored again, adding nothing); a verify run;
// editing and deleting the account (the snapshots stay); and the pages on a
// phone.
func TestEmailAccounts(t *testing.T) {
	dv := dovecottest.Start(t)
	const user, password = "frontdesk@acme.example", "right horse staple"
	dv.AddUser(user, password)
	base := time.Date(2026, 3, 2, 9, 30, 0, 0, time.UTC)
	inbox := [][]byte{
		mail("Dana Smith <dana@patients.example>", "Appointment on Tuesday", base, "Can we move it to 10:00?"),
		mail("Lab Results <noreply@lab.example>", "Results for order 4411", base.Add(time.Hour), "Attached."),
		mail("Supplier <orders@dentalsupply.example>", "Invoice 2026-117", base.Add(2*time.Hour), "Amount due: 412.00 EUR"),
	}
	projects := [][]byte{
		mail("Architect <studio@build.example>", "Quarterly plan for the new surgery", base.Add(3*time.Hour), "Plans attached."),
		mail("Architect <studio@build.example>", "Floor plan v2", base.Add(4*time.Hour), "Second draft."),
	}
	for i, m := range inbox {
		flags := "S"
		if i == 0 {
			flags = "" // unread
		}
		dv.Deliver(user, "INBOX", m, flags, base.Add(time.Duration(i)*time.Hour))
	}
	for i, m := range projects {
		dv.Deliver(user, "Projects", m, "SF", base.Add(time.Duration(3+i)*time.Hour))
	}
	// Enough messages in a third folder that the backup is seen running.
	for i := 0; i < 300; i++ {
		dv.Deliver(user, "Archive", mail("Old Newsletter <news@example.org>", fmt.Sprintf("Newsletter %03d", i), base.Add(-time.Duration(i)*time.Hour),
			strings.Repeat("Lorem ipsum dolor sit amet. ", 40)), "S", base.Add(-time.Duration(i)*time.Hour))
	}

	a := startAppliance(t)
	a.createAdmin(t, adminEmail, adminPassword)
	b := newBrowser(t, a.URL, 1280, 900)
	b.setSession(a.signIn(t, adminEmail, adminPassword))
	b.open("/ui/tenants")
	b.fill("Name", "Acme Dental")
	b.click("Create tenant")
	b.waitText("Tenant “Acme Dental” created.")

	b.click("Email accounts")
	b.waitText("No email accounts yet")
	b.shot("30-email-empty")
	b.click("Add IMAP account")
	b.selectLabelled("Tenant", "Acme Dental")
	b.fill("Display name", "Front desk")
	b.fill("IMAP server", dv.Host)
	b.selectLabelled("Security", "TLS")
	b.fill("Port", strconv.Itoa(dv.TLSPort))
	b.fill("User name", user)
	b.fill("Password", "wrong password")
	b.waitText("Trust this certificate fingerprint")
	b.waitText("self-signed certificate")

	// The self-signed certificate, not trusted: the TLS reason.
	eval[bool](b, `(() => { window.sawChecking = false; new MutationObserver(() => {
		if (document.body.innerText.includes('Checking the login…')) window.sawChecking = true; })
		.observe(document.body, { subtree: true, childList: true, characterData: true }); return true; })()`)
	b.click("Check login and add account")
	checkFailed := func(code string) string {
		t.Helper()
		value(b, "the check's refusal "+code, chromedp.Poll[bool](fmt.Sprintf(`document.querySelector('[data-testid=check-failed]')?.dataset.code === %s`, js(code)),
			chromedp.WithPollingTimeout(40*time.Second)))
		return eval[string](b, `document.querySelector('[data-testid=check-failed]').innerText`)
	}
	reason := checkFailed("source_tls_failed")
	t.Logf("untrusted certificate: %q", reason)
	if !strings.Contains(reason, "Nothing was saved") || !strings.Contains(strings.ToLower(reason), "certificate") {
		t.Fatalf("the TLS refusal says %q", reason)
	}
	if !eval[bool](b, `window.sawChecking`) {
		t.Error(`"Checking the login…" was never shown while the check ran`)
	}

	// The fingerprint trusted, the password wrong: the server's refusal.
	b.fill("Trust this certificate fingerprint", dv.Fingerprint)
	b.click("Check login and add account")
	reason = checkFailed("source_auth_failed")
	t.Logf("wrong password: %q", reason)
	detail := eval[string](b, `document.querySelector('[data-testid=check-detail]').textContent`)
	type problem struct {
		Code   string `json:"code"`
		Detail string `json:"detail"`
	}
	tenant := eval[string](b, `fetch('/api/v1/tenants').then((r) => r.json()).then((d) => d.items.find((t) => t.name === 'Acme Dental').id)`)
	direct := sessionFetch[problem](b, "POST", "/sources", map[string]any{"kind": "imap", "tenantId": tenant, "host": dv.Host, "port": dv.TLSPort,
		"security": "tls", "username": user, "password": "wrong password", "trustFingerprint": dv.Fingerprint})
	if direct.Code != "source_auth_failed" || detail != direct.Detail || detail == "" || strings.Contains(reason, "wrong password") {
		t.Fatalf("the page shows %q (detail %q); the API answers %+v", reason, detail, direct)
	}
	b.shotViewport("31-email-add-wrong-password")

	// The right password: added and listed.
	b.fill("Password", password)
	b.click("Check login and add account")
	value(b, "the account added", chromedp.Poll[bool](`!!document.querySelector('[data-testid=account-added]')`, chromedp.WithPollingTimeout(40*time.Second)))
	b.waitTrue("the account's row", `!!document.querySelector('table.accounts tr[data-object]')`)
	row := eval[string](b, `document.querySelector('table.accounts tr[data-object]').innerText`)
	if !strings.Contains(row, "Front desk") || !strings.Contains(row, user) || !strings.Contains(row, "No backup yet") || !strings.Contains(row, "none yet") {
		t.Fatalf("the new account's row: %q", row)
	}
	if strings.Contains(b.text(), password) {
		t.Fatal("the password is on the page")
	}
	objID := eval[string](b, `document.querySelector('table.accounts tr[data-object]').dataset.object`)
	b.shot("32-email-list")

	// Back up now, followed live on the job page.
	b.click("Front desk")
	b.waitText("Snapshots")
	b.waitText("No snapshots yet")
	b.click("Back up now")
	b.waitTrue("the job link", `!!document.querySelector('[data-testid=job-started] a')`)
	eval[bool](b, watchJobPage)
	b.click("Follow its progress")
	b.waitText("IMAP backup · Front desk")
	if state := finishedJob(b, 60*time.Second); state != "Succeeded" {
		t.Fatalf("the backup ended %q:\n%s", state, b.text())
	}
	seen := eval[jobSeen](b, `window.seen`)
	t.Logf("the backup's job page showed %v (live: %v)", seen.Percents, seen.Live)
	for i := 1; i < len(seen.Percents); i++ {
		var a, b int
		fmt.Sscanf(seen.Percents[i-1], "%d%%", &a)
		fmt.Sscanf(seen.Percents[i], "%d%%", &b)
		if b < a {
			t.Fatalf("the progress went back from %s to %s: %v", seen.Percents[i-1], seen.Percents[i], seen.Percents)
		}
	}
	if len(seen.Percents) == 0 || seen.Percents[len(seen.Percents)-1] != "100%" || !seen.Live {
		t.Fatalf("the job page did not follow the backup live: %+v", seen)
	}
	b.shot("33-email-backup-job")

	// The snapshot: folders, a folder's messages, search, download.
	b.click("Front desk") // the job's target links to the account
	b.waitTrue("the snapshot browser", `!!document.querySelector('[data-testid=snapshot-browser] tr[data-folder]')`)
	folders := eval[[]string](b, `[...document.querySelectorAll('[data-testid=snapshot-browser] tr[data-folder]')].map((r) => r.dataset.folder)`)
	if strings.Join(folders, ",") != "Archive,INBOX,Projects" && !(len(folders) == 3 && strings.Contains(strings.Join(folders, ","), "Projects")) {
		t.Fatalf("top-level folders: %v", folders)
	}
	b.waitText("305 messages")
	b.shot("34-email-account")
	b.click("Projects")
	b.waitTrue("the Projects messages", `document.querySelectorAll('[data-testid=snapshot-browser] tr[data-item]').length === 2`)
	list := b.text()
	for _, want := range []string{"Quarterly plan for the new surgery", "Floor plan v2", "Architect <studio@build.example>", "Flagged"} {
		if !strings.Contains(list, want) {
			t.Fatalf("the Projects folder does not show %q:\n%s", want, list)
		}
	}
	b.shot("35-email-folder")

	b.fill("Search subject or sender", "quarterly")
	b.click("Search")
	b.waitTrue("one search result", `document.querySelectorAll('[data-testid=snapshot-browser] tr[data-item]').length === 1 && document.body.innerText.includes('in every folder')`)
	if !strings.Contains(b.text(), "Quarterly plan for the new surgery") {
		t.Fatal("the search by subject did not find the message")
	}
	b.fill("Search subject or sender", "lab.example")
	b.click("Search")
	b.waitTrue("the search by sender", `document.querySelectorAll('[data-testid=snapshot-browser] tr[data-item]').length === 1 && document.body.innerText.includes('Results for order 4411')`)
	b.shot("36-email-search")

	downloads := t.TempDir()
	b.allowDownloads(downloads)
	b.clickLabelled("Download Results for order 4411 as .eml")
	var got []byte
	waitFor(t, "the downloaded message", 10*time.Second, func() bool {
		entries, _ := os.ReadDir(downloads)
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".eml") {
				got, _ = os.ReadFile(filepath.Join(downloads, e.Name()))
				return len(got) > 0
			}
		}
		return false
	})
	onDisk, _ := filepath.Glob(filepath.Join(dv.Maildir(user, "INBOX"), "cur", "*"))
	var dovecot []byte
	for _, f := range onDisk {
		if data, _ := os.ReadFile(f); bytes.Contains(data, []byte("Subject: Results for order 4411")) {
			dovecot = data
		}
	}
	if dovecot == nil || !bytes.Equal(got, dovecot) || !bytes.Equal(got, inbox[1]) {
		t.Fatalf("downloaded %d bytes; Dovecot holds %d bytes of that message (equal: %v)", len(got), len(dovecot), bytes.Equal(got, dovecot))
	}

	// Two chosen messages of Projects: the restore dialog, then the job.
	b.click("Clear search") // back to the folder the search started from
	b.waitTrue("the Projects messages", `document.querySelectorAll('[data-testid=snapshot-browser] tr[data-item]').length === 2`)
	b.clickLabelled("Select Quarterly plan for the new surgery")
	b.clickLabelled("Select Floor plan v2")
	b.waitText("2 selected")
	restoreDialog := func() {
		b.click("Restore…")
		b.waitText("The selected items (2)")
		b.waitTrue("the selected items chosen", `document.querySelector('dialog input[value=picked]').checked`)
	}
	restoreDialog()
	b.waitTrue("the original account chosen", `document.querySelector('dialog select')?.selectedOptions[0]?.textContent.startsWith('Front desk (the original account)')`)
	dialogText := eval[string](b, `document.querySelector('dialog').innerText`)
	snapAt := eval[string](b, `fetch('/api/v1/protected-objects/`+objID+`/snapshots').then((r) => r.json()).then((d) => d.items[0].at)`)
	at, err := time.Parse(time.RFC3339Nano, snapAt)
	if err != nil {
		t.Fatal(err)
	}
	folder := "Restored " + at.UTC().Format("2006-01-02 15:04") + " UTC"
	for _, want := range []string{folder, "never overwrites", "adds nothing", "Quarterly plan for the new surgery", "Floor plan v2"} {
		if !strings.Contains(dialogText, want) {
			t.Fatalf("the restore dialog does not say %q:\n%s", want, dialogText)
		}
	}
	b.shotViewport("37-email-restore-dialog")

	restoreOnce := func(n int) (state, message string) {
		eval[bool](b, watchJobPage)
		b.click("Start restore")
		b.waitText("Restore · Front desk")
		state = finishedJob(b, 60*time.Second)
		b.shot(fmt.Sprintf("38-email-restore-job-%d", n))
		type job struct {
			ErrorMessage string `json:"errorMessage"`
		}
		id := eval[string](b, `location.pathname.split('/').pop()`)
		return state, eval[job](b, `fetch('/api/v1/jobs/`+id+`').then((r) => r.json())`).ErrorMessage
	}
	state, message := restoreOnce(1)
	t.Run("restore into Dovecot", func(t *testing.T) {
		if state != "Succeeded" {
			t.Fatalf("the restore ended %q: %s", state, message)
		}
		restored := func() [][]byte {
			var out [][]byte
			dirs, _ := filepath.Glob(filepath.Join(dv.Maildir(user, "INBOX"), ".Restored *"))
			for _, d := range dirs {
				for _, sub := range []string{"cur", "new"} {
					files, _ := filepath.Glob(filepath.Join(d, sub, "*"))
					for _, f := range files {
						data, _ := os.ReadFile(f)
						out = append(out, data)
					}
				}
			}
			return out
		}
		first := restored()
		if len(first) != 2 {
			t.Fatalf("Dovecot holds %d restored messages, want 2", len(first))
		}
		for _, want := range projects {
			found := false
			for _, m := range first {
				found = found || bytes.Equal(m, want)
			}
			if !found {
				t.Fatalf("a chosen message is not restored byte for byte:\n%s", want)
			}
		}
		if dirs, _ := filepath.Glob(filepath.Join(dv.Maildir(user, "INBOX"), "."+folder+"*")); len(dirs) == 0 {
			t.Fatalf("no folder %q in Dovecot", folder)
		}
		b.open("/ui/email/" + objID)
		b.click("Projects")
		b.clickLabelled("Select Quarterly plan for the new surgery")
		b.clickLabelled("Select Floor plan v2")
		restoreDialog()
		if state, message := restoreOnce(2); state != "Succeeded" {
			t.Fatalf("the second restore ended %q: %s", state, message)
		}
		if again := restored(); len(again) != 2 {
			t.Fatalf("after restoring again Dovecot holds %d restored messages, want 2", len(again))
		}
	})

	// Verify now: the newest snapshot read back.
	b.open("/ui/email/" + objID)
	b.waitText("Verify now")
	b.click("Verify now")
	b.click("Follow its progress")
	b.waitText("Verify · Front desk")
	if state := finishedJob(b, 60*time.Second); state != "Succeeded" {
		t.Errorf("the verify ended %q:\n%s", state, b.text())
	}

	// The dashboard counts the account and links to the list.
	b.click("Dashboard")
	b.waitText("1 IMAP")
	b.shot("39-dashboard")
	b.click("1 IMAP")
	b.waitText("Add IMAP account")

	t.Run("phone", func(t *testing.T) {
		p := newBrowser(t, a.URL, 390, 844)
		p.run("phone screen", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulatePortrait))
		p.setSession(a.signIn(t, adminEmail, adminPassword))
		p.open("/ui/email")
		p.waitText("Front desk")
		noOverflow(t, p, "/ui/email")
		p.shot("39-phone-email")
		p.open("/ui/email/" + objID)
		p.waitTrue("the snapshot browser", `!!document.querySelector('[data-testid=snapshot-browser] tr[data-folder]')`)
		p.click("INBOX")
		p.waitTrue("the inbox", `document.querySelectorAll('[data-testid=snapshot-browser] tr[data-item]').length === 3`)
		noOverflow(t, p, "/ui/email/"+objID)
		p.shot("39-phone-email-account")
		p.clickLabelled("Select Appointment on Tuesday")
		p.click("Restore…")
		p.waitText("The selected items (1)")
		noOverflow(t, p, "restore dialog")
		p.shotViewport("39-phone-restore-dialog")
	})

	// Edit, then delete: the snapshots stay.
	b.open("/ui/email")
	b.clickLabelled("Edit Front desk")
	b.fill("Display name", "Front desk (old)")
	b.click("Save changes")
	b.waitTrue("saved", `!!document.querySelector('[data-testid=account-saved]')`)
	b.clickLabelled("Delete Front desk (old)")
	b.waitText("The snapshots are kept.")
	b.shotViewport("40-email-delete-confirm")
	b.click("Delete account")
	b.waitTrue("deleted", `!!document.querySelector('[data-testid=account-deleted]')`)
	b.waitText("Account deleted")
	// (The row shows the object's own name again: renaming changes the
	// source's name, and the source is gone.)
	b.run("open the deleted account", chromedp.Click(chromedp.CSS(`tr[data-object="`+objID+`"] a.name`)))
	b.waitText("This account was deleted")
	b.waitTrue("the snapshot still listed", `document.querySelectorAll('table.snapshots tr[data-snapshot]').length >= 1`)
	b.shot("41-email-deleted-account")
	if n := b.dialogs.Load(); n != 0 {
		t.Fatalf("%d JavaScript dialogs opened", n)
	}
}
