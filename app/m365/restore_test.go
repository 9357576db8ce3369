package m365

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"backstop/app/graph"
	"backstop/app/graph/graphtest"
)

// mimeWithAttachments is a multipart message: an HTML and text body and
// attachments of the given sizes.
func mimeWithAttachments(id string, sizes ...int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "From: =?utf-8?q?J=C3=BCrgen?= <jurgen@example.com>\r\nTo: Alice <alice@example.com>, bob@example.com\r\n"+
		"Cc: carol@example.com\r\nSubject: =?utf-8?b?UmVwb3J0IMOc?=\r\nDate: Tue, 03 Feb 2026 09:30:00 +0100\r\n"+
		"Message-ID: <%s@example.com>\r\nX-Custom-Tag: keep me\r\nMIME-Version: 1.0\r\n"+
		"Content-Type: multipart/mixed; boundary=\"outer\"\r\n\r\n", id)
	b.WriteString("--outer\r\nContent-Type: multipart/alternative; boundary=\"inner\"\r\n\r\n")
	b.WriteString("--inner\r\nContent-Type: text/plain; charset=iso-8859-1\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nGr=FC=DFe\r\n")
	b.WriteString("--inner\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>Gr\xc3\xbc\xc3\x9fe</p>\r\n--inner--\r\n")
	rng := rand.New(rand.NewPCG(uint64(len(sizes)), 7))
	for i, n := range sizes {
		data := make([]byte, n)
		for j := range data {
			data[j] = byte(rng.UintN(256))
		}
		fmt.Fprintf(&b, "--outer\r\nContent-Type: application/octet-stream; name=\"file%d.bin\"\r\n"+
			"Content-Disposition: attachment; filename=\"file%d.bin\"\r\nContent-Transfer-Encoding: base64\r\n\r\n", i, i)
		enc := make([]byte, 0, n*4/3+4)
		enc = fmt.Appendf(enc, "%s", base64Lines(data))
		b.Write(enc)
		b.WriteString("\r\n")
	}
	b.WriteString("--outer--\r\n")
	return b.Bytes()
}

func base64Lines(data []byte) string {
	s := encodeB64(data)
	var out strings.Builder
	for len(s) > 76 {
		out.WriteString(s[:76] + "\r\n")
		s = s[76:]
	}
	out.WriteString(s)
	return out.String()
}

func TestRestoreMail(t *testing.T) {
	f := newFixture(t, graphtest.Options{})
	alice := f.fake.AddUser(graphtest.User{DisplayName: "Alice"})
	bob := f.fake.AddUser(graphtest.User{DisplayName: "Bob"})
	inbox := f.fake.WellKnownFolder(alice, "inbox")
	root := f.fake.WellKnownFolder(alice, "msgfolderroot")
	sub := f.fake.AddFolder(alice, root, "Projects")
	rec := time.Date(2026, 2, 3, 8, 31, 0, 0, time.UTC)
	f.fake.AddMessage(alice, inbox, mimeWithAttachments("small", 2000, 5000), rec)
	f.fake.AddMessage(alice, inbox, mimeWithAttachments("large", 3<<20+1000), rec.Add(time.Hour))
	f.fake.AddMessage(alice, sub, testMIME(1, "plain"), rec.Add(2*time.Hour))
	f.fake.AddMessage(alice, sub, []byte("Subject: no id\r\n\r\nbody\r\n"), rec.Add(3*time.Hour))
	_, items := f.backup(BackupMailbox, alice, nil)

	for _, dest := range []string{alice, bob} {
		req := RestoreRequest{UserID: dest, Items: items, Folder: "Restored 2026-11-20 03:00 UTC"}
		res, err := RestoreMail(context.Background(), f.c, req, f.opener(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Restored != 4 || res.Skipped != 0 || len(res.Failed) != 0 {
			t.Fatalf("restore into %s: %+v", dest, res)
		}
		res, err = RestoreMail(context.Background(), f.c, req, f.opener(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Restored != 0 || res.Skipped != 4 {
			t.Fatalf("second restore into %s: %+v", dest, res)
		}
		var restored []graphtest.StoredMessage
		for _, m := range f.fake.Messages(dest) {
			if strings.HasPrefix(m.FolderPath, req.Folder) {
				restored = append(restored, m)
			}
		}
		if len(restored) != 4 {
			t.Fatalf("%d messages in the restore folder of %s", len(restored), dest)
		}
		for _, m := range restored {
			if m.IsDraft {
				t.Errorf("%q restored as a draft", m.Subject)
			}
			switch {
			case strings.Contains(m.InternetMessageID, "small"):
				if m.FolderPath != req.Folder+"/Inbox" || len(m.Attachments) != 2 || m.Subject != "Report Ü" {
					t.Errorf("small: %+v", m)
				}
				if !m.ReceivedDateTime.Equal(rec) || !m.SentDateTime.Equal(time.Date(2026, 2, 3, 8, 30, 0, 0, time.UTC)) {
					t.Errorf("small times: sent %v received %v", m.SentDateTime, m.ReceivedDateTime)
				}
			case strings.Contains(m.InternetMessageID, "large"):
				if len(m.AttachmentSizes) != 1 || m.AttachmentSizes[0] != 3<<20+1000 {
					t.Errorf("large attachment: %v %v", m.Attachments, m.AttachmentSizes)
				}
			case m.Subject == "plain":
				if m.FolderPath != req.Folder+"/Projects" {
					t.Errorf("plain in %q", m.FolderPath)
				}
			case m.Subject == "no id":
				if !strings.HasSuffix(m.InternetMessageID, "@backstop.restore>") {
					t.Errorf("synthesised id %q", m.InternetMessageID)
				}
			}
		}
	}
}

func TestRestoreFiles(t *testing.T) {
	f := newFixture(t, graphtest.Options{})
	erin := f.fake.AddUser(graphtest.User{DisplayName: "Erin"})
	big := make([]byte, 2*320<<10+12345)
	for i := range big {
		big[i] = byte(i * 7)
	}
	f.fake.AddFile(erin, "a.txt", []byte("alpha"))
	f.fake.AddFile(erin, "docs/big.bin", big)
	f.fake.AddFile(erin, "docs/deep/c.txt", []byte("charlie"))
	_, items := f.backup(BackupDrive, erin, nil)
	folder := "Restored 2026-11-20 03-00 UTC"
	req := RestoreRequest{UserID: erin, Items: items, Folder: folder}
	res, err := RestoreFiles(context.Background(), f.c, req, f.opener(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Restored != 3 || len(res.Failed) != 0 {
		t.Fatalf("restore: %+v", res)
	}
	res, err = RestoreFiles(context.Background(), f.c, req, f.opener(), nil)
	if err != nil || res.Restored != 0 || res.Skipped != 3 {
		t.Fatalf("second restore: %+v %v", res, err)
	}
	got := map[string][]byte{}
	for _, fl := range f.fake.Files(erin) {
		got[fl.Path] = fl.Content
	}
	if !bytes.Equal(got[folder+"/docs/big.bin"], big) || string(got[folder+"/docs/deep/c.txt"]) != "charlie" || string(got[folder+"/a.txt"]) != "alpha" {
		t.Fatalf("restored files: %d entries", len(got))
	}
	// A different file in the way is never overwritten.
	f.fake.AddFile(erin, folder+"/a.txt", []byte("someone else's"))
	res, err = RestoreFiles(context.Background(), f.c, req, f.opener(), nil)
	if err != nil || res.Restored != 1 || res.Skipped != 2 {
		t.Fatalf("restore with a conflict: %+v %v", res, err)
	}
	got = map[string][]byte{}
	for _, fl := range f.fake.Files(erin) {
		got[fl.Path] = fl.Content
	}
	if string(got[folder+"/a.txt"]) != "someone else's" || string(got[folder+"/a (restored 1).txt"]) != "alpha" {
		t.Fatalf("conflict handling: %q / %q", got[folder+"/a.txt"], got[folder+"/a (restored 1).txt"])
	}
}

func TestSyncDirectory(t *testing.T) {
	f := newFixture(t, graphtest.Options{})
	e3 := f.fake.Sku("ENTERPRISEPACK")
	e5 := f.fake.Sku("SPE_E5")
	ids := map[string]string{
		"user":    f.fake.AddUser(graphtest.User{DisplayName: "Licensed", Licenses: []string{e5, e3}}),
		"shared":  f.fake.AddUser(graphtest.User{DisplayName: "Shared", Purpose: "shared", Disabled: true}),
		"room":    f.fake.AddUser(graphtest.User{DisplayName: "Room", Purpose: "room"}),
		"equip":   f.fake.AddUser(graphtest.User{DisplayName: "Beamer", Purpose: "equipment"}),
		"nomail":  f.fake.AddUser(graphtest.User{DisplayName: "Guest", NoMailbox: true}),
		"another": f.fake.AddUser(graphtest.User{DisplayName: "Plain"}),
	}
	var calls int
	users, err := SyncDirectory(context.Background(), f.c, func(p appProgress) { calls++ })
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]DirectoryUser{}
	for _, u := range users {
		by[u.ExternalID] = u
	}
	if len(by) != len(ids) || calls == 0 {
		t.Fatalf("%d users, %d progress calls", len(by), calls)
	}
	u := by[ids["user"]]
	if !u.Licensed || strings.Join(u.Licenses, ",") != "ENTERPRISEPACK,SPE_E5" || u.Kind != "user" || !u.HasMailbox || !u.Enabled {
		t.Errorf("licensed user %+v", u)
	}
	if s := by[ids["shared"]]; s.Kind != "shared_mailbox" || s.Licensed || s.Enabled {
		t.Errorf("shared %+v", s)
	}
	if r := by[ids["room"]]; r.Kind != "room" {
		t.Errorf("room %+v", r)
	}
	if r := by[ids["equip"]]; r.Kind != "room" {
		t.Errorf("equipment %+v", r)
	}
	if n := by[ids["nomail"]]; n.HasMailbox || n.Kind != "user" {
		t.Errorf("no mailbox %+v", n)
	}
}

func TestCheck(t *testing.T) {
	f := newFixture(t, graphtest.Options{})
	if err := Check(context.Background(), f.c); err != nil {
		t.Fatal(err)
	}
	bad := newClient(t, f.fake, "wrong", nil)
	err := Check(context.Background(), bad)
	var ae *graph.AuthError
	if failureCode(err) != CodeAuthFailed || !errors.As(err, &ae) || !strings.Contains(ae.Reason(), "7000215") {
		t.Fatalf("bad secret: %v", err)
	}
	f.fake.SetRoles("User.Read.All", "Mail.ReadWrite")
	err = Check(context.Background(), newClient(t, f.fake, testTenant.ClientSecret, nil))
	if failureCode(err) != CodeConsentMissing {
		t.Fatalf("missing consent: %v", err)
	}
	var fe *failureError
	errors.As(err, &fe)
	if fe.Params["permission"] != "Organization.Read.All" || !strings.Contains(fe.Params["consentUrl"].(string), "/adminconsent?client_id=") ||
		fe.Params["azureTenantId"] != testTenant.AzureTenantID {
		t.Fatalf("params %v", fe.Params)
	}
}

func TestConsentURL(t *testing.T) {
	got := ConsentURL("https://login.microsoftonline.com/", "contoso.onmicrosoft.com", "a b&c")
	if got != "https://login.microsoftonline.com/contoso.onmicrosoft.com/adminconsent?client_id=a+b%26c" {
		t.Fatal(got)
	}
}

func TestEscapeName(t *testing.T) {
	for _, n := range []string{"plain", "a/b", "50%", "%2F", "a%/b"} {
		if e := EscapeName(n); strings.Contains(e, "/") || UnescapeName(e) != n {
			t.Errorf("%q -> %q -> %q", n, e, UnescapeName(e))
		}
	}
}
