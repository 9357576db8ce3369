package resticrepo

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// chunkReader hands out its data in reads of random sizes, as a network
// connection does, and can end with an error instead of io.EOF.
type chunkReader struct {
	data []byte
	rng  *rand.Rand
	end  error
	read int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if r.read == len(r.data) {
		if r.end != nil {
			return 0, r.end
		}
		return 0, io.EOF
	}
	n := min(len(p), len(r.data)-r.read, 1+r.rng.IntN(96<<10))
	copy(p, r.data[r.read:r.read+n])
	r.read += n
	return n, nil
}

// openDirect creates a file for direct writes in a temp directory; where
// the file system has no direct I/O it opens it normally, and copyDirect
// must still store every byte.
func openDirect(t *testing.T, flag int) *os.File {
	t.Helper()
	name := filepath.Join(t.TempDir(), "upload")
	f, err := os.OpenFile(name, flag|os.O_CREATE|directFlag, 0o600)
	if errors.Is(err, syscall.EINVAL) {
		t.Logf("no direct I/O in %s: the page-cache fallback is what is tested", filepath.Dir(name))
		f, err = os.OpenFile(name, flag|os.O_CREATE, 0o600)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// Every size lands byte for byte with its SHA-256: empty, below, at and
// around a block, and several blocks with a partial tail.
func TestCopyDirectSizes(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, size := range []int{0, 1, directAlign - 1, directAlign, directBlock - 1, directBlock, directBlock + 1, 3*directBlock + 12345} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		f := openDirect(t, os.O_WRONLY)
		sum := sha256.New()
		n, err := copyDirect(f, sum, &chunkReader{data: data, rng: rng}, int64(size))
		if err != nil || n != int64(size) {
			t.Fatalf("size %d: copied %d, %v", size, n, err)
		}
		if got := sum.Sum(nil); !bytes.Equal(got, sha256Of(data)) {
			t.Fatalf("size %d: wrong hash", size)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		stored, err := os.ReadFile(f.Name())
		if err != nil || !bytes.Equal(stored, data) {
			t.Fatalf("size %d: stored %d bytes that differ (%v)", size, len(stored), err)
		}
	}
}

func sha256Of(b []byte) []byte { s := sha256.Sum256(b); return s[:] }

// A body over the limit is errTooLarge, a body cut short a readError, and
// a disk that fails stops the reading: what the client sends after a
// failed write is not read to the end.
func TestCopyDirectFailures(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	data := make([]byte, 5*directBlock+7)
	if _, err := copyDirect(openDirect(t, os.O_WRONLY), nil, &chunkReader{data: data, rng: rng}, int64(len(data)-1)); !errors.Is(err, errTooLarge) {
		t.Fatalf("one byte over the limit: %v, want errTooLarge", err)
	}
	var re readError
	if _, err := copyDirect(openDirect(t, os.O_WRONLY), nil, &chunkReader{data: data, rng: rng, end: io.ErrUnexpectedEOF}, int64(len(data))); !errors.As(err, &re) {
		t.Fatalf("a truncated body: %v, want a readError", err)
	}
	src := &chunkReader{data: make([]byte, 64*directBlock), rng: rng}
	_, err := copyDirect(openDirect(t, os.O_RDONLY), nil, src, int64(len(src.data))) // every write fails
	if err == nil || errors.As(err, &re) {
		t.Fatalf("writes to a read-only file: %v, want the write error", err)
	}
	if src.read > 4*directBlock {
		t.Fatalf("read %d bytes after the first write failed", src.read)
	}
}

// A direct write the file system refuses (here: a buffer off the
// alignment) goes through the page cache instead, and so does the rest.
func TestWriteDirectFallsBack(t *testing.T) {
	f := openDirect(t, os.O_WRONLY)
	buf := *directBuffers.Get().(*[]byte)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	misaligned := buf[1 : 1+8*directAlign]
	if err := writeDirect(f, misaligned); err != nil {
		t.Fatal(err)
	}
	if err := writeDirect(f, buf[:directAlign]); err != nil {
		t.Fatal(err)
	}
	stored, err := os.ReadFile(f.Name())
	if err != nil || !bytes.Equal(stored, append(append([]byte(nil), misaligned...), buf[:directAlign]...)) {
		t.Fatalf("stored %d bytes that differ (%v)", len(stored), err)
	}
}
