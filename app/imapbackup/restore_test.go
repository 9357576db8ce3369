package imapbackup

import (
	"context"
	"errors"
	"slices"
	"sort"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/blobstore"

	"github.com/emersion/go-imap/v2"
)

// restoredMatches checks that every message item of items is in dest
// exactly once per copy in the snapshot: same bytes, flags and date.
func (f *fixture) restoredMatches(items []blobstore.Item, root string) {
	f.t.Helper()
	c := f.client()
	for path, folder := range folderItems(items) {
		fm := folderMeta(f.t, folder)
		dest := root + "." + fm.Mailbox
		server := f.messages(c, dest)
		stored := byPath(items)[path]
		if len(server) != len(stored) {
			f.t.Fatalf("%s: %d messages restored, %d in the snapshot", dest, len(server), len(stored))
		}
		key := func(sha string, flags []string, d time.Time) string {
			fl := slices.Clone(flags)
			sort.Strings(fl)
			return sha + "|" + d.UTC().Format(time.RFC3339) + "|" + stringsJoin(fl)
		}
		want := map[string]int{}
		for _, it := range stored {
			m := messageMeta(f.t, it)
			want[key(it.SHA256, m.Flags, m.InternalDate)]++
		}
		for _, sm := range server {
			k := key(sm.SHA256, sm.Flags, sm.InternalDate)
			if want[k] == 0 {
				f.t.Fatalf("%s: restored message %d (%s) not in the snapshot as such", dest, sm.UID, k)
			}
			want[k]--
		}
	}
}

func stringsJoin(s []string) string {
	out := ""
	for _, x := range s {
		out += x + ","
	}
	return out
}

func TestRestore(t *testing.T) {
	f := newFixture(t)
	c := f.client()
	date := time.Date(2023, 7, 8, 9, 10, 11, 0, time.UTC)
	for _, name := range []string{"Projekte", "Projekte.Größe", "Leer"} {
		if err := c.Create(name, nil).Wait(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 250 {
		f.appendMsg(c, "INBOX", testMessage(i, 1000+i*37), []imap.Flag{imap.FlagSeen, "$Label1"}, date.Add(time.Duration(i)*time.Minute))
	}
	same := testMessage(999, 4000)
	f.appendMsg(c, "Projekte.Größe", same, []imap.Flag{imap.FlagFlagged}, date)
	f.appendMsg(c, "Projekte.Größe", same, []imap.Flag{imap.FlagFlagged}, date) // the same message twice
	f.appendMsg(c, "Projekte.Größe", testMessage(1000, 3<<20), nil, date)       // streamed, its own command
	f.srv.Deliver("alice", "Projekte", []byte("no header at all\r\n"), "S", date)
	f.srv.Deliver("alice", "Projekte", []byte("no header at all, another\r\n"), "", date)

	_, items, _ := f.backup(f.acct, nil)
	root := "Restored 2026-11-20 03:00 UTC"
	req := RestoreRequest{Items: items, Folder: root}
	var last app.JobProgress
	res, err := Restore(context.Background(), f.acct, req, f.opener(), func(p app.JobProgress) { last = p })
	if err != nil {
		t.Fatal(err)
	}
	if res.Restored != 255 || res.Skipped != 0 || len(res.Failed) != 0 {
		t.Fatalf("first restore: %+v", res)
	}
	if last.ItemsDone != 255 || last.ItemsTotal != 255 || last.Percent != 100 {
		t.Fatalf("progress %+v", last)
	}
	f.restoredMatches(items, root)
	if _, err := c.Select(root+".Leer", nil).Wait(); err != nil {
		t.Fatalf("the empty folder was not recreated: %v", err)
	}
	c.Unselect().Wait()

	// The same restore again adds nothing.
	res, err = Restore(context.Background(), f.acct, req, f.opener(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Restored != 0 || res.Skipped != 255 {
		t.Fatalf("second restore: %+v", res)
	}
	f.restoredMatches(items, root)

	// Chosen items only: one message into another folder.
	one := byPath(items)["INBOX"][7]
	res, err = Restore(context.Background(), f.acct, RestoreRequest{Items: []blobstore.Item{one}, Folder: "Single"}, f.opener(), nil)
	if err != nil || res.Restored != 1 {
		t.Fatalf("item restore: %+v %v", res, err)
	}
	got := f.messages(c, "Single.INBOX")
	if len(got) != 1 || got[0].SHA256 != one.SHA256 {
		t.Fatalf("item restore: %+v", got)
	}
}

// A restore cancelled halfway, then run again, ends with every message
// exactly once.
func TestRestoreResumes(t *testing.T) {
	f := newFixture(t)
	date := time.Now().Add(-time.Hour)
	for i := range 3000 {
		f.srv.Deliver("alice", "INBOX", testMessage(i, 3000), "S", date)
	}
	_, items, _ := f.backup(f.acct, nil)
	root := "Restored"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := Restore(ctx, f.acct, RestoreRequest{Items: items, Folder: root}, f.opener(), func(p app.JobProgress) {
		if p.ItemsDone >= 1000 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled restore: %v", err)
	}
	c := f.client()
	partial := len(f.messages(c, root+".INBOX"))
	t.Logf("%d of 3000 messages restored before the cancel", partial)
	if partial == 0 || partial >= 3000 {
		t.Fatalf("%d restored before the cancel", partial)
	}
	res, err := Restore(context.Background(), f.acct, RestoreRequest{Items: items, Folder: root}, f.opener(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Skipped != int64(partial) || res.Restored != int64(3000-partial) {
		t.Fatalf("resumed: %+v after %d", res, partial)
	}
	f.restoredMatches(items, root)
}
