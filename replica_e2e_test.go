package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"backstop/store"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// runCommand runs one command line through run() with its own streams.
func runCommand(args []string, vars map[string]string) (stdout, stderr string, err error) {
	var out, errs bytes.Buffer
	e := env{stdin: strings.NewReader(""), stdout: &out, stderr: &errs, getenv: func(k string) string { return vars[k] }}
	err = run(context.Background(), args, e)
	return out.String(), errs.String(), err
}

// restoredTenant restores the catalogue from replicaURL into a new data
// directory and reports whether it holds the tenant.
func restoredTenant(t *testing.T, replicaURL, tenantID string) (dataDir string, found bool) {
	t.Helper()
	dataDir = t.TempDir()
	if _, _, err := runCommand([]string{"admin", "restore-catalogue", "--from", replicaURL, "--data-dir", dataDir}, nil); err != nil {
		return dataDir, false
	}
	db, err := store.Open(context.Background(), filepath.Join(dataDir, "backstop.db"))
	if err != nil {
		t.Fatalf("restored catalogue does not open: %v", err)
	}
	defer db.Close()
	_, err = db.Tenant(context.Background(), tenantID)
	return dataDir, err == nil
}

// TestReplicaCatalogueRecovery loses an appliance and brings its catalogue
// back on a "new machine" (a fresh data directory) from the replica: the
// real serve replicates, restore-catalogue restores, and a new serve on
// the restored directory answers an API key created on the old one.
func TestReplicaCatalogueRecovery(t *testing.T) {
	for name, replicaURL := range map[string]func(t *testing.T) string{
		"file": func(t *testing.T) string { return "file://" + filepath.Join(t.TempDir(), "replica") },
		"s3": func(t *testing.T) string {
			t.Setenv("AWS_CA_BUNDLE", "") // Litestream's S3 client cannot use it (docs/catalogue-recovery.md)
			backend := s3mem.New()
			if err := backend.CreateBucket("catalogue"); err != nil {
				t.Fatal(err)
			}
			ts := httptest.NewServer(gofakes3.New(backend).Server())
			t.Cleanup(ts.Close)
			return "s3://AKTEST:se%2Bcret@catalogue/backstop?region=us-east-1&endpoint=" + url.QueryEscape(ts.URL)
		},
	} {
		t.Run(name, func(t *testing.T) {
			u := replicaURL(t)
			a := startAppliance(t, map[string]string{"SERVICE_BACKUP_REPLICA_URL": u, "SERVICE_LOG_LEVEL": "info"})
			tenant := a.admin("", "create-tenant", "--name", "Acme")

			// While the appliance runs: the tenant becomes restorable within
			// the RPO (about a second), without waiting for a shutdown.
			committed := time.Now()
			for {
				if _, ok := restoredTenant(t, u, tenant); ok {
					t.Logf("tenant restorable from the live replica %v after create-tenant returned", time.Since(committed).Round(time.Millisecond))
					break
				}
				if time.Since(committed) > 30*time.Second {
					t.Fatalf("tenant not in the replica after 30 s; serve's log:\n%s", a.logs)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if !strings.Contains(a.logs.String(), "component=replica") || strings.Contains(a.logs.String(), "se%2Bcret") {
				t.Errorf("replica log lines missing or carrying the secret:\n%s", a.logs)
			}
			// The last write before a clean stop reaches the replica in
			// serve's shutdown (the final sync after the database closes).
			key := a.admin("", "create-key", "--tenant", tenant, "--name", "PSA", "--scopes", "status:read")
			a.shutdown()

			// The new machine: restore, then serve the restored directory.
			dataDir := t.TempDir()
			stdout, _, err := runCommand([]string{"admin", "restore-catalogue", "--from", u, "--data-dir", dataDir}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(stdout, "restored "+filepath.Join(dataDir, "backstop.db")) || !strings.Contains(stdout, "bytes") ||
				strings.Contains(stdout, "se%2Bcret") || strings.Count(stdout, "\n") != 1 {
				t.Errorf("restore-catalogue printed %q", stdout)
			}
			// The new appliance continues the same replica.
			b := startAppliance(t, map[string]string{"SERVICE_DATA_DIR": dataDir, "SERVICE_BACKUP_REPLICA_URL": u})
			b.expect(b.call("GET", "/api/v1/status", "", "Authorization", "Bearer "+key), 200, "")
			beta := b.admin("", "create-tenant", "--name", "Beta")
			// Not even --force replaces a database serve is using.
			_, _, err = runCommand([]string{"admin", "restore-catalogue", "--from", u, "--data-dir", dataDir, "--force"}, nil)
			if err == nil || !strings.Contains(err.Error(), "in use") {
				t.Errorf("forced restore beside a running serve: err = %v", err)
			}
			if left, _ := filepath.Glob(filepath.Join(dataDir, "backstop.db.re*")); len(left) > 0 {
				t.Errorf("the refused restore left %v", left)
			}
			b.shutdown()

			// A second restore into the same directory is refused ...
			before, _ := os.ReadFile(filepath.Join(dataDir, "backstop.db"))
			_, _, err = runCommand([]string{"admin", "restore-catalogue", "--from", u, "--data-dir", dataDir}, nil)
			if err == nil || exitCode(err) != 1 || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "already exists") {
				t.Errorf("restore over an existing database: err = %v", err)
			}
			if after, _ := os.ReadFile(filepath.Join(dataDir, "backstop.db")); !bytes.Equal(before, after) {
				t.Error("the refused restore changed the database")
			}
			// ... unless forced, which keeps the old one aside.
			stdout, _, err = runCommand([]string{"admin", "restore-catalogue", "--from", u, "--data-dir", dataDir, "--force"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			kept, _ := filepath.Glob(filepath.Join(dataDir, "backstop.db.replaced-*"))
			if len(kept) != 1 || !strings.Contains(stdout, "kept the previous database as "+kept[0]) {
				t.Errorf("forced restore: stdout %q, kept %v", stdout, kept)
			}
			if old, _ := os.ReadFile(kept[0]); !bytes.Equal(old, before) {
				t.Errorf("kept database (%d bytes) is not the previous one (%d bytes)", len(old), len(before))
			}
			for _, id := range []string{tenant, beta} {
				if _, ok := restoredTenantAt(t, dataDir, id); !ok {
					t.Errorf("forced restore lacks tenant %s (created on the old appliance, then on the new one); new appliance's log:\n%s", id, b.logs)
				}
			}
		})
	}
}

func restoredTenantAt(t *testing.T, dataDir, tenantID string) (string, bool) {
	t.Helper()
	db, err := store.Open(context.Background(), filepath.Join(dataDir, "backstop.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = db.Tenant(context.Background(), tenantID)
	return dataDir, err == nil
}

func TestRestoreCatalogueFailures(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct {
		args []string
		vars map[string]string
		code int
		want string
	}{
		"bad scheme":      {[]string{"--from", "ftp://KEY:topsecret@host/dir"}, nil, 1, "--from: unsupported scheme"},
		"not a URL":       {[]string{"--from", "bucket/path"}, nil, 1, "--from: needs a scheme"},
		"no --from":       {nil, nil, 2, "--from URL is required"},
		"empty replica":   {[]string{"--from", "file://" + filepath.Join(dir, "nothing")}, nil, 1, "no replica there"},
		"bad config key":  {[]string{"--from", "file:///x"}, map[string]string{"SERVICE_BACKUP_REPLICA_URL": "gs://b/p"}, 1, "config: backup.replica_url"},
		"unknown flag":    {[]string{"--form", "file:///x"}, nil, 2, "flag provided but not defined"},
		"extra arguments": {[]string{"--from", "file:///x", "now"}, nil, 2, "unexpected argument"},
	} {
		t.Run(name, func(t *testing.T) {
			dataDir := t.TempDir()
			args := append([]string{"admin", "restore-catalogue", "--data-dir", dataDir}, tc.args...)
			stdout, _, err := runCommand(args, tc.vars)
			if err == nil || exitCode(err) != tc.code || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") ||
				strings.Contains(err.Error(), "topsecret") || stdout != "" {
				t.Errorf("err = %v (exit %d), stdout %q; want exit %d naming %q", err, exitCode(err), stdout, tc.code, tc.want)
			}
			if _, err := os.Stat(filepath.Join(dataDir, "backstop.db")); err == nil {
				t.Error("a failed restore left a database")
			}
		})
	}
	// serve refuses to start on a bad replica URL, naming the key.
	_, _, err := runCommand([]string{"serve"}, map[string]string{"SERVICE_LISTEN": "127.0.0.1:0", "SERVICE_DATA_DIR": t.TempDir(),
		"SERVICE_BACKUP_REPLICA_URL": "s3:///no-bucket"})
	if err == nil || !strings.HasPrefix(err.Error(), "config: backup.replica_url: ") {
		t.Errorf("serve with a bad replica URL: %v", err)
	}
}
