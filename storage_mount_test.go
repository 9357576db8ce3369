package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
