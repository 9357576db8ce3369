package blobstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
)

// Errors a Backend reports, wrapped with the target's detail; test them with
// errors.Is. They decide the job failure code: ErrFull is storage.full,
// ErrUnreachable storage.unreachable (transient).
var (
	ErrNotFound    = errors.New("object not found")
	ErrExists      = errors.New("object already exists")
	ErrFull        = errors.New("storage target is full")
	ErrUnreachable = errors.New("storage target unreachable")
	ErrDenied      = errors.New("storage target refused the credentials or the bucket")
)

// Backend is one storage target's object space. Names are slash-separated
// keys without a leading slash. Objects are immutable: they are created once,
// read any number of times and deleted, never modified.
type Backend interface {
	// Create stores the size bytes of r as name, but only if no object of
	// that name exists (ErrExists otherwise: create-only, the If-None-Match
	// of S3). It returns once the object is durable; a failed Create leaves
	// no object and no temporary file behind.
	Create(ctx context.Context, name string, r io.Reader, size int64) error
	// Open reads length bytes of name from offset (length < 0: to the end).
	Open(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error)
	// Stat returns the size of name.
	Stat(ctx context.Context, name string) (int64, error)
	// List calls fn for every object whose name starts with prefix, in
	// lexical order of names. An error from fn stops the listing and is returned.
	List(ctx context.Context, prefix string, fn func(name string, size int64) error) error
	// Delete removes name; an absent object is not an error.
	Delete(ctx context.Context, name string) error
	// Space reports capacity and free bytes where the target can tell.
	Space(ctx context.Context) (Space, error)
	// String names the target for logs and errors; it never holds secrets.
	String() string
}

// Spooler is a Backend on a file system that takes a finished file of its
// own as an object without copying it (the local target): packs are
// assembled in SpoolFile and linked into place.
type Spooler interface {
	// SpoolFile returns a new temporary file on the target's file system.
	SpoolFile() (*os.File, error)
	// CreateFrom syncs and closes f (from SpoolFile) and makes it the
	// object name, create-only like Create. f is removed in every case.
	CreateFrom(ctx context.Context, name string, f *os.File) error
}

// Space is a target's capacity. Known is false where the target cannot
// say (S3): the numbers are then zero.
type Space struct {
	Known         bool
	CapacityBytes int64
	FreeBytes     int64
}

// Check proves a backend usable before it is trusted with data: it creates a
// probe object, reads it back, checks that a second create of the same name
// is refused (the create-only primitive packs rely on), and deletes it. The
// error says which step failed, in words fit for the person who configured
// the target.
func Check(ctx context.Context, b Backend) error {
	var nonce [12]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return err
	}
	name := "probe/" + hex.EncodeToString(nonce[:])
	body := []byte("backstop storage check " + name + "\n")
	if err := b.Create(ctx, name, bytes.NewReader(body), int64(len(body))); err != nil {
		return fmt.Errorf("write check failed: %w", err)
	}
	defer b.Delete(context.WithoutCancel(ctx), name)
	r, err := b.Open(ctx, name, 0, -1)
	if err != nil {
		return fmt.Errorf("read check failed: %w", err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if err != nil {
		return fmt.Errorf("read check failed: %w", err)
	}
	if !bytes.Equal(got, body) {
		return fmt.Errorf("read check failed: the target returned other bytes than were written")
	}
	err = b.Create(ctx, name, bytes.NewReader(body), int64(len(body)))
	if !errors.Is(err, ErrExists) {
		if err == nil {
			return fmt.Errorf("conditional create check failed: the target overwrote an existing object (it must honour If-None-Match: *)")
		}
		return fmt.Errorf("conditional create check failed: %w", err)
	}
	if err := b.Delete(ctx, name); err != nil {
		return fmt.Errorf("delete check failed: %w", err)
	}
	if _, err := b.Stat(ctx, name); !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("delete check failed: the probe object is still there")
	}
	return nil
}
