package s3backend_test

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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

// TestConformanceVersityVirtualHost covers virtual-host addressing: the
// bucket travels in the host name (bucket.s3.backstop.test), as AWS and
// most hosted S3 services expect.
func TestConformanceVersityVirtualHost(t *testing.T) {
	srv := s3test.StartVersityVirtualHost(t)
	cfg := srv.VirtualHostConfig()
	var hosts []string
	var mu sync.Mutex
	inner := cfg.HTTPClient.Transport
	cfg.HTTPClient.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		hosts = append(hosts, r.URL.Host)
		mu.Unlock()
		return inner.RoundTrip(r)
	})
	backendtest.Run(t, func(t *testing.T) blobstore.Backend { return open(t, cfg) })
	mu.Lock()
	defer mu.Unlock()
	want := srv.Bucket + "." + s3test.VirtualDomain
	for _, h := range hosts {
		if !strings.HasPrefix(h, want) {
			t.Fatalf("a request went to %q, not the bucket's virtual host %s", h, want)
		}
	}
	if len(hosts) == 0 {
		t.Fatal("no request was made")
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
