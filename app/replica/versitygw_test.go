package replica_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"backstop/app/replica"
	"backstop/e2e"
)

// versityBucket runs versitygw (a real S3 gateway that checks request
// signatures) on 127.0.0.1 over a directory with one bucket, and returns
// its endpoint. Credentials: access key "backstop", secret "s3cr/t+key".
func versityBucket(t *testing.T) string {
	t.Helper()
	bin := e2e.RequireTool(t, "versitygw", "versitygw (go install github.com/versity/versitygw/cmd/versitygw@latest)")
	t.Setenv("AWS_CA_BUNDLE", "") // Litestream's S3 client cannot use it
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "catalogue"), 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, "--port", addr, "posix", root)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY=backstop", "ROOT_SECRET_KEY=s3cr/t+key")
	cmd.Stdout, cmd.Stderr = io.Discard, tWriter{t} // stdout: one line a request
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		if res, err := http.Get("http://" + addr + "/"); err == nil {
			res.Body.Close()
			break
		}
		if time.Since(start) > 15*time.Second {
			t.Fatal("versitygw did not start listening")
		}
	}
	return "http://" + addr
}

// Credentials reach S3 from the URL and from the environment; wrong ones
// fail visibly. versitygw verifies every signature, unlike gofakes3.
func TestReplicateToVersityGW(t *testing.T) {
	endpoint := versityBucket(t)
	q := "?region=us-east-1&endpoint=" + endpoint
	cases := []struct {
		name, url string
		env       [2]string
		works     bool
	}{
		{"credentials in the URL", "s3://backstop:s3cr%2Ft+key@catalogue/in-url" + q, [2]string{}, true},
		{"credentials in the environment", "s3://catalogue/from-env" + q, [2]string{"backstop", "s3cr/t+key"}, true},
		{"wrong secret", "s3://backstop:wrong@catalogue/wrong" + q, [2]string{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("AWS_ACCESS_KEY_ID", tc.env[0])
			t.Setenv("AWS_SECRET_ACCESS_KEY", tc.env[1])
			path := filepath.Join(t.TempDir(), "backstop.db")
			db := openAppDB(t, path)
			r, err := replica.New(replica.Config{URL: tc.url, DBPath: path, Logger: testLogger(t), ShutdownSync: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Open(context.Background()); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec("INSERT INTO notes (body) VALUES ('signed')"); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				h := r.Health()
				if tc.works && h.ReplicaTXID > 0 && !h.LastSyncAt.IsZero() || !tc.works && h.Failing() {
					t.Logf("health: %+v", h)
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("health after 30 s: %+v", h)
				}
				time.Sleep(50 * time.Millisecond)
			}
			db.Close()
			r.Close(context.Background())
			notes, _, err := restoredNotes(t, tc.url)
			if tc.works && !slices.Equal(notes, []string{"signed"}) || !tc.works && err == nil {
				t.Errorf("restore: notes %q, err %v", notes, err)
			}
		})
	}
}
