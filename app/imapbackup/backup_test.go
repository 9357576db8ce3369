package imapbackup

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"backstop/app/blobstore"

	"github.com/emersion/go-imap/v2"
)

func byPath(items []blobstore.Item) map[string][]blobstore.Item {
	out := map[string][]blobstore.Item{}
	for _, it := range items {
		if it.Kind == KindMessage {
			out[it.Path] = append(out[it.Path], it)
		}
	}
	return out
}

func folderItems(items []blobstore.Item) map[string]blobstore.Item {
	out := map[string]blobstore.Item{}
	for _, it := range items {
		if it.Kind == KindFolder {
			out[it.Path] = it
		}
	}
	return out
}

// checkAgainstServer compares every message item with the server's copy:
// same bytes, flags and INTERNALDATE.
func (f *fixture) checkAgainstServer(items []blobstore.Item) {
	f.t.Helper()
	c := f.client()
	for path, folder := range folderItems(items) {
		fm := folderMeta(f.t, folder)
		server := f.messages(c, fm.Mailbox)
		stored := byPath(items)[path]
		if len(server) != len(stored) {
			f.t.Fatalf("%s: %d messages stored, %d on the server", path, len(stored), len(server))
		}
		for i, sm := range server {
			it := stored[i]
			m := messageMeta(f.t, it)
			if m.UID != sm.UID || it.SHA256 != sm.SHA256 || int(it.Size) != sm.Size {
				f.t.Fatalf("%s uid %d: stored uid %d sha %s size %d, server sha %s size %d", path, sm.UID, m.UID, it.SHA256, it.Size, sm.SHA256, sm.Size)
			}
			if !slices.Equal(m.Flags, sm.Flags) || !m.InternalDate.Equal(sm.InternalDate) {
				f.t.Fatalf("%s uid %d: flags %v date %v, server %v %v", path, sm.UID, m.Flags, m.InternalDate, sm.Flags, sm.InternalDate)
			}
		}
	}
}

func TestBackupIncremental(t *testing.T) {
	f := newFixture(t)
	c := f.client()
	date := time.Date(2024, 3, 4, 5, 6, 7, 0, time.FixedZone("", 3600))
	for i := range 20 {
		f.appendMsg(c, "INBOX", testMessage(i, 2000+i*100), []imap.Flag{imap.FlagSeen}, date.Add(time.Duration(i)*time.Hour))
	}
	// Non-ASCII names (modified UTF-7 on the wire) below a parent, with
	// Dovecot's "." separator; an empty folder.
	for _, name := range []string{"Archiv", "Archiv.Größe & Maß", "Archiv.Größe & Maß.日本", "Empty"} {
		if err := c.Create(name, nil).Wait(); err != nil {
			t.Fatal(err)
		}
	}
	f.appendMsg(c, "Archiv.Größe & Maß", []byte("Subject: =?utf-8?q?Gr=C3=BC=C3=9Fe?=\r\nFrom: =?iso-8859-1?q?J=F6rg?= <j@example.com>\r\n\r\nHallo\r\n"), nil, date)
	f.appendMsg(c, "Archiv.Größe & Maß.日本", testMessage(100, 500), []imap.Flag{imap.FlagFlagged, imap.FlagAnswered}, date)
	// A 0-byte message and a malformed one (no header, 8-bit bytes)
	// delivered as received. (Dovecot returns a NUL byte as 0x80 and a
	// bare LF as CRLF: we store what the server returns.)
	f.srv.Deliver("alice", "INBOX", nil, "S", date)
	f.srv.Deliver("alice", "INBOX", []byte("this is not\r\na mail \xff\xfe message\r\n\r\n"), "", date)

	px := newProxy(t, fmt.Sprintf("%s:%d", f.srv.Host, f.srv.Port))
	a := f.acct
	a.Port = px.port()
	res1, items1, _ := f.backup(a, nil)
	if res1.Messages != 24 || res1.Added != 24 || res1.Removed != 0 || len(res1.Failed) != 0 {
		t.Fatalf("first backup: %+v", res1)
	}
	f.checkAgainstServer(items1)
	folders := folderItems(items1)
	for _, p := range []string{"INBOX", "Archiv", "Archiv/Größe & Maß", "Archiv/Größe & Maß/日本", "Empty"} {
		it, ok := folders[p]
		if !ok {
			t.Fatalf("folder %q missing: %v", p, folders)
		}
		if fm := folderMeta(t, it); fm.Delimiter != "." || fm.UIDValidity == 0 || fm.HighestModSeq == 0 {
			t.Fatalf("folder %q meta %+v", p, fm)
		}
	}
	if folders["Archiv/Größe & Maß/日本"].Name != "日本" || folderMeta(t, folders["Archiv/Größe & Maß/日本"]).Mailbox != "Archiv.Größe & Maß.日本" {
		t.Fatalf("folder item %+v", folders["Archiv/Größe & Maß/日本"])
	}
	// Order: folders by path, each followed by its messages by UID.
	var order []string
	var lastUID uint32
	for _, it := range items1 {
		if it.Kind == KindFolder {
			order = append(order, it.Path)
			lastUID = 0
			continue
		}
		if u := messageMeta(t, it).UID; u <= lastUID {
			t.Fatalf("messages out of UID order in %s", it.Path)
		} else {
			lastUID = u
		}
	}
	if !slices.IsSorted(order) {
		t.Fatalf("folders out of order: %v", order)
	}
	umlaut := byPath(items1)["Archiv/Größe & Maß"][0]
	if m := messageMeta(t, umlaut); umlaut.Name != "Grüße" || m.From != "Jörg <j@example.com>" {
		t.Fatalf("decoded header: name %q from %q", umlaut.Name, m.From)
	}
	inbox := byPath(items1)["INBOX"]
	if m := messageMeta(t, inbox[0]); inbox[0].Name != "Message 0" || m.MessageID == "" || m.Date != "2006-01-02T15:04:05Z" || !slices.Equal(m.Flags, []string{`\Seen`}) {
		t.Fatalf("first message %q %+v", inbox[0].Name, m)
	}
	if zero, bad := inbox[20], inbox[21]; zero.Size != 0 || zero.Name != "(no subject)" || string(f.read(bad)) != "this is not\r\na mail \xff\xfe message\r\n\r\n" {
		t.Fatalf("0-byte %+v / malformed %q", zero, f.read(bad))
	}

	// Nothing changed: the same manifest, and not one FETCH.
	px.reset()
	start := time.Now()
	res2, items2, _ := f.backup(a, items1)
	t.Logf("no-change incremental: %v", time.Since(start))
	if n := px.count("FETCH"); n != 0 {
		t.Fatalf("%d FETCH commands for an unchanged account", n)
	}
	if res2.Added != 0 || res2.Removed != 0 || !sameItems(items1, items2) {
		t.Fatalf("unchanged account: %+v", res2)
	}

	// A flag change, an expunge and a new message.
	if _, err := c.Select("INBOX", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	if err := c.Store(imap.UIDSetNum(imap.UID(messageMeta(t, inbox[3]).UID)), &imap.StoreFlags{Op: imap.StoreFlagsAdd,
		Flags: []imap.Flag{imap.FlagFlagged}}, nil).Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Store(imap.UIDSetNum(imap.UID(messageMeta(t, inbox[5]).UID)), &imap.StoreFlags{Op: imap.StoreFlagsAdd,
		Flags: []imap.Flag{imap.FlagDeleted}}, nil).Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Expunge().Close(); err != nil {
		t.Fatal(err)
	}
	f.appendMsg(c, "INBOX", testMessage(50, 3000), nil, date)
	px.reset()
	res3, items3, _ := f.backup(a, items2)
	if res3.Added != 1 || res3.Removed != 1 || res3.Messages != 24 {
		t.Fatalf("after changes: %+v", res3)
	}
	f.checkAgainstServer(items3)
	if n := px.count("FETCH"); n > 3 {
		t.Fatalf("%d FETCH commands for one changed folder", n)
	}

	// UIDVALIDITY reset: the folder is deleted and made again with the same
	// messages. It is read again under new ids; dedup stores nothing new.
	c.Select("INBOX", nil).Wait()
	c.Unselect().Wait()
	old := byPath(items3)["Archiv/Größe & Maß/日本"]
	if err := c.Delete("Archiv.Größe & Maß.日本").Wait(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // Dovecot's UIDVALIDITY is a timestamp
	c.Create("Archiv.Größe & Maß.日本", nil).Wait()
	f.appendMsg(c, "Archiv.Größe & Maß.日本", f.read(old[0]), []imap.Flag{imap.FlagFlagged}, date)
	res4, items4, st4 := f.backup(a, items3)
	f.checkAgainstServer(items4)
	now := byPath(items4)["Archiv/Größe & Maß/日本"]
	if len(now) != 1 || now[0].ID == old[0].ID || now[0].SHA256 != old[0].SHA256 || res4.Added != 1 || res4.Removed != 1 {
		t.Fatalf("after UIDVALIDITY reset: %+v, %+v", res4, now)
	}
	if st4.NewBlobs > 2 { // the manifest's tree blobs only
		t.Fatalf("UIDVALIDITY reset stored %d new blobs", st4.NewBlobs)
	}

	// Renamed folder: the old path is gone, the new one appears.
	if err := c.Rename("Empty", "Leer", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	_, items5, _ := f.backup(a, items4)
	fi := folderItems(items5)
	if _, ok := fi["Empty"]; ok {
		t.Fatal("renamed folder still listed under its old name")
	}
	if _, ok := fi["Leer"]; !ok {
		t.Fatal("renamed folder missing")
	}

	// The password changed at the server after good backups.
	f.srv.SetPassword("alice", "changed")
	if _, _, _, err := f.tryBackup(context.Background(), a, items5); failureCode(err) != "imap.auth_failed" {
		t.Fatalf("after a password change: %v", err)
	}
}

func sameItems(a, b []blobstore.Item) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ID != b[i].ID || a[i].SHA256 != b[i].SHA256 || string(a[i].Meta) != string(b[i].Meta) {
			return false
		}
	}
	return true
}

// A connection cut in the middle of a FETCH fails the run as
// imap.connection_failed; the next run completes with every message once.
func TestBackupConnectionDropped(t *testing.T) {
	f := newFixture(t)
	date := time.Now()
	for i := range 300 {
		f.srv.Deliver("alice", "INBOX", testMessage(i, 20000), "S", date)
	}
	px := newProxy(t, fmt.Sprintf("%s:%d", f.srv.Host, f.srv.Port))
	px.cutAfter.Store(2 << 20)
	a := f.acct
	a.Port = px.port()
	_, _, _, err := f.tryBackup(context.Background(), a, nil)
	if failureCode(err) != "imap.connection_failed" {
		t.Fatalf("cut connection: %v", err)
	}
	res, items, _ := f.backup(f.acct, nil)
	if res.Messages != 300 {
		t.Fatalf("%d messages", res.Messages)
	}
	seen := map[string]bool{}
	for _, it := range items {
		if seen[it.ID] {
			t.Fatalf("duplicate item %s", it.ID)
		}
		seen[it.ID] = true
	}
	f.checkAgainstServer(items)
}

// A 30 MiB message streams from the socket into the store: the heap does
// not grow by anything like its size.
func TestBackupLargeMessage(t *testing.T) {
	f := newFixture(t)
	big := testMessage(1, 30<<20)
	f.srv.Deliver("alice", "INBOX", big, "", time.Now())
	big = nil
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	res, items, _ := f.backup(f.acct, nil)
	close(stop)
	<-done
	grew := int64(peak.Load()) - int64(base)
	t.Logf("heap in use grew by %.1f MiB at most while backing up a 30 MiB message", float64(grew)/(1<<20))
	if grew > 16<<20 {
		t.Fatalf("heap grew by %d bytes", grew)
	}
	if res.Messages != 1 || items[1].Size < 30<<20 {
		t.Fatalf("%+v", res)
	}
	f.checkAgainstServer(items)
}
