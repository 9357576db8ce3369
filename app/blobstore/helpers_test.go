package blobstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"backstop/app"
	"backstop/app/blobstore"
	"backstop/store"
	"backstop/store/storetest"
)

// targets is a blobstore.Targets over named backends; ForTenant answers
// the current one.
type targets struct {
	mu     sync.Mutex
	m      map[string]blobstore.Backend
	cur    string
	failed []error
}

func (t *targets) ForTenant(_ context.Context, _ string) (string, blobstore.Backend, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cur, t.m[t.cur], nil
}

func (t *targets) Backend(_ context.Context, id string) (blobstore.Backend, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b, ok := t.m[id]
	if !ok {
		return nil, fmt.Errorf("no target %s", id)
	}
	return b, nil
}

func (t *targets) WriteFailed(_ string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failed = append(t.failed, err)
}

type fixture struct {
	t       testing.TB
	dir     string // data directory
	db      *store.DB
	store   *blobstore.Store
	targets *targets
	local   *blobstore.Local
	tenant  string
	key     *blobstore.ApplianceKey
}

// newFixture opens a real SQLite catalogue and a local target in a temp
// directory, with one tenant.
func newFixture(t testing.TB) *fixture {
	t.Helper()
	return openFixture(t, t.TempDir(), "")
}

// openFixture opens the fixture in dir; tenant "" creates one.
func openFixture(t testing.TB, dir, tenant string) *fixture {
	t.Helper()
	f := &fixture{t: t, dir: dir, db: storetest.Open(t, dir), tenant: tenant}
	if tenant == "" {
		f.tenant = storetest.Tenant(t, f.db, "Example")
	}
	var err error
	if f.local, err = blobstore.NewLocal(filepath.Join(dir, "blobs")); err != nil {
		t.Fatal(err)
	}
	f.targets = &targets{m: map[string]blobstore.Backend{"st_local": f.local}, cur: "st_local"}
	if f.key, err = blobstore.LoadApplianceKey(dir); err != nil {
		t.Fatal(err)
	}
	f.store = f.newStore(f.db, f.key)
	return f
}

func (f *fixture) newStore(db *store.DB, key *blobstore.ApplianceKey) *blobstore.Store {
	return f.storeWith(db, key, 1<<20)
}

// newStoreWithPacks replaces the fixture's store by one with production-sized packs.
func (f *fixture) newStoreWithPacks(packSize int) *blobstore.Store {
	return f.storeWith(f.db, f.key, packSize)
}

func (f *fixture) storeWith(db *store.DB, key *blobstore.ApplianceKey, packSize int) *blobstore.Store {
	spool := filepath.Join(f.dir, "tmp")
	os.MkdirAll(spool, 0o700)
	s, err := blobstore.New(blobstore.Config{Key: key, Catalog: db, Targets: f.targets, PackSize: packSize, TempDir: spool,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		TenantName: func(ctx context.Context, id string) (string, error) {
			tn, err := db.Tenant(ctx, id)
			if err != nil {
				return "", err
			}
			return tn.Name, nil
		}})
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

// item is test content with its manifest entry.
type item struct {
	name string
	data []byte
}

// backup stores items as one snapshot of object po and returns it.
func (f *fixture) backup(po string, items ...item) *app.Snapshot {
	f.t.Helper()
	ctx := context.Background()
	w, err := f.store.NewWriter(ctx, f.tenant)
	if err != nil {
		f.t.Fatal(err)
	}
	defer w.Close()
	var manifest []blobstore.Item
	for _, it := range items {
		c, err := w.PutItem(ctx, bytes.NewReader(it.data))
		if err != nil {
			f.t.Fatal(err)
		}
		manifest = append(manifest, blobstore.Item{ID: it.name, Kind: "message", Path: "INBOX", Name: it.name, Content: c})
	}
	snap, err := w.Commit(ctx, blobstore.SnapshotSpec{ProtectedObjectID: po}, func(yield func(blobstore.Item) error) error {
		for _, m := range manifest {
			if err := yield(m); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return snap
}

// items returns a snapshot's items by id.
func (f *fixture) items(snapshotID string) map[string]blobstore.Item {
	f.t.Helper()
	out := map[string]blobstore.Item{}
	err := f.store.Items(context.Background(), snapshotID, func(it blobstore.Item) error {
		out[it.ID] = it
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

// read returns an item's bytes as the store gives them.
func (f *fixture) read(tenant string, it blobstore.Item) ([]byte, error) {
	r, err := f.store.Open(context.Background(), tenant, it.Content)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// packFiles lists the pack files on the local target.
func (f *fixture) packFiles() []string {
	var out []string
	filepath.Walk(f.local.Root(), func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && strings.Contains(p, "/packs/") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// storedBytes sums the pack files on the local target.
func (f *fixture) storedBytes() int64 {
	var n int64
	for _, p := range f.packFiles() {
		fi, _ := os.Stat(p)
		n += fi.Size()
	}
	return n
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// message builds an RFC 822 message with a base64 attachment, different
// headers and boundaries each time, as mail clients send it.
func message(i int, attachment []byte) []byte {
	var b bytes.Buffer
	boundary := fmt.Sprintf("----=_Part_%d_%x", i, randomBytes(6))
	fmt.Fprintf(&b, "From: sender%d@example.com\r\nTo: user@example.com\r\nSubject: Report %d\r\nMessage-ID: <%x@example.com>\r\n", i, i, randomBytes(8))
	fmt.Fprintf(&b, "MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"%s\"\r\n\r\n--%s\r\nContent-Type: text/plain\r\n\r\nHello number %d, see attached.\r\n", boundary, boundary, i)
	if attachment != nil {
		fmt.Fprintf(&b, "--%s\r\nContent-Type: application/pdf; name=\"report.pdf\"\r\nContent-Transfer-Encoding: base64\r\n\r\n", boundary)
		enc := base64.StdEncoding.EncodeToString(attachment)
		for len(enc) > 76 {
			b.WriteString(enc[:76] + "\r\n")
			enc = enc[76:]
		}
		b.WriteString(enc + "\r\n")
	}
	fmt.Fprintf(&b, "--%s--\r\n", boundary)
	return b.Bytes()
}
