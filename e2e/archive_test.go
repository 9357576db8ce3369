package e2e

import (
	"fmt"
	"net"
	"net/smtp"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"backstop/app/archive/chain"

	"github.com/chromedp/chromedp"
)

// freeLoopbackAddr is a 127.0.0.1 address no one listens on (now).
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// plainMail is a small text message with CRLF line ends.
func plainMail(from, to, subject, body string, date time.Time) []byte {
	return []byte(strings.ReplaceAll(fmt.Sprintf("From: %s\nTo: %s\nSubject: %s\nDate: %s\nMessage-ID: <%d@acme.example>\nMIME-Version: 1.0\nContent-Type: text/plain; charset=utf-8\n\n%s\n",
		from, to, subject, date.Format(time.RFC1123Z), date.UnixNano(), body), "\n", "\r\n"))
}

// journalReport is an Exchange Online journal report ([MS-XJRNL]): the
// envelope part names every recipient (the Bcc one and a distribution
// list's expansion too), the original message follows as message/rfc822.
func journalReport(journalAddr string, date time.Time) []byte {
	original := "From: Legal <legal@acme.example>\r\nTo: Partner <partner@lawfirm.example>\r\nSubject: Contract draft\r\n" +
		"Date: " + date.Format(time.RFC1123Z) + "\r\nMessage-ID: <contract-1@acme.example>\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: text/html; charset=utf-8\r\n\r\n<p>Draft attached.</p><img src=x onerror=alert(1)><script>alert(2)</script>\r\n"
	envelope := "Sender: legal@acme.example\r\nSubject: Contract draft\r\nMessage-ID: <contract-1@acme.example>\r\n" +
		"To: partner@lawfirm.example\r\nBcc: counsel@acme.example, Expanded: legal-team@acme.example\r\n"
	return []byte("From: Microsoft Outlook <MicrosoftExchange329e71ec88ae4615bbc36ab6ce41109e@acme.onmicrosoft.com>\r\n" +
		"To: " + journalAddr + "\r\nSubject: Contract draft\r\nDate: " + date.Format(time.RFC1123Z) + "\r\n" +
		"Message-ID: <journal-1@acme.onmicrosoft.com>\r\nX-MS-Journal-Report:\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: multipart/mixed; boundary=\"jr-boundary\"\r\n\r\n" +
		"--jr-boundary\r\nContent-Type: text/plain; charset=us-ascii\r\n\r\n" + envelope + "\r\n" +
		"--jr-boundary\r\nContent-Type: message/rfc822\r\n\r\n" + original + "\r\n" +
		"--jr-boundary--\r\n")
}

// resultRow is one row of the archive search results as the page shows it.
type resultRow struct {
	Subject string `json:"subject"`
	Held    bool   `json:"held"`
	Purged  bool   `json:"purged"`
	Journal bool   `json:"journal"`
}

const resultRowsJS = `[...document.querySelectorAll('table.archive-results tbody tr')].map((tr) => ({
	subject: tr.querySelector('.name').textContent, held: !!tr.querySelector('[data-testid=held]'),
	purged: !!tr.querySelector('[data-testid=purged]'), journal: tr.textContent.includes('Journal report') }))`

// chainSize waits, refreshing the archive overview, until the chain's
// signed tree size shown is at least n.
func chainSize(t *testing.T, b *browser, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("a checkpoint of at least %d records", n), 75*time.Second, func() bool {
		b.click("Refresh")
		time.Sleep(time.Second)
		return eval[bool](b, fmt.Sprintf(`Number(document.querySelector('[data-testid=chain-size]')?.textContent) >= %d`, n))
	})
}

// TestArchive walks the archive pages against the real binary with its
// SMTP journal listener on: an smtp_journal channel created in the browser
// and its address read from the page, three messages sent to it over real
// SMTP (one an Exchange journal report), the counts on the overview, a
// search by the journal report's Bcc custodian, the message shown as text,
// a legal hold by custodian, retention of 0 days (with its warning) run at
// once: the held message stays and the others are purged; the evidence
// JSON downloaded and verified offline; the chain verified; the pages on a
// phone.
func TestArchive(t *testing.T) {
	smtpAddr := freeLoopbackAddr(t)
	a := startAppliance(t, "SERVICE_ARCHIVE_SMTP_LISTEN="+smtpAddr, "SERVICE_ARCHIVE_SMTP_DOMAIN=archive.acme.test")
	if !a.routeExists(t, "/api/v1/archive/channels") {
		if os.Getenv("CI") == "true" {
			t.Fatal("this build serves no /api/v1/archive routes")
		}
		t.Skip("this build serves no /api/v1/archive routes")
	}
	a.createAdmin(t, adminEmail, adminPassword)
	b := newBrowser(t, a.URL, 1280, 900)
	b.setSession(a.signIn(t, adminEmail, adminPassword))
	b.open("/ui/tenants")
	b.fill("Name", "Acme Dental")
	b.click("Create tenant")
	b.waitText("Tenant “Acme Dental” created.")

	// A journaling channel; its address is what the page shows.
	b.click("Archive")
	b.waitText("No capture channels yet")
	b.shot("70-archive-empty")
	b.click("Add channel")
	b.fill("Display name", "Acme journal")
	b.click("Add channel")
	b.waitText("Channel “Acme journal” added.")
	b.waitText("New-JournalRule -Name")
	b.waitText("undeliverable journal reports")
	address := eval[string](b, `document.querySelector('[data-testid=journal-address]').textContent`)
	if !strings.HasSuffix(address, "@archive.acme.test") {
		t.Fatalf("the journal address shown is %q", address)
	}
	if cmd := b.text(); !strings.Contains(cmd, "-JournalEmailAddress "+address+" -Scope Global") {
		t.Fatalf("the journal rule command does not name the address %s", address)
	}
	b.shot("71-archive-channel-added")

	// Three messages over SMTP, as Exchange Online would send them.
	now := time.Now().UTC().Truncate(time.Second)
	msgs := []struct {
		from string
		body []byte
	}{
		{"dana@acme.example", plainMail("Dana <dana@acme.example>", "Front Desk <frontdesk@acme.example>", "Quarterly numbers", "Revenue is up.", now.Add(-2*time.Minute))},
		{"bob@acme.example", plainMail("Bob <bob@acme.example>", "Carol <carol@acme.example>", "Lunch on Friday", "Pizza?", now.Add(-time.Minute))},
		{"MicrosoftExchange329e71ec88ae4615bbc36ab6ce41109e@acme.onmicrosoft.com", journalReport(address, now)},
	}
	for _, m := range msgs {
		if err := smtp.SendMail(smtpAddr, nil, m.from, []string{address}, m.body); err != nil {
			t.Fatalf("SMTP delivery from %s: %v", m.from, err)
		}
	}
	// Mail for an address that is no channel's is refused.
	if err := smtp.SendMail(smtpAddr, nil, "x@example.org", []string{"nobody@archive.acme.test"}, plainMail("x@example.org", "nobody@archive.acme.test", "Hi", "?", now)); err == nil {
		t.Fatal("the listener accepted mail for an address that is no channel's")
	}

	// The overview counts them.
	waitFor(t, "the overview to count 3 messages", 20*time.Second, func() bool {
		b.click("Refresh")
		time.Sleep(300 * time.Millisecond)
		return eval[string](b, `document.querySelector('[data-channel] [data-testid=messages24h]')?.textContent || ''`) == "3" &&
			eval[string](b, `document.querySelector('[data-testid=archive-messages]')?.textContent || ''`) == "3"
	})
	// The first checkpoint is signed within a minute (CONTRACT §14: 60 s).
	chainSize(t, b, 3)
	b.shot("72-archive-overview")

	// Search by the journal report's Bcc recipient finds only it.
	b.click("Search")
	b.waitText("Quarterly numbers")
	b.waitTrue("three results", `document.querySelectorAll('table.archive-results tbody tr').length === 3`)
	quarterlyID := eval[string](b, `[...document.querySelectorAll('table.archive-results tbody tr')].find((tr) => tr.textContent.includes('Quarterly numbers')).dataset.message`)
	b.fill("Custodian", "counsel@acme.example")
	b.click("Search")
	b.waitTrue("one result for the Bcc custodian", `document.querySelectorAll('table.archive-results tbody tr').length === 1 && document.querySelector('table.archive-results .name').textContent === 'Contract draft'`)
	if rows := eval[[]resultRow](b, resultRowsJS); !rows[0].Journal {
		t.Fatalf("the journal report is not marked as one: %+v", rows)
	}
	b.shot("73-archive-search")

	// The message, as text: nothing in it runs.
	b.click("Contract draft")
	b.waitTrue("the message's text", `document.querySelector('[data-testid=message-body]')?.textContent.includes('Bcc: counsel@acme.example, Expanded: legal-team@acme.example')`)
	if h := eval[string](b, `document.querySelector('[data-testid=message-headers]').textContent`); !strings.Contains(h, "X-MS-Journal-Report:") {
		t.Fatalf("the headers shown lack X-MS-Journal-Report:\n%s", h)
	}
	if eval[bool](b, `!!document.querySelector('main img, main script')`) || b.dialogs.Load() != 0 {
		t.Fatal("the message's HTML was rendered")
	}
	b.waitText("onerror=alert(1)")
	b.shot("74-archive-message")

	// A legal hold on the Bcc custodian.
	b.click("Legal holds")
	b.waitText("No active holds")
	b.fill("Hold name", "Contract dispute")
	b.fill("Matter", "2026-CV-114")
	b.fill("Custodians", "counsel@acme.example")
	b.click("Create hold")
	b.waitText("Hold “Contract dispute” created.")
	b.waitTrue("the hold is listed", `[...document.querySelectorAll('table.archive-holds tbody tr')].some((tr) => tr.textContent.includes('Contract dispute') && tr.textContent.includes('counsel@acme.example'))`)
	b.shot("75-archive-holds")

	// Retention of 0 days, with its warning, run at once.
	b.click("Retention")
	b.fill("Default: keep messages for", "0")
	b.waitText("expires at the next retention run")
	b.shot("76-archive-retention-zero")
	b.click("Save retention")
	b.waitText("Retention saved.")
	b.click("Run retention now")
	b.waitText("Follow the job")
	b.click("Follow the job")
	if state := finishedJob(b, 60*time.Second); state != "Succeeded" {
		t.Fatalf("the retention job ended %s", state)
	}

	// The held message stays; the others are purged: search no longer
	// finds them, and a purged one's page says so (badge and note).
	b.open("/ui/archive/search")
	b.waitText("Contract draft")
	b.waitTrue("only the held message is found", `document.querySelectorAll('table.archive-results tbody tr').length === 1`)
	if rows := eval[[]resultRow](b, resultRowsJS); rows[0].Subject != "Contract draft" || !rows[0].Held || rows[0].Purged {
		t.Fatalf("after retention the search shows %+v; want only the held journal report", rows)
	}
	b.shot("77-archive-after-retention")
	b.open("/ui/archive/messages/" + quarterlyID)
	b.waitTrue("the purged badge and note", `!!document.querySelector('[data-testid=purged]') && !!document.querySelector('[data-testid=purged-note]')`)
	b.shot("77-archive-purged-message")

	// The evidence report, checked offline, once a checkpoint covers the
	// hold and the two tombstones too.
	b.click("Overview")
	chainSize(t, b, 6)
	downloads := t.TempDir()
	b.allowDownloads(downloads)
	b.click("Evidence")
	b.waitTrue("the verifier key", `!!document.querySelector('[data-testid=verifier-key]')`)
	key := strings.TrimSpace(eval[string](b, `document.querySelector('[data-testid=verifier-key]').textContent`))
	b.waitText("backstop archive verify-evidence evidence.json --messages DIR")
	b.click("Download JSON")
	var report []byte
	var reportPath string
	waitFor(t, "the evidence report", 15*time.Second, func() bool {
		entries, _ := os.ReadDir(downloads)
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".json") {
				reportPath = filepath.Join(downloads, e.Name())
				report, _ = os.ReadFile(reportPath)
				return len(report) > 0
			}
		}
		return false
	})
	b.waitTrue("the report's summary", `!!document.querySelector('[data-testid=evidence-summary]')`)
	vr, err := chain.VerifyEvidence(report, key, "")
	if err != nil {
		t.Fatalf("the downloaded evidence does not verify: %v (%+v)", err, vr.Problems)
	}
	if vr.Records < 6 {
		t.Fatalf("the evidence proves %d records; want the 3 messages, the hold and 2 tombstones at least", vr.Records)
	}
	// The same with the command an auditor runs, when this build has it.
	out, err := exec.Command(binary(t), "archive", "verify-evidence", reportPath).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "unknown command") {
		t.Fatalf("backstop archive verify-evidence: %v\n%s", err, out)
	}
	b.click("Download PDF")
	waitFor(t, "the PDF report", 15*time.Second, func() bool {
		entries, _ := os.ReadDir(downloads)
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".pdf") {
				pdf, _ := os.ReadFile(filepath.Join(downloads, e.Name()))
				return strings.HasPrefix(string(pdf), "%PDF")
			}
		}
		return false
	})
	b.shot("78-archive-evidence")

	// Verify the chain now: the job page follows it to success.
	b.click("Overview")
	b.click("Verify chain now")
	b.waitTrue("the job page", `location.pathname.startsWith('/ui/jobs/job_')`)
	if state := finishedJob(b, 60*time.Second); state != "Succeeded" {
		t.Fatalf("the archive verify job ended %s", state)
	}
	b.click("Archive")
	b.waitTrue("the last verification shown", `document.querySelector('[data-testid=last-verified]')?.textContent === 'just now'`)
	b.waitTrue("the chain is intact", `document.querySelector('[data-testid=chain-state]')?.textContent === 'Intact'`)
	if n := b.dialogs.Load(); n != 0 {
		t.Fatalf("%d JavaScript dialogs opened", n)
	}

	// The pages on a phone.
	p := newBrowser(t, a.URL, 390, 844)
	p.run("phone screen", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulatePortrait))
	p.setSession(a.signIn(t, adminEmail, adminPassword))
	for _, pg := range []struct{ path, wait, shot string }{
		{"/ui/archive", "Acme journal", "79-phone-archive"},
		{"/ui/archive/search", "Contract draft", "79-phone-archive-search"},
		{"/ui/archive/holds", "Contract dispute", "79-phone-archive-holds"},
		{"/ui/archive/retention", "Run retention now", "79-phone-archive-retention"},
		{"/ui/archive/evidence", "backstop archive verify-evidence", "79-phone-archive-evidence"},
	} {
		p.open(pg.path)
		p.waitText(pg.wait)
		noOverflow(t, p, pg.path)
		p.shot(pg.shot)
	}
}
