package s3backend_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"backstop/app/blobstore"
	"backstop/app/blobstore/s3backend"
)

// TestErrorStatuses maps what a server answers to the blobstore vocabulary,
// and counts the attempts: transient errors are retried three times in
// all, refusals not at all.
func TestErrorStatuses(t *testing.T) {
	for _, c := range []struct {
		status   int
		code     string
		want     error
		attempts int32
		says     string
	}{
		{507, "InsufficientStorage", blobstore.ErrFull, 1, "no space or quota"},
		{403, "QuotaExceeded", blobstore.ErrFull, 1, "QuotaExceeded"},
		{500, "InternalError", blobstore.ErrUnreachable, 3, "kept failing after 3 attempts"},
		{503, "ServiceUnavailable", blobstore.ErrUnreachable, 3, "ServiceUnavailable"},
		{403, "AccessDenied", blobstore.ErrDenied, 1, "lacks permission"},
		{403, "InvalidAccessKeyId", blobstore.ErrDenied, 1, "access key was refused"},
		{412, "PreconditionFailed", blobstore.ErrExists, 1, "already exists"},
		{409, "ConditionalRequestConflict", blobstore.ErrExists, 1, "already exists"},
	} {
		t.Run(fmt.Sprintf("%d-%s", c.status, c.code), func(t *testing.T) {
			var hits atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				w.Header().Set("Content-Type", "application/xml")
				w.WriteHeader(c.status)
				fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>test</Message></Error>`, c.code)
			}))
			defer srv.Close()
			b, err := s3backend.New(t.Context(), s3backend.Config{Endpoint: srv.URL, Bucket: "b", AccessKeyID: "a", SecretAccessKey: "s", PathStyle: true})
			if err != nil {
				t.Fatal(err)
			}
			err = b.Create(t.Context(), "obj", bytes.NewReader([]byte("data")), 4)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
				t.Errorf("Create: %v, want %v saying %q", err, c.want, c.says)
			}
			if n := hits.Load(); n != c.attempts {
				t.Errorf("%d attempts, want %d", n, c.attempts)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []s3backend.Config{
		{Endpoint: "127.0.0.1:1", AccessKeyID: "a", SecretAccessKey: "s"},
		{Endpoint: "127.0.0.1:1", Bucket: "b", AccessKeyID: "a"},
		{Bucket: "b", AccessKeyID: "a", SecretAccessKey: "s"},
		{Endpoint: "ftp://host", Bucket: "b", AccessKeyID: "a", SecretAccessKey: "s"},
		{Endpoint: "https://user:pw@host", Bucket: "b", AccessKeyID: "a", SecretAccessKey: "s"},
	} {
		if _, err := s3backend.New(t.Context(), cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
	b, err := s3backend.New(t.Context(), s3backend.Config{Endpoint: "s3.example.net", TLS: true, Bucket: "b", Prefix: "/tenants/x/", AccessKeyID: "a", SecretAccessKey: "topsecret"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), "s3:https://s3.example.net/b/tenants/x/"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
