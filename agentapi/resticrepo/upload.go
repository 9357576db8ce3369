package resticrepo

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"path"
	"sync"
	"syscall"
)

// copyBufferSize is the size of the pooled buffers uploads are copied
// through: large enough that a pack file takes few system calls, small
// enough that restic's handful of parallel uploads cost little memory.
const copyBufferSize = 256 << 10

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, copyBufferSize); return &b }}

// tempPrefix starts the name of every upload in progress. Listings skip
// these names (they are not 64 hex digits), and they never collide with a
// restic file name.
const tempPrefix = ".tmp-"

// Upload failures that are the client's fault, answered with their text.
var (
	errTooLarge   = errors.New("upload larger than the allowed file size")
	errTruncated  = errors.New("upload truncated: the body ended before its Content-Length, or could not be read")
	errHashDiffer = errors.New("upload content does not match its name (SHA-256)")
)

// readError marks a failure reading the request body, as opposed to
// writing the temp file.
type readError struct{ err error }

func (e readError) Error() string { return "read upload: " + e.err.Error() }
func (e readError) Unwrap() error { return e.err }

// confirmExisting answers an upload of a content-addressed file that is
// already stored. restic retries an upload whose answer it lost; since the
// name is the SHA-256 of the content, a body that hashes to the name is the
// very file already there, and accepting it changes nothing (200). Any
// other body is an overwrite attempt (403). Nothing is written.
func (h *Handler) confirmExisting(w http.ResponseWriter, r *http.Request, t target, st *repoState) {
	if r.ContentLength > h.opt.MaxFileBytes {
		st.count(opRefused, 0)
		http.Error(w, errTooLarge.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	sum := sha256.New()
	bufp := copyBuffers.Get().(*[]byte)
	n, err := io.CopyBuffer(sum, io.LimitReader(r.Body, h.opt.MaxFileBytes+1), *bufp)
	copyBuffers.Put(bufp)
	switch {
	case err != nil || (r.ContentLength >= 0 && n != r.ContentLength):
		st.count(opRefused, 0)
		http.Error(w, errTruncated.Error(), http.StatusBadRequest)
	case n > h.opt.MaxFileBytes:
		st.count(opRefused, 0)
		http.Error(w, errTooLarge.Error(), http.StatusRequestEntityTooLarge)
	case hex.EncodeToString(sum.Sum(nil)) != t.name:
		st.count(opRefused, 0)
		http.Error(w, fmt.Sprintf("append-only repository: %s already exists and cannot be overwritten", t.relPath()), http.StatusForbidden)
	default:
		w.WriteHeader(http.StatusOK)
	}
}

// save stores an upload under its final name, once. The order of checks is
// what makes refusals cheap and failures clean: existence (403) and size
// (413, quota 507) before a byte is read; then the body goes to a temp file
// with its SHA-256 computed on the way; only a complete, matching, fsynced
// file is renamed into place, and the rename is refused if another upload
// won the race for the name.
func (h *Handler) save(w http.ResponseWriter, r *http.Request, t target, st *repoState) {
	root, err := h.openRepo(t.endpoint)
	if err != nil {
		h.fsError(w, r, "save", err)
		return
	}
	defer root.Close()
	rel := t.relPath()
	refuseExisting := func() {
		st.count(opRefused, 0)
		http.Error(w, fmt.Sprintf("append-only repository: %s already exists and cannot be overwritten", rel), http.StatusForbidden)
	}
	if _, err := root.Lstat(rel); err == nil {
		if t.kind == "config" {
			refuseExisting()
		} else {
			h.confirmExisting(w, r, t, st)
		}
		return
	} else if !errors.Is(err, os.ErrNotExist) {
		h.fsError(w, r, "save", err)
		return
	}

	limit, quota := h.opt.MaxFileBytes, h.opt.QuotaBytes
	if r.ContentLength > limit {
		st.count(opRefused, 0)
		http.Error(w, errTooLarge.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	reserved, err := st.reserve(root, quota, max(r.ContentLength, 0))
	if errors.Is(err, errQuota) {
		st.count(opRefused, 0)
		http.Error(w, errQuota.Error(), http.StatusInsufficientStorage)
		return
	} else if err != nil {
		h.fsError(w, r, "quota", err)
		return
	}
	var stored int64
	defer func() { st.settle(reserved, stored) }()
	// An upload without Content-Length is bounded by what the quota still
	// allows as well; exceeding that bound is 507, not 413.
	quotaBound := false
	if r.ContentLength < 0 {
		if rem := st.remaining(quota); rem >= 0 && rem < limit {
			limit, quotaBound = rem, true
		}
	}

	tmp, size, err := h.writeTemp(root, t, r.Body, limit)
	if err != nil {
		var re readError
		switch {
		case errors.Is(err, errTooLarge) && quotaBound:
			st.count(opRefused, 0)
			http.Error(w, errQuota.Error(), http.StatusInsufficientStorage)
		case errors.Is(err, errTooLarge):
			st.count(opRefused, 0)
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		case errors.As(err, &re), errors.Is(err, errHashDiffer):
			st.count(opRefused, 0)
			http.Error(w, err.Error(), http.StatusBadRequest)
		default:
			h.fsError(w, r, "save", err)
		}
		return
	}
	if r.ContentLength >= 0 && size != r.ContentLength {
		_ = root.Remove(tmp)
		st.count(opRefused, 0)
		http.Error(w, errTruncated.Error(), http.StatusBadRequest)
		return
	}

	st.mu.Lock()
	_, err = root.Lstat(rel)
	if err == nil {
		// Another upload of the same name won; for a content-addressed file
		// this one's verified hash proves it carried the same bytes.
		st.mu.Unlock()
		_ = root.Remove(tmp)
		if t.kind == "config" {
			refuseExisting()
		} else {
			w.WriteHeader(http.StatusOK)
		}
		return
	}
	err = root.Rename(tmp, rel)
	st.mu.Unlock()
	if err != nil {
		_ = root.Remove(tmp)
		h.fsError(w, r, "save", err)
		return
	}
	// The rename is durable only once the directory entry is on disk.
	if err := syncDir(root, path.Dir(rel)); err != nil {
		h.fsError(w, r, "save", err)
		return
	}
	stored = size
	st.count(opWrite, size)
	w.WriteHeader(http.StatusOK)
}

// writeTemp copies body (at most limit bytes) into a new temp file beside
// the target, checks the SHA-256 of content-addressed files against their
// name, and fsyncs it. It returns the temp file's path inside root and its
// size. On any error the temp file is already removed.
func (h *Handler) writeTemp(root *os.Root, t target, body io.Reader, limit int64) (_ string, size int64, err error) {
	rel := t.relPath()
	dir := path.Dir(rel)
	var suffix [8]byte
	_, _ = rand.Read(suffix[:])
	tmp := path.Join(dir, tempPrefix+path.Base(rel)+"-"+hex.EncodeToString(suffix[:]))

	// Direct I/O where the file system has it (direct.go); not under a
	// test's wrapTemp, which needs the writes to go through it.
	direct := directFlag != 0 && h.wrapTemp == nil
	open := func() (*os.File, error) {
		if direct {
			f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|directFlag, 0o600)
			if !errors.Is(err, syscall.EINVAL) {
				return f, err
			}
			// No direct I/O here. Linux refuses O_DIRECT after creating
			// the file.
			direct = false
			_ = root.Remove(tmp)
		}
		return root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	}
	f, err := open()
	if errors.Is(err, os.ErrNotExist) && dir != "." {
		// A repository created by other means may lack a data/xx directory.
		if err = root.MkdirAll(dir, 0o700); err == nil {
			f, err = open()
		}
	}
	if err != nil {
		return "", 0, err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = root.Remove(tmp)
		}
	}()

	var sum hash.Hash
	if t.kind != "config" { // config is the one file not named by its hash
		sum = sha256.New()
	}
	if direct {
		size, err = copyDirect(f, sum, body, limit)
	} else {
		var dst io.Writer = &writebackWriter{f: f}
		if h.wrapTemp != nil {
			dst = h.wrapTemp(f)
		}
		size, err = copyUpload(dst, sum, body, limit)
	}
	if err != nil {
		return "", size, err
	}
	if sum != nil && hex.EncodeToString(sum.Sum(nil)) != t.name {
		return "", size, errHashDiffer
	}
	if err = f.Sync(); err != nil {
		return "", size, err
	}
	if err = f.Close(); err != nil {
		return "", size, err
	}
	return tmp, size, nil
}

// copyUpload copies src to dst and, when sum is not nil, into sum; more
// than limit bytes is errTooLarge. Read failures come back as readError so
// the caller can tell a bad client (400) from a bad disk (507/500).
func copyUpload(dst io.Writer, sum hash.Hash, src io.Reader, limit int64) (int64, error) {
	bp := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(bp)
	var written int64
	for {
		n, rerr := readUpload(src, *bp, sum, limit-written)
		if n > 0 {
			if _, werr := dst.Write((*bp)[:n]); werr != nil {
				return written, werr
			}
			written += int64(n)
		}
		if rerr == io.EOF {
			return written, nil
		} else if rerr != nil {
			return written, rerr
		}
	}
}

// readUpload reads once from src into buf and hashes what it read into sum
// (when not nil). It returns io.EOF at the end of src, errTooLarge when
// more than room bytes came, and any other failure as a readError.
func readUpload(src io.Reader, buf []byte, sum hash.Hash, room int64) (int, error) {
	n, err := src.Read(buf)
	if int64(n) > room {
		return 0, errTooLarge
	}
	if sum != nil {
		sum.Write(buf[:n])
	}
	switch {
	case err == nil, err == io.EOF:
		return n, err
	case errors.Is(err, io.ErrUnexpectedEOF):
		return n, readError{errTruncated}
	default:
		return n, readError{err}
	}
}

// writebackEvery is how many bytes of an upload are written before the
// kernel is asked to start writing them to disk.
const writebackEvery = 4 << 20

// writebackWriter writes to f and starts the writeback of every
// writebackEvery bytes as soon as they are written, so that a pack's bytes
// go to disk while the rest of it still arrives and the fsync at the end
// waits for the last few MiB instead of all of them.
type writebackWriter struct {
	f       *os.File
	written int64
	started int64 // bytes whose writeback has been started
}

func (w *writebackWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.written += int64(n)
	if w.written-w.started >= writebackEvery {
		startWriteback(w.f, w.started, w.written-w.started)
		w.started = w.written
	}
	return n, err
}

// syncDir fsyncs a directory inside root.
func syncDir(root *os.Root, dir string) error {
	d, err := root.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
