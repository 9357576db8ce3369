package m365

import (
	"bytes"
	"encoding/json"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"backstop/app/blobstore"
	"backstop/app/graph/graphtest"
)

func filesByPath(items []blobstore.Item) map[string]blobstore.Item {
	out := map[string]blobstore.Item{}
	for _, it := range items {
		if it.Kind == KindFile {
			out[path.Join(it.Path, it.Name)] = it
		}
	}
	return out
}

func TestDriveFullIncrementalAndReset(t *testing.T) {
	f := newFixture(t, graphtest.Options{})
	user := f.fake.AddUser(graphtest.User{DisplayName: "Erin"})
	content := map[string][]byte{
		"a.txt":             []byte("alpha"),
		"docs/b.txt":        bytes.Repeat([]byte("bravo "), 1000),
		"docs/deep/c.bin":   bytes.Repeat([]byte{1, 2, 3}, 200000),
		"photos/d.jpg":      []byte("delta"),
		"photos/old/e.jpg":  []byte("echo"),
		"photos/old/f.jpeg": []byte("foxtrot"),
	}
	for p, c := range content {
		f.fake.AddFile(user, p, c)
	}
	res, items := f.backup(BackupDrive, user, nil)
	if res.Count != int64(len(content)) || res.Added != res.Count || len(res.Failed) != 0 {
		t.Fatalf("full: %+v", res)
	}
	files := filesByPath(items)
	for p, c := range content {
		it, ok := files[p]
		if !ok {
			t.Fatalf("%s missing; have %v", p, files)
		}
		if !bytes.Equal(f.read(it), c) {
			t.Errorf("%s content differs", p)
		}
		var fm FileMeta
		if json.Unmarshal(it.Meta, &fm); fm.QuickXorHash == "" || fm.DriveItemID == "" {
			t.Errorf("%s meta %+v", p, fm)
		}
	}
	var rootMeta FileMeta
	if items[0].Kind != KindFolder || items[0].Path != "" || json.Unmarshal(items[0].Meta, &rootMeta) != nil || rootMeta.DeltaLink == "" || rootMeta.DriveID == "" {
		t.Fatalf("first item is not the root with the delta link: %+v", items[0])
	}
	if fo := folderItems(items); fo["docs/deep"].Name != "deep" {
		t.Errorf("folders %v", fo)
	}

	res, items = f.backup(BackupDrive, user, items)
	if res.Count != int64(len(content)) || res.Added != 0 || f.puts != 0 {
		t.Fatalf("no change: %+v, %d stored", res, f.puts)
	}

	// Added, changed, deleted file, deleted folder.
	f.fake.AddFile(user, "docs/new.txt", []byte("new"))
	f.fake.AddFile(user, "a.txt", []byte("alpha v2"))
	f.fake.DeleteFile(user, "photos/d.jpg")
	f.fake.DeleteFile(user, "photos/old")
	res, items = f.backup(BackupDrive, user, items)
	files = filesByPath(items)
	for _, gone := range []string{"photos/d.jpg", "photos/old/e.jpg", "photos/old/f.jpeg"} {
		if _, ok := files[gone]; ok {
			t.Errorf("%s still in the snapshot", gone)
		}
	}
	if !bytes.Equal(f.read(files["a.txt"]), []byte("alpha v2")) || !bytes.Equal(f.read(files["docs/new.txt"]), []byte("new")) {
		t.Error("changed or new file content wrong")
	}
	if res.Count != 4 || res.Added != 1 || res.Removed != 3 || f.puts != 2 {
		t.Fatalf("incremental: %+v, %d stored", res, f.puts)
	}

	// A reset (410) re-enumerates without downloading unchanged files.
	f.fake.InvalidateDeltaTokens(user)
	res, items2 := f.backup(BackupDrive, user, items)
	if res.Count != 4 || res.Added != 0 || res.Removed != 0 || f.puts != 0 {
		t.Fatalf("after reset: %+v, %d stored", res, f.puts)
	}
	if len(filesByPath(items2)) != 4 {
		t.Fatalf("after reset: %v", filesByPath(items2))
	}
}

func TestDriveHashMismatchFailsOnlyThatFile(t *testing.T) {
	f := newFixture(t, graphtest.Options{})
	user := f.fake.AddUser(graphtest.User{DisplayName: "Frank"})
	f.fake.AddFile(user, "good.txt", []byte("good"))
	f.fake.AddFile(user, "kept.txt", []byte("kept v1"))
	_, items := f.backup(BackupDrive, user, nil)
	f.fake.AddFile(user, "bad.txt", []byte("bad"))
	f.fake.CorruptHash(user, "bad.txt")
	f.fake.AddFile(user, "kept.txt", []byte("kept v2"))
	f.fake.CorruptHash(user, "kept.txt")
	res, items := f.backup(BackupDrive, user, items)
	if len(res.Failed) != 2 {
		t.Fatalf("failed %+v", res.Failed)
	}
	for _, fl := range res.Failed {
		if failureCode(fl.Err) != CodeHashMismatch {
			t.Errorf("%s: %v", fl.Ref, fl.Err)
		}
	}
	files := filesByPath(items)
	if _, ok := files["bad.txt"]; ok {
		t.Error("a file failing its hash is in the snapshot")
	}
	if !bytes.Equal(f.read(files["kept.txt"]), []byte("kept v1")) {
		t.Error("the previous version of a failing file was not kept")
	}
	if !bytes.Equal(f.read(files["good.txt"]), []byte("good")) {
		t.Error("good file")
	}
}

func TestDriveExpiredDownloadURLIsRefreshed(t *testing.T) {
	f := newFixture(t, graphtest.Options{DownloadURLLifetime: 100 * time.Millisecond})
	user := f.fake.AddUser(graphtest.User{DisplayName: "Gina"})
	f.fake.AddFile(user, "x.txt", []byte("x content"))
	f.fake.AddFile(user, "dir/y.txt", []byte("y content"))
	var once sync.Map
	testHookBeforeDownload = func() {
		if _, done := once.LoadOrStore("slept", true); !done {
			time.Sleep(300 * time.Millisecond)
		}
	}
	defer func() { testHookBeforeDownload = nil }()
	FetchWorkers = 1
	defer func() { FetchWorkers = 4 }()
	res, items := f.backup(BackupDrive, user, nil)
	if res.Count != 2 || len(res.Failed) != 0 {
		t.Fatalf("%+v", res)
	}
	if got := string(f.read(filesByPath(items)["x.txt"])); !strings.HasPrefix(got, "x") {
		t.Fatalf("x.txt = %q", got)
	}
}
