package m365

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/blobstore"
	"backstop/app/graph/graphtest"
)

func failureCode(err error) string {
	var fe *app.FailureError
	if errors.As(err, &fe) {
		return fe.Code
	}
	return ""
}

func TestMailboxFullAndIncremental(t *testing.T) {
	f := newFixture(t, graphtest.Options{})
	user := f.fake.AddUser(graphtest.User{DisplayName: "Alice", UserPrincipalName: "alice@example.com", Mail: "alice@example.com"})
	inbox := f.fake.WellKnownFolder(user, "inbox")
	root := f.fake.WellKnownFolder(user, "msgfolderroot")
	projects := f.fake.AddFolder(user, root, "Projects")
	slash := f.fake.AddFolder(user, projects, "Q1/Q2 50%")
	mimes := map[string][]byte{}
	ids := map[string]string{}
	add := func(folder, subject string, i int) {
		m := testMIME(i, subject)
		mimes[subject] = m
		ids[subject] = f.fake.AddMessage(user, folder, m, received.Add(time.Duration(i)*time.Minute))
	}
	add(inbox, "one", 1)
	add(inbox, "two", 2)
	add(inbox, "three", 3)
	add(slash, "deep", 4)

	res, items := f.backup(BackupMailbox, user, nil)
	if res.Count != 4 || res.Added != 4 || res.Removed != 0 || len(res.Failed) != 0 {
		t.Fatalf("full: %+v", res)
	}
	msgs := messagesBySubject(items)
	for subj, m := range mimes {
		it, ok := msgs[subj]
		if !ok {
			t.Fatalf("%q missing from %v", subj, msgs)
		}
		if !bytes.Equal(f.read(it), m) {
			t.Errorf("%q: stored bytes differ from the MIME", subj)
		}
		var mm MessageMeta
		json.Unmarshal(it.Meta, &mm)
		if mm.Subject != subj || mm.From == "" || mm.Date == "" || mm.GraphID != ids[subj] {
			t.Errorf("%q meta %+v", subj, mm)
		}
		if it.ID != MessageItemID(ids[subj]) || bytes.ContainsRune([]byte(it.ID), '/') {
			t.Errorf("%q id %q", subj, it.ID)
		}
	}
	if p := msgs["one"].Path; p != "Inbox" {
		t.Errorf("inbox path %q", p)
	}
	if p := msgs["deep"].Path; p != "Projects/Q1%2FQ2 50%25" {
		t.Errorf("escaped path %q", p)
	}
	folders := folderItems(items)
	if fi, ok := folders["Projects/Q1%2FQ2 50%25"]; !ok || fi.Name != "Q1/Q2 50%" {
		t.Errorf("folder items %v", folders)
	}
	for p, fi := range folders {
		var fm FolderMeta
		if json.Unmarshal(fi.Meta, &fm); fm.DeltaLink == "" || fm.FolderID == "" {
			t.Errorf("folder %q meta %+v", p, fm)
		}
	}

	// No change: nothing is fetched again.
	res, items2 := f.backup(BackupMailbox, user, items)
	if res.Count != 4 || res.Added != 0 || res.Removed != 0 || f.puts != 0 {
		t.Fatalf("no-change incremental: %+v, %d stored", res, f.puts)
	}

	// Added, deleted, moved, a new folder.
	add(inbox, "four", 5)
	f.fake.DeleteMessage(user, ids["two"])
	f.fake.MoveMessage(user, ids["three"], projects)
	archive := f.fake.AddFolder(user, root, "Archive")
	add(archive, "archived", 6)
	res, items3 := f.backup(BackupMailbox, user, items2)
	msgs = messagesBySubject(items3)
	if _, ok := msgs["two"]; ok {
		t.Error("deleted message still in the snapshot")
	}
	if msgs["three"].Path != "Projects" || msgs["archived"].Path != "Archive" || msgs["four"].Path != "Inbox" {
		t.Errorf("paths after changes: three %q archived %q four %q", msgs["three"].Path, msgs["archived"].Path, msgs["four"].Path)
	}
	if !bytes.Equal(f.read(msgs["three"]), mimes["three"]) {
		t.Error("moved message's bytes differ")
	}
	if res.Count != 5 || len(res.Failed) != 0 {
		t.Fatalf("incremental: %+v", res)
	}
	if f.puts > 3 { // four, archived, and at most the moved one
		t.Errorf("incremental stored %d items", f.puts)
	}
	seen := map[string]bool{}
	for _, it := range items3 {
		if seen[it.ID] {
			t.Errorf("duplicate item id %s", it.ID)
		}
		seen[it.ID] = true
	}
}

func TestMailboxReplaysAndThrottling(t *testing.T) {
	f := newFixture(t, graphtest.Options{})
	user := f.fake.AddUser(graphtest.User{DisplayName: "Bob"})
	inbox := f.fake.WellKnownFolder(user, "inbox")
	for i := range 30 {
		f.fake.AddMessage(user, inbox, testMIME(i, "msg"+string(rune('a'+i))), received.Add(time.Duration(i)*time.Second))
	}
	f.fake.ReplayDelta(user, true)
	f.fake.Throttle(user, 3, time.Second)
	res, items := f.backup(BackupMailbox, user, nil)
	if res.Count != 30 || len(res.Failed) != 0 {
		t.Fatalf("%+v", res)
	}
	seen := map[string]bool{}
	for _, it := range items {
		if seen[it.ID] {
			t.Fatalf("duplicate %s", it.ID)
		}
		seen[it.ID] = true
	}
	st := f.fake.Stats()
	if st.Violations != 0 || st.Throttled < 3 || st.MaxInFlight > 4 {
		t.Fatalf("stats %+v", st)
	}
	// Replays of an incremental change nothing either.
	f.fake.AddMessage(user, inbox, testMIME(99, "late"), received)
	res, _ = f.backup(BackupMailbox, user, items)
	if res.Count != 31 || res.Added != 1 {
		t.Fatalf("incremental with replays: %+v", res)
	}
}

// replaceFolder returns items with the folder item of path (and its
// messages) taken from old.
func replaceFolder(items, old []blobstore.Item, path string) []blobstore.Item {
	var out []blobstore.Item
	for _, it := range items {
		if it.Path != path {
			out = append(out, it)
		}
	}
	for _, it := range old {
		if it.Path == path {
			out = append(out, it)
		}
	}
	return out
}

func TestMailboxInvalidDeltaRestartsOnlyThatFolder(t *testing.T) {
	f := newFixture(t, graphtest.Options{})
	user := f.fake.AddUser(graphtest.User{DisplayName: "Carol"})
	inbox := f.fake.WellKnownFolder(user, "inbox")
	sent := f.fake.WellKnownFolder(user, "sentitems")
	for i := range 5 {
		f.fake.AddMessage(user, inbox, testMIME(i, "in"+string(rune('a'+i))), received)
		f.fake.AddMessage(user, sent, testMIME(i+10, "out"+string(rune('a'+i))), received)
	}
	_, first := f.backup(BackupMailbox, user, nil)
	f.fake.InvalidateDeltaTokens(user)
	// Every token is invalid now: every folder restarts, nothing is stored again.
	res, second := f.backup(BackupMailbox, user, first)
	if res.Count != 10 || f.puts != 0 {
		t.Fatalf("after invalidation: %+v, %d stored", res, f.puts)
	}
	// Only Inbox holds an invalid token: one more request than a plain
	// incremental, nothing stored, every message kept.
	mixed := replaceFolder(second, first, "Inbox")
	before := f.fake.Stats().Requests
	res, third := f.backup(BackupMailbox, user, mixed)
	withRestart := f.fake.Stats().Requests - before
	if res.Count != 10 || f.puts != 0 || res.Added != 0 || res.Removed != 0 {
		t.Fatalf("one folder restarted: %+v, %d stored", res, f.puts)
	}
	before = f.fake.Stats().Requests
	f.backup(BackupMailbox, user, third)
	plain := f.fake.Stats().Requests - before
	if withRestart != plain+1 {
		t.Errorf("a restart of one folder took %d requests, a plain incremental %d", withRestart, plain)
	}
	// The other folders kept their delta tokens.
	fsecond, fthird := folderItems(second), folderItems(third)
	var a, b FolderMeta
	json.Unmarshal(fsecond["Sent Items"].Meta, &a)
	json.Unmarshal(fthird["Sent Items"].Meta, &b)
	if a.DeltaLink == "" || b.DeltaLink == "" {
		t.Errorf("Sent Items delta links %q, %q", a.DeltaLink, b.DeltaLink)
	}
}

func TestMailboxOverQuotaFallsBackToListing(t *testing.T) {
	f := newFixture(t, graphtest.Options{})
	user := f.fake.AddUser(graphtest.User{DisplayName: "Dave"})
	inbox := f.fake.WellKnownFolder(user, "inbox")
	for i := range 4 {
		f.fake.AddMessage(user, inbox, testMIME(i, "q"+string(rune('a'+i))), received)
	}
	f.fake.SetOverQuota(user, true)
	res, items := f.backup(BackupMailbox, user, nil)
	if res.Count != 4 || len(res.Failed) != 0 {
		t.Fatalf("over quota: %+v", res)
	}
	var fm FolderMeta
	json.Unmarshal(folderItems(items)["Inbox"].Meta, &fm)
	if fm.DeltaLink != "" {
		t.Errorf("listed folder kept delta link %q", fm.DeltaLink)
	}
	f.fake.SetOverQuota(user, false)
	res, items = f.backup(BackupMailbox, user, items)
	json.Unmarshal(folderItems(items)["Inbox"].Meta, &fm)
	if res.Count != 4 || f.puts != 0 || fm.DeltaLink == "" {
		t.Fatalf("back under quota: %+v, %d stored, link %q", res, f.puts, fm.DeltaLink)
	}
}

func TestMailboxUnavailable(t *testing.T) {
	f := newFixture(t, graphtest.Options{})
	user := f.fake.AddUser(graphtest.User{DisplayName: "No Mailbox", NoMailbox: true, NoDrive: true})
	w, err := f.store.NewWriter(context.Background(), f.tenant)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	_, err = BackupMailbox(context.Background(), f.c, user, w, nil, nil)
	if failureCode(err) != CodeMailboxUnavailable {
		t.Fatalf("mailbox: %v", err)
	}
	_, err = BackupDrive(context.Background(), f.c, user, w, nil, nil)
	if failureCode(err) != CodeMailboxUnavailable {
		t.Fatalf("drive: %v", err)
	}
}
