package blobstore_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"backstop/app/blobstore"
)

func TestGarbageCollectionFreesOnlyUnreferencedBlobs(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	x, y, z := randomBytes(600<<10), randomBytes(600<<10), randomBytes(600<<10)
	s1 := f.backup("po_1", item{"x", x}, item{"y", y})
	s2 := f.backup("po_1", item{"y", y}, item{"z", z})
	before := f.storedBytes()

	// Nothing is garbage while both snapshots exist.
	st, err := f.store.CollectGarbage(ctx, f.tenant)
	if err != nil {
		t.Fatal(err)
	}
	if st.PacksDeleted != 0 || f.storedBytes() != before {
		t.Fatalf("collection with every blob referenced deleted %d packs", st.PacksDeleted)
	}
	if err := f.store.ForgetSnapshots(ctx, f.tenant, []string{s1.ID}); err != nil {
		t.Fatal(err)
	}
	st, err = f.store.CollectGarbage(ctx, f.tenant)
	if err != nil {
		t.Fatal(err)
	}
	after := f.storedBytes()
	t.Logf("stats %+v; stored %d -> %d bytes", st, before, after)
	if st.BytesFreed < 500<<10 || after > before-500<<10 {
		t.Fatalf("forgetting the only snapshot holding x freed %d bytes (stored %d -> %d)", st.BytesFreed, before, after)
	}
	items := f.items(s2.ID)
	for name, want := range map[string][]byte{"y": y, "z": z} {
		got, err := f.read(f.tenant, items[name])
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s after collection: %v", name, err)
		}
	}
	pc, err := f.store.CheckPacks(ctx, f.tenant, time.Time{})
	if err != nil || len(pc.Damaged) != 0 {
		t.Fatalf("pack check after collection: %+v %v", pc, err)
	}
	// Forgetting the last snapshot frees everything.
	if err := f.store.ForgetSnapshots(ctx, f.tenant, []string{s2.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.CollectGarbage(ctx, f.tenant); err != nil {
		t.Fatal(err)
	}
	if n := len(f.packFiles()); n != 0 {
		t.Fatalf("%d packs left with no snapshot", n)
	}
}

// A backup that starts before a collection and references (by dedup) blobs
// of a forgotten snapshot must find them when it commits.
func TestCollectionDuringBackupKeepsWhatTheBackupUses(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	shared := randomBytes(400 << 10)
	old := f.backup("po_1", item{"shared", shared})
	if err := f.store.ForgetSnapshots(ctx, f.tenant, []string{old.ID}); err != nil {
		t.Fatal(err)
	}
	w, err := f.store.NewWriter(ctx, f.tenant)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	c, err := w.PutItem(ctx, bytes.NewReader(shared)) // dedup hit on the forgotten snapshot's blobs
	if err != nil {
		t.Fatal(err)
	}
	if s := w.Stats(); s.NewBlobs != 0 {
		t.Fatalf("the shared item was stored again (%d new blobs); the test needs a dedup hit", s.NewBlobs)
	}
	st, err := f.store.CollectGarbage(ctx, f.tenant)
	if err != nil {
		t.Fatal(err)
	}
	if st.PacksDeleted != 0 {
		t.Fatalf("collection deleted %d packs a running backup references", st.PacksDeleted)
	}
	snap, err := w.Commit(ctx, blobstore.SnapshotSpec{ProtectedObjectID: "po_1"}, func(yield func(blobstore.Item) error) error {
		return yield(blobstore.Item{ID: "shared", Kind: "file", Name: "shared", Content: c})
	})
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if _, err := f.store.CollectGarbage(ctx, f.tenant); err != nil {
		t.Fatal(err)
	}
	got, err := f.read(f.tenant, f.items(snap.ID)["shared"])
	if err != nil || !bytes.Equal(got, shared) {
		t.Fatalf("item committed during a collection unreadable after it: %v", err)
	}
}

// A writer that closed during a collection (between its marking and its
// decision) still protects what it referenced: the blobs are in the
// snapshot it committed, which the collection's snapshot scan may have
// missed.
func TestWriterClosingDuringCollectionIsProtected(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	shared := randomBytes(300 << 10)
	old := f.backup("po_1", item{"a", shared})
	f.store.ForgetSnapshots(ctx, f.tenant, []string{old.ID})
	// Many rounds with the collection and a backup racing.
	for range 5 {
		done := make(chan error, 1)
		go func() {
			_, err := f.store.CollectGarbage(ctx, f.tenant)
			done <- err
		}()
		snap := f.backup("po_1", item{"a", shared})
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if _, err := f.store.CollectGarbage(ctx, f.tenant); err != nil {
			t.Fatal(err)
		}
		got, err := f.read(f.tenant, f.items(snap.ID)["a"])
		if err != nil || !bytes.Equal(got, shared) {
			t.Fatalf("snapshot committed while collecting lost data: %v", err)
		}
		f.store.ForgetSnapshots(ctx, f.tenant, []string{snap.ID})
	}
}

func TestRepackMostlyDeadPacks(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	// Many small items share packs; forgetting most leaves packs mostly dead.
	var items []item
	for i := range 60 {
		items = append(items, item{name: string(rune('a' + i)), data: randomBytes(60 << 10)})
	}
	s1 := f.backup("po_1", items...)
	s2 := f.backup("po_2", items[:5]...)
	f.store.ForgetSnapshots(ctx, f.tenant, []string{s1.ID})
	before := f.storedBytes()
	st, err := f.store.CollectGarbage(ctx, f.tenant)
	if err != nil {
		t.Fatal(err)
	}
	after := f.storedBytes()
	t.Logf("stats %+v; stored %d -> %d", st, before, after)
	if st.BlobsRepacked == 0 || after > before/4 {
		t.Fatalf("mostly dead packs were not repacked: %+v, %d -> %d bytes", st, before, after)
	}
	got := f.items(s2.ID)
	for _, it := range items[:5] {
		data, err := f.read(f.tenant, got[it.name])
		if err != nil || !bytes.Equal(data, it.data) {
			t.Fatalf("%s after repack: %v", it.name, err)
		}
	}
}

func TestCollectionRecoversAfterCrashes(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	keep := f.backup("po_1", item{"k", randomBytes(200 << 10)})

	// A pack uploaded by a backup that died before recording it.
	orphan := filepath.Join(f.local.Root(), "tenants", f.tenant, "packs", "ab", "ab"+string(bytes.Repeat([]byte("0"), 62)))
	os.MkdirAll(filepath.Dir(orphan), 0o700)
	os.WriteFile(orphan, randomBytes(1000), 0o600)
	// A manifest stored by a backup that died before recording its row.
	lost := f.backup("po_1", item{"l", randomBytes(200 << 10)})
	if err := f.db.DeleteSnapshot(ctx, f.tenant, lost.ID); err != nil {
		t.Fatal(err)
	}
	st, err := f.store.CollectGarbage(ctx, f.tenant)
	if err != nil {
		t.Fatal(err)
	}
	if st.Recovered != 1 || st.OrphansDeleted != 1 {
		t.Fatalf("stats %+v: want the lost manifest recovered and the orphan deleted", st)
	}
	if _, err := os.Stat(orphan); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("orphan pack still on the target")
	}
	for _, sn := range []string{keep.ID, lost.ID} {
		for name, it := range f.items(sn) {
			if _, err := f.read(f.tenant, it); err != nil {
				t.Fatalf("%s/%s after recovery: %v", sn, name, err)
			}
		}
	}
}
