package main

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"backstop/app/blobstore/s3backend/s3test"
)

// A fresh install stores into the default local target at data_dir/blobs,
// checked and ok, as an integrator reads it through GET /api/v1/storage.
func TestFreshInstallHasTheDefaultLocalTarget(t *testing.T) {
	a := startAppliance(t, nil)
	acme := a.admin("", "create-tenant", "--name", "Acme")
	key := a.admin("", "create-key", "--tenant", acme, "--name", "RMM", "--scopes", "status:read")

	r := a.call("GET", "/api/v1/storage", "", "Authorization", "Bearer "+key)
	a.expect(r, 200, "")
	var got struct {
		State       string `json:"state"`
		StoredBytes *int64 `json:"storedBytes"`
		Targets     []struct {
			ID, Name, Kind, Path, State string
			Default                     bool
			FreeBytes                   *int64
			CheckedAt                   *string
			TenantIDs                   []string
		} `json:"targets"`
	}
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	blobs := filepath.Join(a.vars["SERVICE_DATA_DIR"], "blobs")
	if got.State != "ok" || got.StoredBytes == nil || *got.StoredBytes != 0 || len(got.Targets) != 1 {
		t.Fatalf("storage %s", r.body)
	}
	d := got.Targets[0]
	if d.Name != "Local disk" || d.Kind != "local" || d.Path != blobs || d.State != "ok" || !d.Default ||
		d.FreeBytes == nil || d.CheckedAt == nil || d.TenantIDs == nil || len(d.TenantIDs) != 0 {
		t.Errorf("default target %s", r.body)
	}
	if fi, err := os.Stat(blobs); err != nil || !fi.IsDir() {
		t.Errorf("data_dir/blobs: %v", err)
	}
	a.expect(a.call("GET", "/api/v1/status", "", "Authorization", "Bearer "+key), 200, "")
	rz := a.call("GET", "/readyz", "")
	a.expect(rz, 200, "")
	if !strings.Contains(string(rz.body), `"storage":"ok"`) {
		t.Errorf("readyz %s", rz.body)
	}
}

// signIn creates a provider administrator and returns the session cookie
// and CSRF token as request header pairs.
func (a *appliance) signIn() []string {
	a.t.Helper()
	a.admin("s3-admin-password-1\n", "create-user", "--email", "storage@example.com", "--password-stdin", "--provider")
	r := a.call("POST", "/api/v1/session", `{"email":"storage@example.com","password":"s3-admin-password-1"}`)
	a.expect(r, 200, "")
	var s struct{ CSRFToken string }
	json.Unmarshal(r.body, &s)
	return []string{"Cookie", strings.SplitN(r.header.Get("Set-Cookie"), ";", 2)[0], "X-CSRF-Token", s.CSRFToken}
}

// S3 targets against a real S3 server (versitygw), through the API an
// administrator's browser uses: refused with the check's reason for wrong
// credentials, a wrong bucket and an unreachable endpoint; accepted, checked
// and listed when right, the secret never shown again.
func TestS3StorageTargetsOverHTTP(t *testing.T) {
	srv := s3test.StartVersity(t)
	a := startAppliance(t, nil)
	session := a.signIn()
	c := srv.Config()
	body := func(endpoint, bucket, secret string) string {
		b, _ := json.Marshal(map[string]any{"name": "Wasabi-like", "kind": "s3", "endpoint": endpoint, "bucket": bucket,
			"accessKeyId": c.AccessKeyID, "secretAccessKey": secret, "pathStyle": true, "tls": false})
		return string(b)
	}
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedAddr := closed.Addr().String()
	closed.Close()
	for _, tc := range []struct{ name, body, reason string }{
		{"wrong secret", body(c.Endpoint, c.Bucket, "not-the-secret"), "access key was refused"},
		{"wrong bucket", body(c.Endpoint, "no-such-bucket", c.SecretAccessKey), "does not exist"},
		{"unreachable", body(closedAddr, c.Bucket, c.SecretAccessKey), "connection refused"},
	} {
		r := a.call("POST", "/api/v1/storage-targets", tc.body, session...)
		a.expect(r, 422, "storage_target_unusable")
		if !strings.Contains(string(r.body), tc.reason) || strings.Contains(string(r.body), c.SecretAccessKey) {
			t.Errorf("%s: %s", tc.name, r.body)
		}
	}
	r := a.call("POST", "/api/v1/storage-targets", body(c.Endpoint, c.Bucket, c.SecretAccessKey), session...)
	a.expect(r, 201, "")
	var created struct{ ID, State, Kind string }
	json.Unmarshal(r.body, &created)
	if created.State != "ok" || created.Kind != "s3" || strings.Contains(string(r.body), c.SecretAccessKey) {
		t.Fatalf("created %s", r.body)
	}
	r = a.call("GET", "/api/v1/storage-targets", "", session...)
	a.expect(r, 200, "")
	if !strings.Contains(string(r.body), created.ID) || strings.Contains(string(r.body), c.SecretAccessKey) {
		t.Fatalf("list %s", r.body)
	}
}

// Two local targets on one file system: GET /storage counts its free space
// once, not twice.
func TestTargetsOnOneFilesystemCountOnce(t *testing.T) {
	a := startAppliance(t, nil)
	session := a.signIn()
	second := filepath.Join(a.vars["SERVICE_DATA_DIR"], "second")
	os.MkdirAll(second, 0o700)
	a.expect(a.call("POST", "/api/v1/storage-targets", `{"name":"Second","kind":"local","path":"`+second+`"}`, session...), 201, "")
	r := a.call("GET", "/api/v1/storage", "", session...) // a provider administrator sees every target
	a.expect(r, 200, "")
	var got struct {
		FreeBytes int64
		Targets   []struct{ FreeBytes int64 }
	}
	json.Unmarshal(r.body, &got)
	if len(got.Targets) != 2 || got.FreeBytes != got.Targets[0].FreeBytes {
		t.Fatalf("free space of one file system counted %d times: %s", len(got.Targets), r.body)
	}
}
