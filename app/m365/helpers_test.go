package m365

import (
	"backstop/app"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"backstop/app/blobstore"
	"backstop/app/graph"
	"backstop/app/graph/graphtest"
	"backstop/store/storetest"
)

// targets is a blobstore.Targets with one local backend.
type targets struct{ b blobstore.Backend }

func (t *targets) ForTenant(context.Context, string) (string, blobstore.Backend, error) {
	return "st_local", t.b, nil
}
func (t *targets) Backend(context.Context, string) (blobstore.Backend, error) { return t.b, nil }
func (t *targets) WriteFailed(string, error)                                  {}

var testTenant = graphtest.Tenant{AzureTenantID: "11111111-2222-3333-4444-555555555555",
	ClientID: "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", ClientSecret: "s3cret"}

// fixture is a real blob store (SQLite catalogue, local target) and a
// fake Graph with a client signed in to it.
type fixture struct {
	t      testing.TB
	dir    string
	store  *blobstore.Store
	tenant string
	fake   *graphtest.Server
	c      *graph.Client
	// puts is how many items the last backup stored (PutItem calls).
	puts int64
}

func newFixture(t testing.TB, opt graphtest.Options) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{t: t, dir: dir}
	f.store, f.tenant = openStore(t, dir)
	f.fake = graphtest.New(testTenant, opt)
	t.Cleanup(f.fake.Close)
	f.c = newClient(t, f.fake, testTenant.ClientSecret, nil)
	return f
}

func openStore(t testing.TB, dir string) (*blobstore.Store, string) {
	t.Helper()
	db := storetest.Open(t, dir)
	tenant := storetest.Tenant(t, db, "Example")
	local, err := blobstore.NewLocal(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	key, err := blobstore.LoadApplianceKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := blobstore.New(blobstore.Config{Key: key, Catalog: db, Targets: &targets{b: local},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return st, tenant
}

func newClient(t testing.TB, fake *graphtest.Server, secret string, limits *graph.Limits) *graph.Client {
	t.Helper()
	c, err := graph.New(graph.Config{GraphURL: fake.GraphURL(), LoginURL: fake.LoginURL(),
		AzureTenantID: testTenant.AzureTenantID, ClientID: testTenant.ClientID, ClientSecret: secret, Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type backupFunc func(ctx context.Context, c *graph.Client, userID string, w *blobstore.Writer, prev []blobstore.Item, progress Progress) (*BackupResult, error)

// backup runs one backup, commits it and returns the result and the
// manifest as read back from the store.
func (f *fixture) backup(fn backupFunc, user string, prev []blobstore.Item) (*BackupResult, []blobstore.Item) {
	f.t.Helper()
	res, items, st, err := backupInto(context.Background(), f.store, f.tenant, f.c, fn, user, prev)
	f.puts = st.Items
	if err != nil {
		f.t.Fatal(err)
	}
	return res, items
}

func backupInto(ctx context.Context, st *blobstore.Store, tenant string, c *graph.Client, fn backupFunc, user string, prev []blobstore.Item) (*BackupResult, []blobstore.Item, blobstore.WriterStats, error) {
	w, err := st.NewWriter(ctx, tenant)
	if err != nil {
		return nil, nil, blobstore.WriterStats{}, err
	}
	defer w.Close()
	res, err := fn(ctx, c, user, w, prev, nil)
	if err != nil {
		return nil, nil, w.Stats(), err
	}
	snap, err := w.Commit(ctx, blobstore.SnapshotSpec{ProtectedObjectID: "po_" + user}, func(yield func(blobstore.Item) error) error {
		for _, it := range res.Items {
			if err := yield(it); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, w.Stats(), err
	}
	var items []blobstore.Item
	err = st.Items(ctx, snap.ID, func(it blobstore.Item) error { items = append(items, it); return nil })
	return res, items, w.Stats(), err
}

func (f *fixture) opener() Opener {
	return func(ctx context.Context, c blobstore.Content) (io.ReadCloser, error) {
		return f.store.Open(ctx, f.tenant, c)
	}
}

func (f *fixture) read(it blobstore.Item) []byte {
	f.t.Helper()
	r, err := f.store.Open(context.Background(), f.tenant, it.Content)
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

// testMIME is a small message with a unique Message-ID.
func testMIME(i int, subject string) []byte {
	return []byte(fmt.Sprintf("From: Sender %d <s%d@example.com>\r\nTo: alice@example.com\r\nSubject: %s\r\n"+
		"Date: Mon, 02 Jan 2006 15:04:05 +0000\r\nMessage-ID: <test.%d.%s@example.com>\r\nMIME-Version: 1.0\r\n"+
		"Content-Type: text/plain; charset=utf-8\r\n\r\nHello %d, %s\r\n%s\r\n", i, i, subject, i, strings.ReplaceAll(subject, " ", "_"),
		i, subject, strings.Repeat("body line of text\r\n", 100+i%300)))
}

// messages are the manifest's message items by subject.
func messagesBySubject(items []blobstore.Item) map[string]blobstore.Item {
	out := map[string]blobstore.Item{}
	for _, it := range items {
		if it.Kind == KindMessage {
			out[it.Name] = it
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

var received = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

type appProgress = app.JobProgress
type failureError = app.FailureError

func encodeB64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

type blobstoreItem = blobstore.Item
