package s3backend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"backstop/app/blobstore"
)

// Create implements blobstore.Backend with one PutObject carrying
// If-None-Match: * (create-only: an existing name answers 412, or 409
// ConditionalRequestConflict while a competing create is in flight; both
// are blobstore.ErrExists and leave the existing object as it was),
// Content-Length and a CRC32 checksum the server verifies before it
// commits. S3 commits a PUT whole or not at all, so a failed Create leaves
// nothing.
//
// How the body travels, chosen for the least memory (packs are up to
// 32 MiB; nothing here holds a whole object in memory):
//
//   - r is an io.Seeker (bytes.Reader, *os.File): its remaining length is
//     checked against size first, then the SDK reads it twice, once for
//     the checksum (and over plain http the SigV4 payload hash) and once
//     to send it. A transient failure is retried from the start.
//   - r is a stream, over https: sent as it is read, with the CRC32 as an
//     aws-chunked trailer (unsigned payload, as TLS already protects it).
//     A stream cannot be rewound, so such a Create is not retried.
//   - r is a stream, over plain http: the SDK needs the checksum in a
//     header before the body, so the stream is first spooled to a
//     temporary file in Config.SpoolDir (disk, not memory), then sent as a
//     seekable body.
//
// A reader that yields fewer or more than size bytes, or a context that
// ends while the body is read, fails the Create before the last byte
// leaves, so the server never commits it. (A context that ends after the
// last byte left may fail a Create that the server still commits.)
func (b *Backend) Create(ctx context.Context, name string, r io.Reader, size int64) error {
	key, err := b.key(name)
	if err != nil {
		return err
	}
	if size < 0 {
		return fmt.Errorf("%s: negative size %d", name, size)
	}
	var optFns []func(*s3.Options)
	var exact *exactReader
	var body io.Reader
	switch s, seekable := r.(io.Seeker); {
	case size == 0:
		if _, err := (&exactReader{r: r}).Read(nil); err != io.EOF {
			return fmt.Errorf("%s: %w", name, err)
		}
		body = bytes.NewReader(nil)
	case seekable:
		if err := checkRemaining(s, size); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		body = ctxReadSeeker{ctxReader{ctx, r}, s}
	case b.tls:
		exact = &exactReader{r: ctxReader{ctx, r}, left: size}
		body = exact
		optFns = append(optFns, func(o *s3.Options) { o.Retryer = retry.AddWithMaxAttempts(o.Retryer, 1) })
	default:
		f, err := b.spool(ctxReader{ctx, r}, size)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		defer func() {
			f.Close()
			os.Remove(f.Name())
		}()
		body = ctxReadSeeker{ctxReader{ctx, f}, f}
	}
	_, err = b.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:            aws.String(b.bucket),
		Key:               aws.String(key),
		Body:              body,
		ContentLength:     aws.Int64(size),
		IfNoneMatch:       aws.String("*"),
		ChecksumAlgorithm: types.ChecksumAlgorithmCrc32,
	}, optFns...)
	if err == nil {
		return nil
	}
	if exact != nil && exact.err != nil {
		return fmt.Errorf("%s: %w", name, exact.err)
	}
	if code, status := errorCode(err); status == http.StatusPreconditionFailed || code == "PreconditionFailed" ||
		code == "ConditionalRequestConflict" {
		return fmt.Errorf("%s on %s: %w", name, b, blobstore.ErrExists)
	}
	return b.wrap(ctx, "writing", name, err)
}

// PlainPut stores data as key (under the prefix) with a bare PutObject:
// the same client, checksum and retries as Create, but no If-None-Match and
// no size checks. It is a benchmark and diagnostic aid (the baseline that
// Create's overhead is measured against), never a way to write data.
func (b *Backend) PlainPut(ctx context.Context, key string, data []byte) error {
	k, err := b.key(key)
	if err != nil {
		return err
	}
	_, err = b.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:            aws.String(b.bucket),
		Key:               aws.String(k),
		Body:              bytes.NewReader(data),
		ContentLength:     aws.Int64(int64(len(data))),
		ChecksumAlgorithm: types.ChecksumAlgorithmCrc32,
	})
	if err != nil {
		return b.wrap(ctx, "writing", key, err)
	}
	return nil
}

// checkRemaining makes sure s has exactly size bytes left, and leaves it
// where it was.
func checkRemaining(s io.Seeker, size int64) error {
	cur, err := s.Seek(0, io.SeekCurrent)
	if err != nil {
		return err
	}
	end, err := s.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	if _, err := s.Seek(cur, io.SeekStart); err != nil {
		return err
	}
	if end-cur != size {
		return fmt.Errorf("the reader holds %d bytes, expected %d", end-cur, size)
	}
	return nil
}

// spool copies exactly size bytes of r into a new temporary file, rewound.
func (b *Backend) spool(r io.Reader, size int64) (*os.File, error) {
	f, err := os.CreateTemp(b.spoolDir, "backstop-s3-spool-*")
	if err != nil {
		return nil, fmt.Errorf("spooling the upload: %w", err)
	}
	exact := &exactReader{r: r, left: size}
	_, err = io.Copy(f, exact)
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		if exact.err != nil {
			return nil, exact.err
		}
		return nil, fmt.Errorf("spooling the upload: %w", err)
	}
	return f, nil
}

var errSizeMismatch = errors.New("size mismatch")

// exactReader passes on exactly left bytes of r. It fails if r ends early,
// and, before handing out the last bytes, if r holds more: so an HTTP body
// that is not the announced size is cut short and never committed.
type exactReader struct {
	r     io.Reader
	left  int64
	read  int64
	ended bool // r was seen to hold no more
	err   error
}

// checkEnd fails if r has a byte beyond the announced size.
func (e *exactReader) checkEnd() error {
	if e.ended {
		return nil
	}
	var extra [1]byte
	if m, _ := io.ReadFull(e.r, extra[:]); m > 0 {
		e.err = fmt.Errorf("%w: the reader holds more than the %d bytes announced", errSizeMismatch, e.read)
		return e.err
	}
	e.ended = true
	return nil
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	if e.left == 0 {
		if err := e.checkEnd(); err != nil {
			return 0, err
		}
		return 0, io.EOF
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.r.Read(p)
	e.left -= int64(n)
	e.read += int64(n)
	switch {
	case e.left == 0:
		if err := e.checkEnd(); err != nil {
			return 0, err
		}
		return n, nil
	case err == io.EOF:
		e.err = fmt.Errorf("%w: the reader ended after %d of %d bytes", errSizeMismatch, e.read, e.read+e.left)
		return 0, e.err
	}
	return n, err
}

// ctxReader stops a body as soon as its context ends, so the transport
// aborts the request instead of finishing it (cancellation alone is
// asynchronous and may let the rest of a body go out).
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// ctxReadSeeker is a ctxReader that the SDK can still rewind.
type ctxReadSeeker struct {
	ctxReader
	s io.Seeker
}

func (c ctxReadSeeker) Seek(offset int64, whence int) (int64, error) { return c.s.Seek(offset, whence) }
