package s3backend_test

import (
	"bytes"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"backstop/app/blobstore"
	"backstop/app/blobstore/s3backend"
	"backstop/app/blobstore/s3backend/s3test"
)

func newBackend(t *testing.T, cfg s3backend.Config) *s3backend.Backend {
	t.Helper()
	b, err := s3backend.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkFails runs blobstore.Check and wants it to fail with sentinel and a
// message holding every one of words, and never the secret.
func checkFails(t *testing.T, b *s3backend.Backend, secret string, sentinel error, words ...string) error {
	t.Helper()
	err := blobstore.Check(t.Context(), b)
	if !errors.Is(err, sentinel) {
		t.Fatalf("Check: %v, want %v", err, sentinel)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Check error %q does not say %q", err, w)
		}
	}
	if strings.Contains(err.Error(), secret) || strings.Contains(b.String(), secret) {
		t.Errorf("the secret key shows in %q or %q", err, b)
	}
	t.Logf("Check: %v", err)
	return err
}

func TestVersityWrongCredentials(t *testing.T) {
	srv := s3test.StartVersity(t)

	cfg := srv.Config()
	cfg.SecretAccessKey = "not-the-secret-key-at-all"
	b := newBackend(t, cfg)
	checkFails(t, b, cfg.SecretAccessKey, blobstore.ErrDenied, "access key was refused", "secret access key")
	if _, err := b.Stat(t.Context(), "x"); !errors.Is(err, blobstore.ErrDenied) {
		t.Errorf("Stat with a wrong secret: %v, want ErrDenied", err)
	}
	if err := b.List(t.Context(), "", func(string, int64) error { return nil }); !errors.Is(err, blobstore.ErrDenied) {
		t.Errorf("List with a wrong secret: %v, want ErrDenied", err)
	}

	cfg = srv.Config()
	cfg.AccessKeyID = "nosuchaccesskey"
	checkFails(t, newBackend(t, cfg), cfg.SecretAccessKey, blobstore.ErrDenied, "access key was refused", "access key id")
}

func TestVersityWrongBucket(t *testing.T) {
	srv := s3test.StartVersity(t)
	cfg := srv.Config()
	cfg.Bucket = "no-such-bucket"
	b := newBackend(t, cfg)
	checkFails(t, b, cfg.SecretAccessKey, blobstore.ErrDenied, `bucket "no-such-bucket" does not exist`)
	err := b.List(t.Context(), "", func(string, int64) error { return nil })
	if !errors.Is(err, blobstore.ErrDenied) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("List on a missing bucket: %v, want ErrDenied saying it does not exist", err)
	}
}

// closedPort returns an address on 127.0.0.1 where nothing listens.
func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestUnreachableFailsFast(t *testing.T) {
	b := newBackend(t, s3backend.Config{Endpoint: closedPort(t), Bucket: "b", AccessKeyID: "a", SecretAccessKey: "s3cr3t-value", PathStyle: true})
	start := time.Now()
	checkFails(t, b, "s3cr3t-value", blobstore.ErrUnreachable, "could not reach", "connection refused")
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Check took %v to give up on a closed port, want a few seconds", d)
	}
}

func TestVersityOutage(t *testing.T) {
	srv := s3test.StartVersity(t)
	b := newBackend(t, srv.Config())
	data := []byte("written before the outage")
	if err := b.Create(t.Context(), "before", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}

	srv.Stop()
	start := time.Now()
	if err := b.Create(t.Context(), "during", bytes.NewReader(data), int64(len(data))); !errors.Is(err, blobstore.ErrUnreachable) {
		t.Fatalf("Create while stopped: %v, want ErrUnreachable", err)
	}
	if _, err := b.Open(t.Context(), "before", 0, -1); !errors.Is(err, blobstore.ErrUnreachable) {
		t.Fatalf("Open while stopped: %v, want ErrUnreachable", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("two calls took %v to fail on a stopped server, want a few seconds", d)
	}
	checkFails(t, b, srv.SecretKey, blobstore.ErrUnreachable, "write check failed", "could not reach")

	srv.Start()
	if err := blobstore.Check(t.Context(), b); err != nil {
		t.Fatalf("Check after the restart: %v", err)
	}
	if n, err := b.Stat(t.Context(), "before"); err != nil || n != int64(len(data)) {
		t.Fatalf("Stat after the restart: %d, %v", n, err)
	}
	if err := b.Create(t.Context(), "during", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("Create after the restart: %v (the failed one must have left nothing)", err)
	}
}
