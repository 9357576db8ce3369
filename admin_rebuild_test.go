package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"backstop/app"
	"backstop/app/blobstore"
	"backstop/app/blobstore/s3backend/s3test"
	"backstop/app/webhooks"
	"backstop/store"
)

// backupInto stores one snapshot of two items for a new tenant in dataDir's
// blob store, on its default target or, with s3 set, on a new S3 target
// the tenant is placed on. It returns the tenant id, snapshot id and items.
func backupInto(t *testing.T, dataDir string, s3 *s3test.Server) (string, string, map[string][]byte) {
	t.Helper()
	ctx := context.Background()
	cfg := app.DefaultConfig()
	cfg.DataDir = dataDir
	db, err := store.Open(ctx, filepath.Join(dataDir, "backstop.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	box, err := webhooks.OpenSecretBox(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	storage, blobs, err := mountStorage(db, box, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := storage.EnsureDefault(ctx); err != nil {
		t.Fatal(err)
	}
	tn := &app.Tenant{Name: "Acme Dental"}
	if err := db.CreateTenant(ctx, tn); err != nil {
		t.Fatal(err)
	}
	if s3 != nil {
		c := s3.Config()
		_, err := storage.Create(ctx, app.StorageTargetSpec{Name: "S3", Kind: app.StorageKindS3, TenantIDs: []string{tn.ID},
			S3: app.S3Settings{Endpoint: c.Endpoint, Bucket: c.Bucket, AccessKeyID: c.AccessKeyID,
				SecretAccessKey: c.SecretAccessKey, PathStyle: true, TLS: false}})
		if err != nil {
			t.Fatal(err)
		}
	}
	items := map[string][]byte{"INBOX/1": []byte("Subject: hello\r\n\r\nhi\r\n"), "INBOX/2": bytes.Repeat([]byte("attachment "), 50000)}
	w, err := blobs.NewWriter(ctx, tn.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var manifest []blobstore.Item
	for id, data := range items {
		c, err := w.PutItem(ctx, bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		manifest = append(manifest, blobstore.Item{ID: id, Kind: "message", Path: "INBOX", Name: id, Content: c})
	}
	snap, err := w.Commit(ctx, blobstore.SnapshotSpec{ProtectedObjectID: "po_test"}, func(yield func(blobstore.Item) error) error {
		for _, m := range manifest {
			if err := yield(m); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tn.ID, snap.ID, items
}

// checkRebuilt opens dataDir's catalogue and reads every item of the
// snapshot back through the blob store.
func checkRebuilt(t *testing.T, dataDir, tenantID, snapshotID string, want map[string][]byte) {
	t.Helper()
	ctx := context.Background()
	cfg := app.DefaultConfig()
	cfg.DataDir = dataDir
	db, err := store.Open(ctx, filepath.Join(dataDir, "backstop.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tn, err := db.Tenant(ctx, tenantID)
	if err != nil || tn.Name != "Acme Dental" {
		t.Fatalf("tenant after rebuild: %+v %v", tn, err)
	}
	box, _ := webhooks.OpenSecretBox(dataDir)
	_, blobs, err := mountStorage(db, box, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	err = blobs.Items(ctx, snapshotID, func(it blobstore.Item) error {
		r, err := blobs.Open(ctx, tenantID, it.Content)
		if err != nil {
			return err
		}
		got, err := io.ReadAll(r)
		if err != nil || !bytes.Equal(got, want[it.ID]) {
			t.Fatalf("%s after rebuild: %v", it.ID, err)
		}
		n++
		return nil
	})
	if err != nil || n != len(want) {
		t.Fatalf("snapshot %s after rebuild: %d items, %v", snapshotID, n, err)
	}
}

func TestRebuildCatalogueFromTheLocalTarget(t *testing.T) {
	dir := t.TempDir()
	tenantID, snapID, items := backupInto(t, dir, nil)
	// The database is lost; the blobs directory and the appliance key remain.
	for _, f := range []string{"backstop.db", "backstop.db-wal", "backstop.db-shm"} {
		os.Remove(filepath.Join(dir, f))
	}
	stdout, stderr, err := runCommand([]string{"admin", "rebuild-catalogue", "--data-dir", dir}, nil)
	if err != nil {
		t.Fatalf("rebuild-catalogue: %v\n%s", err, stderr)
	}
	if !strings.Contains(stdout, "1 tenants") || !strings.Contains(stdout, "1 snapshots") {
		t.Fatalf("rebuild-catalogue printed %q", stdout)
	}
	checkRebuilt(t, dir, tenantID, snapID, items)
	// Again: nothing changes, nothing fails.
	if _, stderr, err := runCommand([]string{"admin", "rebuild-catalogue", "--data-dir", dir}, nil); err != nil {
		t.Fatalf("second rebuild: %v\n%s", err, stderr)
	}
	checkRebuilt(t, dir, tenantID, snapID, items)
}

func TestRebuildCatalogueFromS3OnANewMachine(t *testing.T) {
	srv := s3test.StartVersity(t)
	old := t.TempDir()
	tenantID, snapID, items := backupInto(t, old, srv)
	// A new machine: only the appliance key file is carried over.
	dir := t.TempDir()
	key, err := os.ReadFile(filepath.Join(old, blobstore.KeyFileName))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, blobstore.KeyFileName), key, 0o600)
	c := srv.Config()
	vars := map[string]string{"AWS_ACCESS_KEY_ID": c.AccessKeyID, "AWS_SECRET_ACCESS_KEY": c.SecretAccessKey}
	stdout, stderr, err := runCommand([]string{"admin", "rebuild-catalogue", "--data-dir", dir, "--s3-endpoint", c.Endpoint,
		"--s3-bucket", c.Bucket, "--s3-path-style", "--s3-no-tls"}, vars)
	if err != nil {
		t.Fatalf("rebuild-catalogue: %v\n%s", err, stderr)
	}
	if !strings.Contains(stdout, "1 snapshots") || strings.Contains(stdout+stderr, c.SecretAccessKey) {
		t.Fatalf("rebuild-catalogue printed %q %q", stdout, stderr)
	}
	checkRebuilt(t, dir, tenantID, snapID, items)

	// A wrong key file is refused with a clear message.
	other := t.TempDir()
	os.WriteFile(filepath.Join(other, blobstore.KeyFileName), bytes.Repeat([]byte{1}, 32), 0o600)
	_, stderr, err = runCommand([]string{"admin", "rebuild-catalogue", "--data-dir", other, "--s3-endpoint", c.Endpoint,
		"--s3-bucket", c.Bucket, "--s3-path-style", "--s3-no-tls"}, vars)
	if err == nil || !strings.Contains(stderr, "does not open with this appliance key") {
		t.Fatalf("rebuild with another appliance key: %v %q", err, stderr)
	}
}
