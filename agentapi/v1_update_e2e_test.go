package agentapi_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"backstop/agent"
	"backstop/agentapi"
	"backstop/agentapi/wire"
	"backstop/app"
	"backstop/store/storetest"
)

// TestAgentSelfUpdateEndToEnd runs the agent's self-update against the real
// agent API and install handler: a pinned endpoint stays, an unpinned one
// gets the appliance's build, and the new build's version shows at its
// next heartbeat.
func TestAgentSelfUpdateEndToEnd(t *testing.T) {
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("builds agent binaries")
	}
	defer func(a, g string) { app.Version, agent.Version = a, g }(app.Version, agent.Version)
	app.Version, agent.Version = "2.0.0", "1.0.0"
	ctx := context.Background()
	dataDir := t.TempDir()
	db := storetest.Open(t, dataDir)
	tenant := storetest.Tenant(t, db, "Acme")

	build := func(version, out string) []byte {
		cmd := exec.Command("go", "build", "-o", out, "-ldflags", "-X backstop/agent.Version="+version, "../agent/testdata/fakeagent")
		if msg, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, msg)
		}
		b, _ := os.ReadFile(out)
		return b
	}
	installDir := filepath.Join(dataDir, "install")
	os.MkdirAll(installDir, 0o755)
	next := build("2.0.0", filepath.Join(installDir, agentapi.AgentBinaryName(runtime.GOOS, runtime.GOARCH)))
	exe := filepath.Join(t.TempDir(), "backstop")
	old := build("1.0.0", exe)

	install := &agentapi.Install{DataDir: dataDir, Executable: filepath.Join(dataDir, "no-such-exe")}
	mux := http.NewServeMux()
	mux.Handle("/agent/v1/", agentapi.New(agentapi.Services{Endpoints: db, Enrollment: db, Agents: db, Jobs: db},
		agentapi.Options{DataDir: dataDir, Install: install}))
	mux.Handle("/install/", install)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	value, tok := app.NewEnrollmentToken(tenant, app.ProfileServer, time.Now())
	if err := db.CreateEnrollmentToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(t.TempDir(), "state")
	resp, err := agent.Enroll(ctx, agent.EnrollOptions{Server: srv.URL, Token: value, StateDir: stateDir})
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.Open(stateDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	a.Executable = exe

	// Pinned to the version it runs: nothing offered, nothing changes.
	if _, err := db.UpdateEndpoint(ctx, resp.EndpointID, func(e *app.Endpoint) error {
		e.PinnedAgentVersion = "1.0.0"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := a.SelfUpdate(ctx); err != nil || ok {
		t.Fatalf("pinned: %q %v %v", v, ok, err)
	}
	if got, _ := os.ReadFile(exe); !bytes.Equal(got, old) {
		t.Fatal("pinned, yet the executable changed")
	}

	// Unpinned: the appliance's build replaces it.
	if _, err := db.UpdateEndpoint(ctx, resp.EndpointID, func(e *app.Endpoint) error {
		e.PinnedAgentVersion = ""
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := a.SelfUpdate(ctx); err != nil || !ok || v != "2.0.0" {
		t.Fatalf("unpinned: %q %v %v", v, ok, err)
	}
	if got, _ := os.ReadFile(exe); !bytes.Equal(got, next) {
		t.Fatal("the executable does not hold the appliance's build")
	}
	if out, err := exec.Command(exe).Output(); err != nil || strings.TrimSpace(string(out)) != "2.0.0" {
		t.Fatalf("new build reports %q (%v)", out, err)
	}

	// The restarted agent reports its version and is up to date.
	agent.Version = "2.0.0"
	if _, err := a.Client.Heartbeat(ctx, wire.HeartbeatRequest{OS: runtime.GOOS, Arch: runtime.GOARCH, AgentVersion: agent.Version}); err != nil {
		t.Fatal(err)
	}
	if e, _ := db.Endpoint(ctx, resp.EndpointID); e.AgentVersion != "2.0.0" {
		t.Fatalf("agentVersion after the update: %q", e.AgentVersion)
	}
	if v, ok, err := a.SelfUpdate(ctx); err != nil || ok {
		t.Fatalf("after the update: %q %v %v", v, ok, err)
	}
}
