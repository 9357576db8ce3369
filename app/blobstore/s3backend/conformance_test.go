package s3backend_test

import (
	"crypto/rand"
	"encoding/hex"
	"net/http/httptest"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"backstop/app/blobstore"
	"backstop/app/blobstore/backendtest"
	"backstop/app/blobstore/s3backend"
	"backstop/app/blobstore/s3backend/s3test"
)

// open returns a backend on cfg under a fresh key prefix, so each subtest
// of the suite sees an empty target in a shared bucket.
func open(t *testing.T, cfg s3backend.Config) blobstore.Backend {
	t.Helper()
	var nonce [6]byte
	rand.Read(nonce[:])
	cfg.Prefix = "suite/" + hex.EncodeToString(nonce[:])
	b, err := s3backend.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// startFake serves an in-process gofakes3 with one bucket on 127.0.0.1.
func startFake(t *testing.T) s3backend.Config {
	t.Helper()
	mem := s3mem.New()
	if err := mem.CreateBucket("fake"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(mem).Server())
	t.Cleanup(srv.Close)
	return s3backend.Config{
		Endpoint:        srv.URL,
		Bucket:          "fake",
		AccessKeyID:     "fake-access",
		SecretAccessKey: "fake-secret",
		PathStyle:       true,
	}
}

func TestConformanceGofakes3(t *testing.T) {
	cfg := startFake(t)
	backendtest.Run(t, func(t *testing.T) blobstore.Backend { return open(t, cfg) })
}

func TestConformanceVersity(t *testing.T) {
	srv := s3test.StartVersity(t)
	backendtest.Run(t, func(t *testing.T) blobstore.Backend { return open(t, srv.Config()) })
}

// TestConformanceVersityTLS covers the https path, where a streamed body
// goes out with a trailing checksum instead of being spooled.
func TestConformanceVersityTLS(t *testing.T) {
	srv := s3test.StartVersityTLS(t)
	backendtest.Run(t, func(t *testing.T) blobstore.Backend { return open(t, srv.Config()) })
}
