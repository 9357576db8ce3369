// Package backendtest is the conformance suite every blobstore.Backend
// passes: the same behaviour on a local directory, an in-process fake S3
// and a real S3 server, so the blob store above can rely on the contract
// rather than on one target's quirks.
package backendtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"backstop/app/blobstore"
)

// Run runs the suite. open returns an empty backend for each subtest (a
// new directory, bucket or key prefix); it registers its own cleanup.
func Run(t *testing.T, open func(t *testing.T) blobstore.Backend) {
	tests := []struct {
		name string
		fn   func(t *testing.T, b blobstore.Backend)
	}{
		{"CreateRead", testCreateRead},
		{"Empty", testEmpty},
		{"RangeRead", testRangeRead},
		{"List", testList},
		{"ListPages", testListPages},
		{"Delete", testDelete},
		{"CreateOnly", testCreateOnly},
		{"CreateOnlyRace", testCreateOnlyRace},
		{"NotFound", testNotFound},
		{"SizeMismatch", testSizeMismatch},
		{"ContextCancel", testContextCancel},
		{"Check", testCheck},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

func payload(n int) []byte {
	p := make([]byte, n)
	r := rand.NewChaCha8([32]byte{byte(n), byte(n >> 8), byte(n >> 16)})
	r.Read(p)
	return p
}

// stream hides any Seek method, as a pipe or a network body would.
type stream struct{ io.Reader }

func create(t *testing.T, b blobstore.Backend, name string, data []byte) {
	t.Helper()
	if err := b.Create(t.Context(), name, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("Create(%s): %v", name, err)
	}
}

func read(t *testing.T, b blobstore.Backend, name string, offset, length int64) []byte {
	t.Helper()
	r, err := b.Open(t.Context(), name, offset, length)
	if err != nil {
		t.Fatalf("Open(%s, %d, %d): %v", name, offset, length, err)
	}
	defer r.Close()
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("reading %s: %v", name, err)
	}
	return got
}

func mustNotExist(t *testing.T, b blobstore.Backend, name string) {
	t.Helper()
	if n, err := b.Stat(t.Context(), name); !errors.Is(err, blobstore.ErrNotFound) {
		t.Fatalf("Stat(%s) = %d, %v; want ErrNotFound (nothing left behind)", name, n, err)
	}
}

func list(t *testing.T, b blobstore.Backend, prefix string) (names []string, sizes []int64) {
	t.Helper()
	err := b.List(t.Context(), prefix, func(name string, size int64) error {
		names = append(names, name)
		sizes = append(sizes, size)
		return nil
	})
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return names, sizes
}

func testCreateRead(t *testing.T, b blobstore.Backend) {
	for _, size := range []int{1, 1000, 1 << 20} {
		data := payload(size)
		name := fmt.Sprintf("data/%02x/obj-%d", size%256, size)
		create(t, b, name, data)
		if got := read(t, b, name, 0, -1); !bytes.Equal(got, data) {
			t.Fatalf("%s: read %d bytes that differ from the %d written", name, len(got), len(data))
		}
		if n, err := b.Stat(t.Context(), name); err != nil || n != int64(size) {
			t.Fatalf("Stat(%s) = %d, %v; want %d", name, n, err, size)
		}
	}
	// A stream without Seek (a pipe, a network body) works the same.
	data := payload(300 << 10)
	if err := b.Create(t.Context(), "data/streamed", stream{bytes.NewReader(data)}, int64(len(data))); err != nil {
		t.Fatalf("Create from a stream: %v", err)
	}
	if got := read(t, b, "data/streamed", 0, -1); !bytes.Equal(got, data) {
		t.Fatal("streamed object reads back different bytes")
	}
}

func testEmpty(t *testing.T, b blobstore.Backend) {
	create(t, b, "empty", nil)
	if got := read(t, b, "empty", 0, -1); len(got) != 0 {
		t.Fatalf("empty object read %d bytes", len(got))
	}
	if n, err := b.Stat(t.Context(), "empty"); err != nil || n != 0 {
		t.Fatalf("Stat(empty) = %d, %v", n, err)
	}
}

func testRangeRead(t *testing.T, b blobstore.Backend) {
	data := payload(100_000)
	create(t, b, "r/obj", data)
	size := int64(len(data))
	for _, c := range []struct{ off, length int64 }{
		{0, 10}, {5, 100}, {12345, 54321}, {size - 10, -1}, {size - 10, 10}, {size - 1, 1}, {0, size}, {777, 0}, {50_000, -1},
	} {
		want := data[c.off:]
		if c.length >= 0 {
			want = want[:c.length]
		}
		if got := read(t, b, "r/obj", c.off, c.length); !bytes.Equal(got, want) {
			t.Errorf("Open(offset %d, length %d): got %d bytes, want %d (or other bytes)", c.off, c.length, len(got), len(want))
		}
	}
}

func testList(t *testing.T, b blobstore.Backend) {
	objects := map[string]int{"list/b/d": 4, "list/a": 1, "list/b/c": 3, "listx": 5, "other/z": 6, "list/b-": 2}
	for name, size := range objects {
		create(t, b, name, payload(size))
	}
	for _, c := range []struct {
		prefix string
		want   []string
	}{
		{"list/", []string{"list/a", "list/b-", "list/b/c", "list/b/d"}},
		{"list/b", []string{"list/b-", "list/b/c", "list/b/d"}},
		{"list", []string{"list/a", "list/b-", "list/b/c", "list/b/d", "listx"}},
		{"", []string{"list/a", "list/b-", "list/b/c", "list/b/d", "listx", "other/z"}},
		{"nothing/", nil},
	} {
		names, sizes := list(t, b, c.prefix)
		if fmt.Sprint(names) != fmt.Sprint(c.want) {
			t.Errorf("List(%q) = %q, want %q in this order", c.prefix, names, c.want)
			continue
		}
		for i, n := range names {
			if sizes[i] != int64(objects[n]) {
				t.Errorf("List(%q): %s has size %d, want %d", c.prefix, n, sizes[i], objects[n])
			}
		}
	}
	stop := errors.New("stop")
	calls := 0
	err := b.List(t.Context(), "list/", func(string, int64) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Errorf("List with a failing callback: %v after %d calls, want the callback's error after 1", err, calls)
	}
}

// testListPages lists more objects than an S3 page holds (1000).
func testListPages(t *testing.T, b blobstore.Backend) {
	const n = 1203
	var wg sync.WaitGroup
	var failed atomic.Value
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				name := fmt.Sprintf("pages/%05d", i)
				if err := b.Create(t.Context(), name, bytes.NewReader([]byte(name)), int64(len(name))); err != nil {
					failed.Store(err)
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := failed.Load(); err != nil {
		t.Fatalf("Create: %v", err)
	}
	names, _ := list(t, b, "pages/")
	if len(names) != n {
		t.Fatalf("List found %d objects, want %d", len(names), n)
	}
	for i, name := range names {
		if want := fmt.Sprintf("pages/%05d", i); name != want {
			t.Fatalf("List item %d is %s, want %s", i, name, want)
		}
	}
}

func testDelete(t *testing.T, b blobstore.Backend) {
	create(t, b, "del/obj", payload(10))
	create(t, b, "del/keep", payload(11))
	if err := b.Delete(t.Context(), "del/obj"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	mustNotExist(t, b, "del/obj")
	if _, err := b.Open(t.Context(), "del/obj", 0, -1); !errors.Is(err, blobstore.ErrNotFound) {
		t.Fatalf("Open after Delete: %v, want ErrNotFound", err)
	}
	if err := b.Delete(t.Context(), "del/obj"); err != nil {
		t.Fatalf("second Delete: %v, want nil (idempotent)", err)
	}
	if err := b.Delete(t.Context(), "del/never"); err != nil {
		t.Fatalf("Delete of a name never created: %v, want nil", err)
	}
	if names, _ := list(t, b, "del/"); fmt.Sprint(names) != "[del/keep]" {
		t.Fatalf("List after Delete = %q, want [del/keep]", names)
	}
	// The name is free again.
	create(t, b, "del/obj", payload(12))
}

func testCreateOnly(t *testing.T, b blobstore.Backend) {
	orig := payload(5000)
	create(t, b, "once", orig)
	for _, r := range []io.Reader{bytes.NewReader(payload(6000)), stream{bytes.NewReader(payload(6000))}} {
		err := b.Create(t.Context(), "once", r, 6000)
		if !errors.Is(err, blobstore.ErrExists) {
			t.Fatalf("second Create: %v, want ErrExists", err)
		}
	}
	if got := read(t, b, "once", 0, -1); !bytes.Equal(got, orig) {
		t.Fatalf("the refused Create changed the object (%d bytes now)", len(got))
	}
}

// testCreateOnlyRace creates one name from several goroutines at once:
// exactly one wins, the others get ErrExists.
func testCreateOnlyRace(t *testing.T, b blobstore.Backend) {
	const n = 6
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			data := payload(64<<10 + i)
			errs[i] = b.Create(t.Context(), "race", bytes.NewReader(data), int64(len(data)))
		})
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won >= 0:
			t.Fatalf("creates %d and %d both succeeded", won, i)
		case err == nil:
			won = i
		case !errors.Is(err, blobstore.ErrExists):
			t.Fatalf("create %d: %v, want ErrExists", i, err)
		}
	}
	if won < 0 {
		t.Fatal("no create succeeded")
	}
	if got := read(t, b, "race", 0, -1); !bytes.Equal(got, payload(64<<10+won)) {
		t.Fatal("the object is not the winner's bytes")
	}
}

func testNotFound(t *testing.T, b blobstore.Backend) {
	if _, err := b.Open(t.Context(), "missing/obj", 0, -1); !errors.Is(err, blobstore.ErrNotFound) {
		t.Errorf("Open: %v, want ErrNotFound", err)
	}
	if _, err := b.Open(t.Context(), "missing/obj", 10, 10); !errors.Is(err, blobstore.ErrNotFound) {
		t.Errorf("ranged Open: %v, want ErrNotFound", err)
	}
	mustNotExist(t, b, "missing/obj")
}

// testSizeMismatch: a reader with fewer or more bytes than announced fails
// the Create and leaves no object, seekable or not.
func testSizeMismatch(t *testing.T, b blobstore.Backend) {
	data := payload(40_000)
	for _, c := range []struct {
		name string
		r    io.Reader
		size int64
	}{
		{"short", bytes.NewReader(data), 40_001},
		{"long", bytes.NewReader(data), 39_999},
		{"short-stream", stream{bytes.NewReader(data)}, 40_001},
		{"long-stream", stream{bytes.NewReader(data)}, 39_999},
		{"long-empty", stream{bytes.NewReader(data)}, 0},
	} {
		name := "mismatch/" + c.name
		if err := b.Create(t.Context(), name, c.r, c.size); err == nil {
			t.Errorf("%s: Create of %d bytes announced as %d succeeded", c.name, len(data), c.size)
		}
		mustNotExist(t, b, name)
	}
	if names, _ := list(t, b, "mismatch/"); len(names) != 0 {
		t.Fatalf("failed creates left %q", names)
	}
	create(t, b, "mismatch/short", data)
}

// cancelReader cancels its context once half the data has been read.
type cancelReader struct {
	r      io.Reader
	left   int
	cancel context.CancelFunc
}

func (c *cancelReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		c.cancel()
	}
	n, err := c.r.Read(p)
	c.left -= n
	return n, err
}

func testContextCancel(t *testing.T, b blobstore.Backend) {
	data := payload(2 << 20)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := b.Create(ctx, "cancel/before", bytes.NewReader(data), int64(len(data))); !errors.Is(err, context.Canceled) {
		t.Errorf("Create with a cancelled context: %v, want context.Canceled", err)
	}
	mustNotExist(t, b, "cancel/before")
	if err := b.List(ctx, "", func(string, int64) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("List with a cancelled context: %v, want context.Canceled", err)
	}

	ctx, cancel = context.WithCancel(t.Context())
	defer cancel()
	r := &cancelReader{r: bytes.NewReader(data), left: len(data) / 2, cancel: cancel}
	if err := b.Create(ctx, "cancel/midway", stream{r}, int64(len(data))); err == nil {
		t.Errorf("Create cancelled half-way succeeded")
	}
	mustNotExist(t, b, "cancel/midway")
}

func testCheck(t *testing.T, b blobstore.Backend) {
	if err := blobstore.Check(t.Context(), b); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if names, _ := list(t, b, ""); len(names) != 0 {
		t.Fatalf("Check left %q behind", names)
	}
}
