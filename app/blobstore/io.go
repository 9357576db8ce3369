package blobstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
)

func randRead(b []byte) {
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
}

func createBytes(ctx context.Context, b Backend, name string, data []byte) error {
	return b.Create(ctx, name, bytes.NewReader(data), int64(len(data)))
}

// readAll reads a whole object (length < 0) or a range of at most limit
// bytes. A range is read into one buffer of its exact size.
func readAll(ctx context.Context, b Backend, name string, offset, length, limit int64) ([]byte, error) {
	r, err := b.Open(ctx, name, offset, length)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if length >= 0 {
		if length > limit {
			return nil, fmt.Errorf("%s: larger than %d bytes", name, limit)
		}
		data := make([]byte, length)
		if n, err := io.ReadFull(r, data); err == io.ErrUnexpectedEOF || err == io.EOF {
			return nil, fmt.Errorf("%s: %w (read %d of %d bytes)", name, ErrCorrupt, n, length)
		} else if err != nil {
			return nil, err
		}
		return data, nil
	}
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, limit)
	}
	return data, nil
}

// hashWriter is a running SHA-256.
type hashWriter struct{ h hash.Hash }

func (w *hashWriter) Write(p []byte) {
	if w.h == nil {
		w.h = sha256.New()
	}
	w.h.Write(p)
}

func (w *hashWriter) hex() string {
	if w.h == nil {
		w.h = sha256.New()
	}
	return hex.EncodeToString(w.h.Sum(nil))
}
