package mailpoll_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/archive"
	"backstop/app/archive/chain"
	"backstop/app/archive/mailpoll"
	"backstop/app/graph"
	"backstop/app/graph/graphtest"
	"backstop/app/imapbackup"
	"backstop/app/imapbackup/dovecottest"
	"backstop/store"
	"backstop/store/storetest"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// sources is a mailpoll.Sources over one IMAP account or one Graph
// client, for one tenant.
type sources struct {
	tenant  string
	kind    string
	mu      sync.Mutex
	acct    imapbackup.Account
	client  *graph.Client
	mailbox []mailpoll.MailboxRef
}

func (s *sources) SourceInfo(_ context.Context, id string) (string, string, error) {
	if id != "src_test" {
		return "", "", app.NotFound("source")
	}
	return s.tenant, s.kind, nil
}

func (s *sources) IMAPAccount(context.Context, string) (imapbackup.Account, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acct, nil
}

func (s *sources) GraphClient(context.Context, string) (*graph.Client, error) { return s.client, nil }

func (s *sources) Mailboxes(context.Context, string) ([]mailpoll.MailboxRef, error) {
	return s.mailbox, nil
}

// harness is a real store, a real archive Service running with its
// pollers every 200 ms, and one polling channel.
type harness struct {
	t      *testing.T
	db     *store.DB
	svc    *archive.Service
	tenant string
	ch     *archive.Channel
}

func start(t *testing.T, src *sources, kind string) *harness {
	t.Helper()
	dir := t.TempDir()
	db := storetest.Open(t, dir)
	h := &harness{t: t, db: db, tenant: storetest.Tenant(t, db, "Example")}
	src.tenant, src.kind = h.tenant, kind
	signer, err := chain.LoadOrCreateSigner(filepath.Join(dir, "archive.key"), "backstop.test")
	if err != nil {
		t.Fatal(err)
	}
	h.svc, err = archive.New(archive.Config{Store: db, DataDir: dir, Signer: signer,
		Origin:  func(tn string) string { return "backstop.test/archive/" + tn },
		Capture: mailpoll.New(src, nil), CapturePollEvery: 200 * time.Millisecond, CheckpointEvery: time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	h.ch = &archive.Channel{ID: "ch_" + kind, TenantID: h.tenant, Kind: kind, DisplayName: kind, SourceID: "src_test",
		State: archive.ChannelIdle, CreatedAt: time.Now().UTC()}
	if err := db.CreateArchiveChannel(context.Background(), h.ch); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.svc.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	h.svc.PollNow(h.ch.ID)
	return h
}

func (h *harness) channel() *archive.Channel {
	h.t.Helper()
	c, err := h.db.ArchiveChannel(context.Background(), h.ch.ID)
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

// waitFor polls cond for up to 15 s.
func (h *harness) waitFor(what string, cond func(c *archive.Channel) bool) *archive.Channel {
	h.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		c := h.channel()
		if cond(c) {
			return c
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s: channel %+v", what, c)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// archived returns the exact stored bytes of every archived message.
func (h *harness) archived() [][]byte {
	h.t.Helper()
	ctx := context.Background()
	var out [][]byte
	err := h.db.ArchiveMessagesAll(ctx, h.tenant, func(m *archive.StoredMessage) error {
		r, err := h.svc.OpenContent(ctx, h.tenant, m.ID)
		if err != nil {
			return err
		}
		defer r.Close()
		b, err := io.ReadAll(r)
		out = append(out, b)
		return err
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return out
}

func sameSet(t *testing.T, got, want [][]byte) {
	t.Helper()
	sortBytes := func(s [][]byte) [][]byte {
		s = slices.Clone(s)
		slices.SortFunc(s, bytes.Compare)
		return s
	}
	g, w := sortBytes(got), sortBytes(want)
	if len(g) != len(w) {
		t.Fatalf("archived %d messages, want %d", len(g), len(w))
	}
	for i := range g {
		if !bytes.Equal(g[i], w[i]) {
			t.Fatalf("archived message differs:\n%q\nwant\n%q", g[i], w[i])
		}
	}
}

// mail is a CRLF message (Dovecot's mail_save_crlf keeps CRLF as is, so
// what FETCH returns is byte for byte what was appended).
func mail(subject string) []byte {
	return fmt.Appendf(nil, "From: Bob <bob@example.com>\r\nTo: alice@example.com\r\nSubject: %s\r\n"+
		"Date: Mon, 02 Jan 2006 15:04:05 +0000\r\nMessage-ID: <%s.%d@example.com>\r\n\r\nBody of %s.\r\n",
		subject, subject, time.Now().UnixNano(), subject)
}

func imapLogin(t *testing.T, srv *dovecottest.Server) *imapclient.Client {
	t.Helper()
	c, err := imapclient.DialInsecure(fmt.Sprintf("%s:%d", srv.Host, srv.Port), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Login("alice", "secret").Wait(); err != nil {
		t.Fatal(err)
	}
	return c
}

func appendMsg(t *testing.T, c *imapclient.Client, mailbox string, msg []byte) {
	t.Helper()
	cmd := c.Append(mailbox, int64(len(msg)), nil)
	cmd.Write(msg)
	cmd.Close()
	if _, err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
}

func TestIMAPCapture(t *testing.T) {
	srv := dovecottest.Start(t)
	srv.AddUser("alice", "secret")
	c := imapLogin(t, srv)
	if err := c.Create("Projects", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	appendMsg(t, c, "INBOX", mail("old-inbox"))
	appendMsg(t, c, "Projects", mail("old-projects"))

	src := &sources{acct: imapbackup.Account{Host: srv.Host, Port: srv.Port, Security: imapbackup.SecurityNone,
		Username: "alice", Password: "secret"}}
	h := start(t, src, archive.KindIMAP)
	h.waitFor("the baseline", func(c *archive.Channel) bool { return c.Cursor != "" })
	if got := h.archived(); len(got) != 0 {
		t.Fatalf("the baseline archived %d messages that were there before the channel", len(got))
	}

	want := [][]byte{mail("new-inbox-1"), mail("new-inbox-2"), mail("new-projects"), mail("new-folder")}
	appendMsg(t, c, "INBOX", want[0])
	appendMsg(t, c, "INBOX", want[1])
	appendMsg(t, c, "Projects", want[2])
	if err := c.Create("Later", nil).Wait(); err != nil { // a folder created after the channel is read whole
		t.Fatal(err)
	}
	appendMsg(t, c, "Later", want[3])
	ch := h.waitFor("4 captures", func(c *archive.Channel) bool { return c.MessagesTotal >= 4 })
	if ch.State != archive.ChannelOK {
		t.Errorf("state %q, want ok", ch.State)
	}
	sameSet(t, h.archived(), want)

	// Later polls capture nothing again.
	time.Sleep(time.Second)
	if ch := h.channel(); ch.MessagesTotal != 4 {
		t.Fatalf("messagesTotal %d after more polls, want 4", ch.MessagesTotal)
	}

	// Capture never marks mail read.
	checked := 0
	for _, mb := range []string{"INBOX", "Projects", "Later"} {
		if _, err := c.Select(mb, &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
			t.Fatal(err)
		}
		var all imap.SeqSet
		all.AddRange(1, 0) // 1:*
		msgs, err := c.Fetch(all, &imap.FetchOptions{Flags: true}).Collect()
		if err != nil {
			t.Fatal(err)
		}
		checked += len(msgs)
		for _, m := range msgs {
			if slices.Contains(m.Flags, imap.FlagSeen) {
				t.Errorf("%s message %d is \\Seen after capture", mb, m.SeqNum)
			}
		}
	}

	if checked != 6 {
		t.Fatalf("checked the flags of %d messages, want 6", checked)
	}

	// A refused login makes the channel failing; the next good poll ok.
	src.mu.Lock()
	src.acct.Password = "wrong"
	src.mu.Unlock()
	ch = h.waitFor("failing", func(c *archive.Channel) bool { return c.State == archive.ChannelFailing })
	if ch.LastError == "" {
		t.Error("a failing channel without lastError")
	}
	src.mu.Lock()
	src.acct.Password = "secret"
	src.mu.Unlock()
	extra := mail("after-recovery")
	appendMsg(t, c, "INBOX", extra)
	ch = h.waitFor("recovery", func(c *archive.Channel) bool { return c.State == archive.ChannelOK && c.MessagesTotal == 5 })
	if ch.LastError != "" {
		t.Errorf("lastError %q after recovery", ch.LastError)
	}
	sameSet(t, h.archived(), append(want, extra))
}

var testTenant = graphtest.Tenant{AzureTenantID: "11111111-2222-3333-4444-555555555555",
	ClientID: "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", ClientSecret: "s3cret"}

func TestM365Capture(t *testing.T) {
	fake := graphtest.New(testTenant, graphtest.Options{})
	t.Cleanup(fake.Close)
	client, err := graph.New(graph.Config{GraphURL: fake.GraphURL(), LoginURL: fake.LoginURL(),
		AzureTenantID: testTenant.AzureTenantID, ClientID: testTenant.ClientID, ClientSecret: testTenant.ClientSecret})
	if err != nil {
		t.Fatal(err)
	}
	alice := fake.AddUser(graphtest.User{UserPrincipalName: "alice@example.com", Mail: "alice@example.com"})
	bob := fake.AddUser(graphtest.User{UserPrincipalName: "bob@example.com", Mail: "bob@example.com"})
	inbox := fake.WellKnownFolder(alice, "inbox")
	projects := fake.AddFolder(alice, inbox, "Projects")
	before := time.Now().Add(-time.Hour)
	fake.AddMessage(alice, inbox, mail("old-inbox"), before)
	fake.AddMessage(alice, projects, mail("old-projects"), before)
	fake.AddMessage(bob, fake.WellKnownFolder(bob, "inbox"), mail("bob-unprotected"), time.Now())

	src := &sources{client: client, mailbox: []mailpoll.MailboxRef{{UserID: alice, Address: "alice@example.com"}}}
	h := start(t, src, archive.KindM365)
	h.waitFor("the baseline", func(c *archive.Channel) bool { return c.Cursor != "" })
	if got := h.archived(); len(got) != 0 {
		t.Fatalf("the baseline archived %d messages that were there before the channel", len(got))
	}

	want := [][]byte{mail("new-inbox"), mail("new-projects"), mail("new-subfolder")}
	fake.AddMessage(alice, inbox, want[0], time.Now())
	fake.AddMessage(alice, projects, want[1], time.Now())
	later := fake.AddFolder(alice, projects, "Later")
	fake.AddMessage(alice, later, want[2], time.Now())
	gone := fake.AddMessage(alice, inbox, mail("deleted-before-poll"), time.Now())
	fake.DeleteMessage(alice, gone)
	ch := h.waitFor("3 captures", func(c *archive.Channel) bool { return c.MessagesTotal >= 3 })
	if ch.State != archive.ChannelOK {
		t.Errorf("state %q, want ok", ch.State)
	}
	sameSet(t, h.archived(), want)

	// A message moved to another folder is not captured again, nor are
	// old messages that change; later polls capture nothing new.
	msgs := fake.Messages(alice)
	for _, m := range msgs {
		if bytes.Equal(m.MIME, want[0]) {
			fake.MoveMessage(alice, m.ID, projects)
		}
	}
	time.Sleep(time.Second)
	if ch := h.channel(); ch.MessagesTotal != 3 {
		t.Fatalf("messagesTotal %d after more polls, want 3", ch.MessagesTotal)
	}
	sameSet(t, h.archived(), want)
}
