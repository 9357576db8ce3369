package agentapi_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"backstop/agentapi"
	"backstop/agentapi/wire"
	"backstop/app"
	"backstop/store/storetest"
)

func TestAgentUpdateOffer(t *testing.T) {
	defer func(v string) { app.Version = v }(app.Version)
	app.Version = "2.0.0"
	ctx := context.Background()
	dir := t.TempDir()
	db := storetest.Open(t, dir)
	tenant := storetest.Tenant(t, db, "Acme")
	build := []byte("agent build 2.0.0 for linux/arm64")
	if err := os.MkdirAll(filepath.Join(dir, "install"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "install", "backstop-linux-arm64"), build, 0o755); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(build)
	install := &agentapi.Install{DataDir: dir, Executable: filepath.Join(dir, "no-such-exe")}
	srv := httptest.NewServer(agentapi.New(agentapi.Services{Endpoints: db, Enrollment: db, Agents: db, Jobs: db},
		agentapi.Options{DataDir: dir, Install: install}))
	t.Cleanup(srv.Close)

	for _, tc := range []struct {
		name                 string
		os, arch, agent, pin string
		query                string
		wantCode             int
	}{
		{name: "older agent", os: "linux", arch: "arm64", agent: "1.9.3", wantCode: 200},
		{name: "up to date", os: "linux", arch: "arm64", agent: "2.0.0", wantCode: 204},
		{name: "newer agent", os: "linux", arch: "arm64", agent: "2.1.0", wantCode: 204},
		{name: "no build for the platform", os: "darwin", arch: "amd64", agent: "1.0.0", wantCode: 204},
		{name: "pinned elsewhere", os: "linux", arch: "arm64", agent: "1.9.3", pin: "1.9.3", wantCode: 204},
		{name: "pinned to another version the appliance lacks", os: "linux", arch: "arm64", agent: "1.9.3", pin: "1.9.9", wantCode: 204},
		{name: "pinned to the carried version", os: "linux", arch: "arm64", agent: "1.9.3", pin: "2.0.0", wantCode: 200},
		{name: "pinned, already there", os: "linux", arch: "arm64", agent: "2.0.0", pin: "2.0.0", wantCode: 204},
		{name: "query overrides the heartbeat", os: "linux", arch: "arm64", agent: "2.0.0", query: "?agentVersion=1.0.0", wantCode: 200},
		{name: "never reported", wantCode: 204},
		{name: "unsupported platform", os: "linux", arch: "arm64", agent: "1.0.0", query: "?os=windows", wantCode: 422},
	} {
		t.Run(tc.name, func(t *testing.T) {
			secret := "s3cret-" + tc.name
			e := &app.Endpoint{ID: app.NewID(app.PrefixEndpoint), TenantID: tenant, Hostname: "h", Profile: app.ProfileServer,
				OS: tc.os, Arch: tc.arch, AgentVersion: tc.agent, PinnedAgentVersion: tc.pin, Status: app.EndpointActive,
				SecretFingerprint: app.Fingerprint(secret), CreatedAt: time.Now()}
			if err := db.CreateEndpoint(ctx, e); err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest("GET", srv.URL+"/agent/v1/update"+tc.query, nil)
			req.Header.Set("Authorization", wire.AuthScheme+" "+e.ID+":"+secret)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tc.wantCode {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.wantCode)
			}
			if tc.wantCode != 200 {
				return
			}
			var u wire.Update
			if err := json.NewDecoder(resp.Body).Decode(&u); err != nil {
				t.Fatal(err)
			}
			want := wire.Update{Version: "2.0.0", Available: true, URL: "/install/bin/backstop-linux-arm64", SHA256: hex.EncodeToString(sum[:])}
			if u != want {
				t.Fatalf("offer %+v, want %+v", u, want)
			}
		})
	}

	// Without credentials: 401 like every agent call.
	resp, err := http.Get(srv.URL + "/agent/v1/update")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("anonymous: %d", resp.StatusCode)
	}
}
