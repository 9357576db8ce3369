package imapbackup

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"backstop/app/blobstore"
	"backstop/app/imapbackup/dovecottest"
	"backstop/store"
	"backstop/store/storetest"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// targets is a blobstore.Targets with one local backend.
type targets struct{ b blobstore.Backend }

func (t *targets) ForTenant(context.Context, string) (string, blobstore.Backend, error) {
	return "st_local", t.b, nil
}
func (t *targets) Backend(context.Context, string) (blobstore.Backend, error) { return t.b, nil }
func (t *targets) WriteFailed(string, error)                                  {}

// fixture is a real blob store (SQLite catalogue, local target) and a real
// Dovecot with one user.
type fixture struct {
	t      testing.TB
	dir    string // the data directory: database, appliance key, blobs
	db     *store.DB
	store  *blobstore.Store
	tenant string
	srv    *dovecottest.Server
	acct   Account
	// lastSnapshot is the id of the snapshot the last backup committed.
	lastSnapshot string
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	return newFixturePack(t, 1<<20)
}

func newFixturePack(t testing.TB, packSize int) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{t: t, dir: dir, db: storetest.Open(t, dir)}
	f.tenant = storetest.Tenant(t, f.db, "Example")
	local, err := blobstore.NewLocal(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	key, err := blobstore.LoadApplianceKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	f.store, err = blobstore.New(blobstore.Config{Key: key, Catalog: f.db, Targets: &targets{b: local}, PackSize: packSize,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	f.srv = dovecottest.Start(t)
	f.srv.AddUser("alice", "secret")
	f.acct = Account{Host: f.srv.Host, Port: f.srv.Port, Security: SecurityNone, Username: "alice", Password: "secret"}
	return f
}

// backup runs one backup and commits it; it returns the result and the
// committed manifest as read back from the store.
func (f *fixture) backup(a Account, prev []blobstore.Item) (*BackupResult, []blobstore.Item, blobstore.WriterStats) {
	f.t.Helper()
	res, items, st, err := f.tryBackup(context.Background(), a, prev)
	if err != nil {
		f.t.Fatal(err)
	}
	return res, items, st
}

func (f *fixture) tryBackup(ctx context.Context, a Account, prev []blobstore.Item) (*BackupResult, []blobstore.Item, blobstore.WriterStats, error) {
	w, err := f.store.NewWriter(ctx, f.tenant)
	if err != nil {
		f.t.Fatal(err)
	}
	defer w.Close()
	res, err := Backup(ctx, a, w, prev, nil)
	if err != nil {
		return nil, nil, w.Stats(), err
	}
	snap, err := w.Commit(ctx, blobstore.SnapshotSpec{ProtectedObjectID: "po_test"}, func(yield func(blobstore.Item) error) error {
		for _, it := range res.Items {
			if err := yield(it); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
	f.lastSnapshot = snap.ID
	var items []blobstore.Item
	if err := f.store.Items(ctx, snap.ID, func(it blobstore.Item) error { items = append(items, it); return nil }); err != nil {
		f.t.Fatal(err)
	}
	return res, items, w.Stats(), nil
}

func (f *fixture) opener() Opener {
	return func(ctx context.Context, c blobstore.Content) (io.ReadCloser, error) {
		return f.store.Open(ctx, f.tenant, c)
	}
}

func (f *fixture) read(it blobstore.Item) []byte {
	f.t.Helper()
	r, err := f.store.Open(context.Background(), f.tenant, it.Content)
	if err != nil {
		f.t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

// client is a go-imap client logged in as the fixture's user, for tests
// to change the mailbox.
func (f *fixture) client() *imapclient.Client {
	f.t.Helper()
	c, err := imapclient.DialInsecure(fmt.Sprintf("%s:%d", f.srv.Host, f.srv.Port), nil)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := c.Login(f.acct.Username, f.acct.Password).Wait(); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { c.Close() })
	return c
}

// serverMessage is a message as the server has it.
type serverMessage struct {
	UID          uint32
	Flags        []string
	InternalDate time.Time
	SHA256       string
	Size         int
	MessageID    string
}

// messages fetches every message of a folder with its exact bytes.
func (f *fixture) messages(c *imapclient.Client, mailbox string) []serverMessage {
	f.t.Helper()
	sel, err := c.Select(mailbox, &imap.SelectOptions{ReadOnly: true}).Wait()
	if err != nil {
		f.t.Fatal(err)
	}
	if sel.NumMessages == 0 {
		return nil
	}
	var all imap.SeqSet
	all.AddRange(1, 0)
	bufs, err := c.Fetch(all, &imap.FetchOptions{UID: true, Flags: true, InternalDate: true,
		BodySection: []*imap.FetchItemBodySection{{Peek: true}}}).Collect()
	if err != nil {
		f.t.Fatal(err)
	}
	var out []serverMessage
	for _, b := range bufs {
		body := b.FindBodySection(&imap.FetchItemBodySection{})
		sum := sha256.Sum256(body)
		out = append(out, serverMessage{UID: uint32(b.UID), Flags: flagStrings(b.Flags), InternalDate: b.InternalDate,
			SHA256: hex.EncodeToString(sum[:]), Size: len(body), MessageID: parseHeader(body).MessageID})
	}
	return out
}

func (f *fixture) appendMsg(c *imapclient.Client, mailbox string, msg []byte, flags []imap.Flag, date time.Time) {
	f.t.Helper()
	cmd := c.Append(mailbox, int64(len(msg)), &imap.AppendOptions{Flags: flags, Time: date})
	cmd.Write(msg)
	cmd.Close()
	if _, err := cmd.Wait(); err != nil {
		f.t.Fatal(err)
	}
}

func messageMeta(t testing.TB, it blobstore.Item) MessageMeta {
	t.Helper()
	var m MessageMeta
	if err := json.Unmarshal(it.Meta, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func folderMeta(t testing.TB, it blobstore.Item) FolderMeta {
	t.Helper()
	var m FolderMeta
	if err := json.Unmarshal(it.Meta, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func testMessage(i int, size int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "From: Sender %d <s%d@example.com>\r\nTo: alice@example.com\r\nSubject: Message %d\r\n", i, i, i)
	fmt.Fprintf(&b, "Date: Mon, 02 Jan 2006 15:04:05 +0000\r\nMessage-ID: <%d.%d@example.com>\r\n\r\n", i, time.Now().UnixNano())
	line := fmt.Sprintf("line of message %d, some text to fill the body with words.\r\n", i)
	for b.Len() < size {
		b.WriteString(line)
	}
	return b.Bytes()
}

// proxy forwards TCP to the server; it counts the client's commands and
// can cut the connection after the server sent some bytes.
type proxy struct {
	ln       net.Listener
	target   string
	cutAfter atomic.Int64 // server-to-client bytes before cutting; 0: never
	mu       sync.Mutex
	commands []string
}

func newProxy(t testing.TB, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *proxy) port() int { return p.ln.Addr().(*net.TCPAddr).Port }

func (p *proxy) serve(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	go func() {
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if line != "" {
				p.mu.Lock()
				p.commands = append(p.commands, line)
				p.mu.Unlock()
				s.Write([]byte(line))
			}
			if err != nil {
				s.Close()
				return
			}
		}
	}()
	limit := p.cutAfter.Load()
	var n int64
	buf := make([]byte, 32<<10)
	for {
		k, err := s.Read(buf)
		if k > 0 {
			if limit > 0 && n+int64(k) > limit {
				c.Write(buf[:limit-n])
				c.Close()
				s.Close()
				return
			}
			n += int64(k)
			c.Write(buf[:k])
		}
		if err != nil {
			c.Close()
			return
		}
	}
}

// count returns how many client lines contained s since the last reset.
func (p *proxy) count(s string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.commands {
		if strings.Contains(strings.ToUpper(c), s) {
			n++
		}
	}
	return n
}

func (p *proxy) reset() {
	p.mu.Lock()
	p.commands = nil
	p.mu.Unlock()
}
