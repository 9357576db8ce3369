package archive_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"backstop/app/archive"
	"backstop/app/archive/chain"
	"backstop/app/blobstore"
	"backstop/store"
	"backstop/store/storetest"
)

// blobTargets is one local blob store target.
type blobTargets struct {
	mu sync.Mutex
	b  blobstore.Backend
}

func (t *blobTargets) ForTenant(context.Context, string) (string, blobstore.Backend, error) {
	return "st_local", t.b, nil
}
func (t *blobTargets) Backend(_ context.Context, id string) (blobstore.Backend, error) {
	if id != "st_local" {
		return nil, fmt.Errorf("no target %s", id)
	}
	return t.b, nil
}
func (t *blobTargets) WriteFailed(string, error) {}

type fixture struct {
	t      testing.TB
	dir    string
	db     *store.DB
	svc    *archive.Service
	blobs  *blobstore.Store
	tenant string
	signer *chain.Signer
	cancel context.CancelFunc
	done   chan struct{}
}

type opts struct {
	every    time.Duration
	maxBytes int64
	blobs    bool
	dir      string // reopen
	tenant   string
}

func newFixture(t testing.TB, o opts) *fixture {
	t.Helper()
	dir := o.dir
	if dir == "" {
		dir = t.TempDir()
	}
	f := &fixture{t: t, dir: dir, db: storetest.Open(t, dir), tenant: o.tenant}
	if f.tenant == "" {
		f.tenant = storetest.Tenant(t, f.db, "Example")
	}
	var err error
	if f.signer, err = chain.LoadOrCreateSigner(filepath.Join(dir, "archive.key"), "backstop.test"); err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if o.blobs {
		local, err := blobstore.NewLocal(filepath.Join(dir, "blobs"))
		if err != nil {
			t.Fatal(err)
		}
		key, err := blobstore.LoadApplianceKey(dir)
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Join(dir, "tmp"), 0o700)
		if f.blobs, err = blobstore.New(blobstore.Config{Key: key, Catalog: f.db, Targets: &blobTargets{b: local},
			TempDir: filepath.Join(dir, "tmp"), Logger: logger, ExtraRoots: f.db.ArchiveBlobRoots}); err != nil {
			t.Fatal(err)
		}
	}
	f.svc, err = archive.New(archive.Config{Store: f.db, Blobs: f.blobs, DataDir: dir, Signer: f.signer,
		Origin:     func(id string) string { return "backstop.test/archive/" + id },
		SMTPDomain: "journal.test", MaxBytes: o.maxBytes, CheckpointEvery: o.every, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel, f.done = cancel, make(chan struct{})
	go func() { defer close(f.done); f.svc.Run(ctx) }()
	t.Cleanup(f.stop)
	return f
}

func (f *fixture) stop() {
	if f.cancel != nil {
		f.cancel()
		<-f.done
		f.cancel = nil
	}
}

func (f *fixture) channel() *archive.Channel {
	f.t.Helper()
	c, err := f.svc.CreateChannel(context.Background(), archive.ChannelSpec{TenantID: f.tenant, Kind: archive.KindSMTPJournal, DisplayName: "Exchange"})
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

func (f *fixture) content(id string) []byte {
	f.t.Helper()
	r, err := f.svc.OpenContent(context.Background(), f.tenant, id)
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

func testMessage(i int, size int) []byte {
	head := fmt.Sprintf("From: Alice <alice@example.com>\r\nTo: bob@example.com\r\nSubject: test %d\r\nMessage-ID: <m%d@example.com>\r\nDate: Mon, 23 Nov 2026 10:00:00 +0000\r\n\r\n", i, i)
	b := []byte(head)
	line := []byte("The quick brown fox jumps over the lazy dog 0123456789 abcdefghij.\r\n")
	for len(b) < size {
		b = append(b, line...)
	}
	return b
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
