package archive

import (
	"os"
	"slices"
	"strings"
	"testing"
)

func TestParseJournalReport(t *testing.T) {
	raw, err := os.ReadFile("testdata/journal_report.eml")
	if err != nil {
		t.Fatal(err)
	}
	p := Parse(raw)
	if p.Journal == nil {
		t.Fatal("not read as a journal report")
	}
	if p.Subject != "Quartalsbericht für Q3" || p.From != "juergen@contoso.com" || p.MessageID != "inner-1@contoso.com" {
		t.Fatalf("inner message: %s", p)
	}
	if p.Date == nil || p.Date.Hour() != 8 {
		t.Fatalf("date %v", p.Date)
	}
	for _, a := range []string{"juergen@contoso.com", "alice@contoso.com", "team@contoso.com", "team-dl@contoso.com",
		"secret.bcc@contoso.com", "external@fabrikam.com", "forwarder@contoso.com"} {
		if !slices.Contains(p.Custodians, a) {
			t.Errorf("custodians %v lack %s", p.Custodians, a)
		}
	}
	if slices.Contains(p.Custodians, "journal@archive.test") {
		t.Error("the journal address is no custodian")
	}
	j := p.Journal
	if j.Sender != "juergen@contoso.com" || len(j.Recipients) != 4 || j.Recipients[1].Expanded != "team-dl@contoso.com" ||
		j.Recipients[3].Field != "Recipient" || j.Recipients[3].Forwarded != "forwarder@contoso.com" {
		t.Fatalf("journal %+v", j)
	}
	if !strings.Contains(p.Body, "zebrafisch") || strings.Contains(p.Body, "<b>") || strings.Contains(p.Body, "x()") {
		t.Fatalf("body %q", p.Body)
	}
}

func TestParseJournalEnvelopeOnly(t *testing.T) {
	raw, err := os.ReadFile("testdata/journal_envelope_only.eml")
	if err != nil {
		t.Fatal(err)
	}
	p := Parse(raw)
	if p.Journal == nil || p.Subject != "Quartalsbericht für Q3" || p.MessageID != "inner-1@contoso.com" ||
		!slices.Contains(p.Custodians, "secret.bcc@contoso.com") {
		t.Fatalf("%s %+v", p, p.Journal)
	}
}

func TestParseMalformed(t *testing.T) {
	for _, raw := range []string{
		"",
		"no headers at all",
		"Subject: caf\xe9\r\nFrom: \xff\xfe <bad@x.y>\r\n\r\nbody",
		"Subject: =?utf-8?B?!!!?=\r\nContent-Type: multipart/mixed; boundary=\"x\r\n\r\n--x\r\n",
		"Content-Type: multipart/mixed; boundary=a\r\n\r\n--a\r\nContent-Type: multipart/mixed; boundary=a\r\n\r\n--a\r\n",
		"Content-Type: text/plain; charset=x-unknown\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n=ZZ=\r\n",
		"X-MS-Journal-Report:\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\nSender: a@b.c\r\nTo: , Expanded:\r\n--b\r\nContent-Type: message/rfc822\r\n\r\n",
	} {
		p := Parse([]byte(raw))
		_ = p.String()
	}
	p := Parse([]byte("Subject: caf\xe9\r\nFrom: x <bad@x.y>\r\nTo: a@b.c, <<broken\r\n\r\nhello"))
	if p.From != "bad@x.y" || !strings.Contains(p.Body, "hello") {
		t.Fatalf("%s", p)
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"testdata/journal_report.eml", "testdata/journal_envelope_only.eml"} {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("Subject: =?utf-8?q?a?=\r\nContent-Type: multipart/mixed; boundary=z\r\n\r\n--z\r\nContent-Type: text/html\r\n\r\n<p>x</p>\r\n--z--\r\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		p := Parse(raw)
		if len(p.Body) > maxBodyText {
			t.Fatalf("body of %d bytes", len(p.Body))
		}
	})
}

func FuzzParseJournal(f *testing.F) {
	f.Add("Sender: a@b.c\r\nTo: x@y.z, Expanded: dl@y.z\r\nBcc: q@y.z\r\n", []byte("Subject: s\r\n\r\nbody"), true)
	f.Add("Recipient: r@y.z, Forwarded: f@y.z\r\nOn-Behalf-Of: o@y.z\r\n", []byte{}, false)
	f.Fuzz(func(t *testing.T, envelope string, inner []byte, binary bool) {
		var b strings.Builder
		b.WriteString("X-MS-Journal-Report: \r\nContent-Type: multipart/mixed; boundary=\"jb\"\r\n\r\n--jb\r\nContent-Type: text/plain\r\n\r\n")
		b.WriteString(envelope)
		b.WriteString("\r\n--jb\r\nContent-Type: message/rfc822\r\n")
		if binary {
			b.WriteString("Content-Transfer-Encoding: binary\r\n")
		}
		b.WriteString("\r\n")
		b.Write(inner)
		b.WriteString("\r\n--jb--\r\n")
		p := Parse([]byte(b.String()))
		if p.Journal == nil {
			t.Fatal("a journal report not read as one")
		}
	})
}
