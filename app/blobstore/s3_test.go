package blobstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/blobstore"
	"backstop/app/blobstore/s3backend"
	"backstop/app/blobstore/s3backend/s3test"
	"backstop/store/storetest"
)

// withS3 points the fixture's current target at a fresh bucket of a real
// versitygw and returns the server.
func withS3(t testing.TB, f *fixture) (*s3test.Server, *s3backend.Backend) {
	t.Helper()
	srv := s3test.StartVersity(t)
	b, err := s3backend.New(context.Background(), srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	f.targets.mu.Lock()
	f.targets.m["st_s3"] = b
	f.targets.cur = "st_s3"
	f.targets.mu.Unlock()
	return srv, b
}

func TestS3TargetRoundTripGarbageAndRebuild(t *testing.T) {
	f := newFixture(t)
	_, b := withS3(t, f)
	ctx := context.Background()
	att := randomBytes(2 << 20)
	var items []item
	for i := range 12 {
		items = append(items, item{name: fmt.Sprint(i), data: message(i, att)})
	}
	s1 := f.backup("po_1", items...)
	s2 := f.backup("po_1", items[:3]...)
	if err := f.store.ForgetSnapshots(ctx, f.tenant, []string{s1.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.CollectGarbage(ctx, f.tenant); err != nil {
		t.Fatal(err)
	}
	fresh := storetest.Open(t, t.TempDir())
	rebuilt := f.newStore(fresh, f.key)
	st, err := rebuilt.Rebuild(ctx, "", b, func(ctx context.Context, id, name string) error {
		return fresh.CreateTenant(ctx, &app.Tenant{ID: id, Name: name})
	})
	if err != nil || st.Snapshots != 1 || st.TargetID != "st_s3" {
		t.Fatalf("rebuild from S3: %+v %v", st, err)
	}
	err = rebuilt.Items(ctx, s2.ID, func(it blobstore.Item) error {
		r, err := rebuilt.Open(ctx, f.tenant, it.Content)
		if err != nil {
			return err
		}
		defer r.Close()
		var buf bytes.Buffer
		if _, err := buf.ReadFrom(r); err != nil {
			return err
		}
		var want []byte
		for _, x := range items {
			if x.name == it.ID {
				want = x.data
			}
		}
		if !bytes.Equal(buf.Bytes(), want) {
			return fmt.Errorf("item %s differs after rebuild", it.ID)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The S3 server stops in the middle of a backup: the backup fails with
// storage.unreachable (transient, so the runner retries it), nothing the
// catalogue names is missing, and once the server is back a new backup and
// a collection succeed and leave no half-written object referenced.
func TestS3OutageMidBackup(t *testing.T) {
	f := newFixture(t)
	srv, _ := withS3(t, f)
	ctx := context.Background()
	f.backup("po_1", item{"before", randomBytes(300 << 10)})

	w, err := f.store.NewWriter(ctx, f.tenant)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	var failure error
	for i := range 200 {
		if i == 5 {
			once.Do(srv.Stop)
		}
		if _, err := w.PutItem(ctx, bytes.NewReader(randomBytes(400<<10))); err != nil {
			failure = err
			break
		}
	}
	if failure == nil {
		failure = w.Flush(ctx)
	}
	w.Close()
	var fe *app.FailureError
	if !errors.As(failure, &fe) || fe.Code != "storage.unreachable" {
		t.Fatalf("backup during an outage: %v, want storage.unreachable", failure)
	}
	if code, ok := app.LookupFailureCode("storage.unreachable"); !ok || !code.Transient {
		t.Fatal("storage.unreachable must be transient so the runner retries")
	}
	if len(f.targets.failed) == 0 {
		t.Fatal("the target was not told of the failed write")
	}

	srv.Start()
	snap := f.backup("po_1", item{"after", randomBytes(300 << 10)})
	if _, err := f.store.CollectGarbage(ctx, f.tenant); err != nil {
		t.Fatal(err)
	}
	checkIntact(t, f, map[string]bool{snap.ID: true}, 0)
}

// BenchmarkS3StoreVsPlainPut writes the mail-like corpus into a versitygw
// target through the blob store (chunked, deduplicated, compressed,
// encrypted, packed), then PUTs the same corpus as plain objects, one per
// item and of the same sizes, with the same client and two requests in
// flight (as the writer has), in the same run:
//
//	go test ./app/blobstore -run '^$' -bench S3StoreVsPlainPut -benchtime 1x
func BenchmarkS3StoreVsPlainPut(b *testing.B) {
	corpus, size := benchCorpus(b)
	var files []string
	filepath.Walk(corpus, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	mb := float64(size) / (1 << 20)
	for range b.N {
		warmCache(corpus)
		f := newFixture(b)
		f.store = f.newStoreWithPacks(0) // production's pack size
		_, backend := withS3(b, f)
		ctx := context.Background()
		start := time.Now()
		w, err := f.store.NewWriter(ctx, f.tenant)
		if err != nil {
			b.Fatal(err)
		}
		parallel(b, files, func(p string) error {
			fh, err := os.Open(p)
			if err != nil {
				return err
			}
			defer fh.Close()
			_, err = w.PutItem(ctx, fh)
			return err
		})
		if err := w.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		w.Close()
		storeSecs := time.Since(start).Seconds()

		start = time.Now()
		parallel(b, files, func(p string) error {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return backend.PlainPut(ctx, "plain/"+filepath.Base(filepath.Dir(p))+"/"+filepath.Base(p), data)
		})
		plainSecs := time.Since(start).Seconds()
		b.ReportMetric(mb/storeSecs, "store-MiB/s")
		b.ReportMetric(mb/plainSecs, "plainput-MiB/s")
		b.ReportMetric(plainSecs/storeSecs, "ratio")
		b.Logf("corpus %d items, %.0f MiB: blob store %.1f s (%.0f MiB/s), plain PUT per item %.1f s (%.0f MiB/s): ratio %.2f",
			len(files), mb, storeSecs, mb/storeSecs, plainSecs, mb/plainSecs, plainSecs/storeSecs)
	}
}

// parallel calls fn for every file from two goroutines.
func parallel(b *testing.B, files []string, fn func(string) error) {
	work := make(chan string)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				if err := fn(p); err != nil {
					b.Error(err)
				}
			}
		}()
	}
	for _, p := range files {
		work <- p
	}
	close(work)
	wg.Wait()
}
