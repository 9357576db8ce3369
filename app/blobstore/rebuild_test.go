package blobstore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"backstop/app"
	"backstop/app/blobstore"
	"backstop/store/storetest"
)

func TestRebuildCatalogueFromTargetAlone(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	a, b := randomBytes(500<<10), message(7, randomBytes(1<<20))
	s1 := f.backup("po_1", item{"a", a}, item{"b", b})
	s2 := f.backup("po_2", item{"b", b})
	// Garbage collection rewrites the index: rebuild must read it.
	f.store.ForgetSnapshots(ctx, f.tenant, []string{s1.ID})
	if _, err := f.store.CollectGarbage(ctx, f.tenant); err != nil {
		t.Fatal(err)
	}
	s3 := f.backup("po_1", item{"a", a}) // a pack no compacted index names yet

	// A new machine: an empty database, the same appliance key and target.
	fresh := storetest.Open(t, t.TempDir())
	rebuilt := f.newStore(fresh, f.key)
	var created []string
	st, err := rebuilt.Rebuild(ctx, "", f.local, func(ctx context.Context, id, name string) error {
		created = append(created, id+"="+name)
		return fresh.CreateTenant(ctx, &app.Tenant{ID: id, Name: name})
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.Tenants != 1 || st.Snapshots != 2 || len(st.Skipped) != 0 || len(created) != 1 || created[0] != f.tenant+"=Example" {
		t.Fatalf("rebuild = %+v, tenants created %v", st, created)
	}
	for _, sn := range []struct {
		id   string
		want map[string][]byte
	}{{s2.ID, map[string][]byte{"b": b}}, {s3.ID, map[string][]byte{"a": a}}} {
		snap, _, err := fresh.Snapshot(ctx, sn.id)
		if err != nil {
			t.Fatalf("snapshot %s not rebuilt: %v", sn.id, err)
		}
		if snap.TargetID != "st_local" || snap.Items != 1 {
			t.Fatalf("rebuilt snapshot %+v", snap)
		}
		err = rebuilt.Items(ctx, sn.id, func(it blobstore.Item) error {
			r, err := rebuilt.Open(ctx, f.tenant, it.Content)
			if err != nil {
				return err
			}
			got, err := io.ReadAll(r)
			if err != nil || !bytes.Equal(got, sn.want[it.ID]) {
				t.Fatalf("%s/%s after rebuild: %v", sn.id, it.ID, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Rebuilding twice changes nothing.
	if _, err := rebuilt.Rebuild(ctx, "", f.local, func(context.Context, string, string) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

func TestRebuildWithAnotherApplianceKeyFails(t *testing.T) {
	f := newFixture(t)
	f.backup("po_1", item{"a", randomBytes(1000)})
	otherKey, err := blobstore.LoadApplianceKey(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fresh := storetest.Open(t, t.TempDir())
	_, err = f.newStore(fresh, otherKey).Rebuild(context.Background(), "", f.local, func(ctx context.Context, id, name string) error {
		return fresh.CreateTenant(ctx, &app.Tenant{ID: id, Name: name})
	})
	if err == nil || !strings.Contains(err.Error(), "does not open with this appliance key") {
		t.Fatalf("rebuild with a wrong key: %v", err)
	}
}

func TestRebuildRefusesAForeignDirectory(t *testing.T) {
	dir := t.TempDir()
	l, _ := blobstore.NewLocal(dir)
	_, err := blobstore.ReadMarker(context.Background(), l)
	if err == nil || !strings.Contains(err.Error(), "holds no Backstop blob store") {
		t.Fatalf("marker of an empty directory: %v", err)
	}
}

func TestFullTargetFailsWithStorageFull(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.backup("po_1", item{"a", randomBytes(100)}) // marker and key written while there was space
	local, _ := blobstore.NewLocal(f.local.Root())
	f.targets.m["st_local"] = fullLocal{Backend: local}
	w, err := f.store.NewWriter(ctx, f.tenant)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var putErr error
	for range 20 {
		if _, putErr = w.PutItem(ctx, bytes.NewReader(randomBytes(200<<10))); putErr != nil {
			break
		}
	}
	if putErr == nil {
		putErr = w.Flush(ctx)
	}
	var fe *app.FailureError
	if !errors.As(putErr, &fe) || fe.Code != "storage.full" {
		t.Fatalf("write to a full target: %v, want storage.full", putErr)
	}
	if len(f.targets.failed) == 0 {
		t.Fatal("the target was not told of the failed write")
	}
	if tmp, _ := os.ReadDir(filepath.Join(f.local.Root(), "tmp")); len(tmp) != 0 {
		t.Fatalf("%d temporary files left after a full disk", len(tmp))
	}
	w.Close()
	if tmp, _ := os.ReadDir(filepath.Join(f.dir, "tmp")); len(tmp) != 0 {
		t.Fatalf("%d packs left in the spool directory", len(tmp))
	}
	if !strings.Contains(putErr.Error(), "writing a pack") {
		t.Fatalf("the pack upload did not meet the full disk: %v", putErr)
	}
}

// fullLocal is a local target whose disk has no space left: the file is
// written to the temporary directory and the write fails like ENOSPC. It
// hides the local target's spooling, so packs take the path S3 targets
// take (assembled in the store's TempDir, then copied by Create);
// TestRealFullDisk covers the spooling path on a real full file system.
type fullLocal struct{ blobstore.Backend }

func (l fullLocal) Create(ctx context.Context, name string, r io.Reader, size int64) error {
	return l.Backend.Create(ctx, name, &enospcReader{r: r, after: size / 2}, size)
}

type enospcReader struct {
	r     io.Reader
	after int64
}

func (e *enospcReader) Read(p []byte) (int, error) {
	if e.after <= 0 {
		return 0, syscall.ENOSPC
	}
	if int64(len(p)) > e.after {
		p = p[:e.after]
	}
	n, err := e.r.Read(p)
	e.after -= int64(n)
	return n, err
}
