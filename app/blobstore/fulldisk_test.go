package blobstore_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"backstop/app"
	"backstop/app/blobstore"
)

// TestRealFullDisk fills a real 3 MiB file system (a tmpfs mounted for the
// test; CI runs as root): the backup fails with storage.full, the target is
// told, no temporary file stays, and what was stored before still reads.
func TestRealFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI runs as root: this test mounts a small tmpfs")
		}
		t.Skip("needs root to mount a small tmpfs")
	}
	dir := filepath.Join(t.TempDir(), "tiny")
	os.MkdirAll(dir, 0o700)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })

	f := newFixture(t)
	local, err := blobstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	f.local = local
	f.targets.m["st_local"] = local
	before := randomBytes(500 << 10)
	snap := f.backup("po_1", item{"before", before})

	ctx := context.Background()
	w, err := f.store.NewWriter(ctx, f.tenant)
	if err != nil {
		t.Fatal(err)
	}
	var failure error
	for range 50 {
		if _, failure = w.PutItem(ctx, bytes.NewReader(randomBytes(300<<10))); failure != nil {
			break
		}
	}
	if failure == nil {
		failure = w.Flush(ctx)
	}
	w.Close()
	var fe *app.FailureError
	if !errors.As(failure, &fe) || fe.Code != "storage.full" || !errors.Is(failure, blobstore.ErrFull) {
		t.Fatalf("backup onto a full disk: %v, want storage.full", failure)
	}
	if len(f.targets.failed) == 0 {
		t.Fatal("the target was not told of the failed write")
	}
	if tmp, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(tmp) != 0 {
		t.Fatalf("%d temporary files left on the full disk", len(tmp))
	}
	got, err := f.read(f.tenant, f.items(snap.ID)["before"])
	if err != nil || !bytes.Equal(got, before) {
		t.Fatalf("data stored before the disk filled: %v", err)
	}
	// Garbage collection frees the packs of the failed backup.
	if _, err := f.store.CollectGarbage(ctx, f.tenant); err != nil {
		t.Fatal(err)
	}
	if sp, _ := local.Space(ctx); sp.FreeBytes < 2<<20 {
		t.Fatalf("%d bytes free after collecting the failed backup's packs", sp.FreeBytes)
	}
}
