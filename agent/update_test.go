package agent_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"backstop/agent"
	"backstop/agentapi/wire"
)

// buildAgent builds testdata/fakeagent, a small real build of the agent
// package, with version linked in as agent.Version.
func buildAgent(t *testing.T, dir, version string) []byte {
	t.Helper()
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("builds agent binaries")
	}
	out := filepath.Join(dir, "agent-"+version)
	cmd := exec.Command("go", "build", "-o", out, "-ldflags", "-X backstop/agent.Version="+version, "./testdata/fakeagent")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, msg)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fakeAppliance serves what self-update reads: GET /agent/v1/update,
// /install/SHA256SUMS and /install/bin/<name>, and enough of /agent/v1 for
// the daemon (config, heartbeat).
type fakeAppliance struct {
	srv    *httptest.Server
	name   string // the offered file
	binary []byte
	offer  *wire.Update // nil: 204
	sums   string

	mu         sync.Mutex
	queries    []string
	downloads  int
	heartbeats []wire.HeartbeatRequest
}

func newFakeAppliance(t *testing.T, binary []byte, version string) *fakeAppliance {
	f := &fakeAppliance{name: "backstop-" + runtime.GOOS + "-" + runtime.GOARCH, binary: binary}
	sum := sha256.Sum256(binary)
	f.offer = &wire.Update{Version: version, Available: true, URL: "/install/bin/" + f.name, SHA256: hex.EncodeToString(sum[:])}
	f.sums = fmt.Sprintf("%x  restic-linux-amd64\n%s  %s\n", sha256.Sum256([]byte("restic")), f.offer.SHA256, f.name)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /agent/v1/update", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != wire.AuthScheme+" ep_test:secret" {
			w.WriteHeader(401)
			return
		}
		f.mu.Lock()
		f.queries = append(f.queries, r.URL.RawQuery)
		offer := f.offer
		f.mu.Unlock()
		if offer == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		json.NewEncoder(w).Encode(offer)
	})
	mux.HandleFunc("GET /agent/v1/config", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(wire.Config{EndpointID: "ep_test", HeartbeatSeconds: 60, ProgressSeconds: 2})
	})
	mux.HandleFunc("POST /agent/v1/heartbeat", func(w http.ResponseWriter, r *http.Request) {
		var hb wire.HeartbeatRequest
		json.NewDecoder(r.Body).Decode(&hb)
		f.mu.Lock()
		f.heartbeats = append(f.heartbeats, hb)
		f.mu.Unlock()
		json.NewEncoder(w).Encode(wire.HeartbeatResponse{Commands: []wire.Command{}})
	})
	mux.HandleFunc("GET /install/SHA256SUMS", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		fmt.Fprint(w, f.sums)
	})
	mux.HandleFunc("GET /install/bin/{name}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("name") != f.name {
			http.NotFound(w, r)
			return
		}
		f.mu.Lock()
		f.downloads++
		f.mu.Unlock()
		w.Write(f.binary)
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// newUpdatingAgent is an agent of version 1.0.0 whose executable is a copy
// of old in a temporary directory.
func newUpdatingAgent(t *testing.T, f *fakeAppliance, old []byte) (*agent.Agent, string) {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "backstop")
	if err := os.WriteFile(exe, old, 0o755); err != nil {
		t.Fatal(err)
	}
	st := &agent.State{Server: f.srv.URL, EndpointID: "ep_test", Secret: "secret"}
	c := &agent.Client{Server: f.srv.URL, EndpointID: "ep_test", Secret: "secret", HTTP: f.srv.Client()}
	state := t.TempDir()
	return &agent.Agent{StateDir: state, State: st, Client: c, Now: time.Now, ReportTimeout: time.Second,
		Spool: &agent.Spool{Dir: filepath.Join(state, "spool"), Client: c}, Logger: discardLogger(),
		Executable: exe}, exe
}

func setVersion(t *testing.T, v string) {
	old := agent.Version
	agent.Version = v
	t.Cleanup(func() { agent.Version = old })
}

func TestSelfUpdateReplacesExecutable(t *testing.T) {
	setVersion(t, "1.0.0")
	dir := t.TempDir()
	old, next := buildAgent(t, dir, "1.0.0"), buildAgent(t, dir, "2.0.0")
	f := newFakeAppliance(t, next, "2.0.0")
	a, exe := newUpdatingAgent(t, f, old)
	running, err := os.Open(exe) // stands for the running process's image
	if err != nil {
		t.Fatal(err)
	}
	defer running.Close()

	version, ok, err := a.SelfUpdate(context.Background())
	if err != nil || !ok || version != "2.0.0" {
		t.Fatalf("SelfUpdate: %q %v %v", version, ok, err)
	}
	got, _ := os.ReadFile(exe)
	if !bytes.Equal(got, next) {
		t.Fatal("the executable does not hold the new build")
	}
	if st, _ := os.Stat(exe); st.Mode().Perm() != 0o755 {
		t.Errorf("mode %v, want 0755", st.Mode())
	}
	if _, err := os.Stat(exe + ".new"); !os.IsNotExist(err) {
		t.Errorf("%s.new left behind: %v", exe, err)
	}
	// Replaced by a rename, not rewritten in place: the open file is still
	// the old build, as the running process's image is.
	var prev bytes.Buffer
	if _, err := prev.ReadFrom(running); err != nil || !bytes.Equal(prev.Bytes(), old) {
		t.Fatalf("the old file was rewritten in place (%v)", err)
	}
	out, err := exec.Command(exe).Output()
	if err != nil || strings.TrimSpace(string(out)) != "2.0.0" {
		t.Fatalf("new build reports %q (%v)", out, err)
	}
	if q := f.queries[0]; !strings.Contains(q, "agentVersion=1.0.0") || !strings.Contains(q, "os="+runtime.GOOS) {
		t.Errorf("update query %q", q)
	}
}

func TestSelfUpdateRefusesUnverifiedBuild(t *testing.T) {
	setVersion(t, "1.0.0")
	dir := t.TempDir()
	old, next := buildAgent(t, dir, "1.0.0"), buildAgent(t, dir, "2.0.0")
	bad := sha256.Sum256([]byte("something else"))
	for _, tc := range []struct {
		name   string
		change func(f *fakeAppliance)
	}{
		{"SHA256SUMS gives another sum", func(f *fakeAppliance) {
			f.sums = fmt.Sprintf("%x  %s\n", bad, f.name)
		}},
		{"SHA256SUMS does not list the file", func(f *fakeAppliance) {
			f.sums = fmt.Sprintf("%x  restic-linux-amd64\n", bad)
		}},
		{"download does not match", func(f *fakeAppliance) {
			f.binary = append([]byte("tampered"), f.binary...)
		}},
		{"offer outside /install/bin", func(f *fakeAppliance) {
			f.offer.URL = "https://elsewhere.example/backstop"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAppliance(t, next, "2.0.0")
			tc.change(f)
			a, exe := newUpdatingAgent(t, f, old)
			if _, ok, err := a.SelfUpdate(context.Background()); err == nil || ok {
				t.Fatalf("SelfUpdate: want a refusal, got %v %v", ok, err)
			}
			if got, _ := os.ReadFile(exe); !bytes.Equal(got, old) {
				t.Fatal("the executable changed")
			}
			if _, err := os.Stat(exe + ".new"); !os.IsNotExist(err) {
				t.Errorf("%s.new left behind: %v", exe, err)
			}
		})
	}
}

func TestSelfUpdateNothingOffered(t *testing.T) {
	setVersion(t, "1.0.0")
	old := []byte("#!/bin/sh\necho 1.0.0\n")
	f := newFakeAppliance(t, []byte("new"), "2.0.0")
	f.offer = nil // up to date, or pinned: 204
	a, exe := newUpdatingAgent(t, f, old)
	if v, ok, err := a.SelfUpdate(context.Background()); err != nil || ok || v != "" {
		t.Fatalf("SelfUpdate: %q %v %v", v, ok, err)
	}
	if got, _ := os.ReadFile(exe); !bytes.Equal(got, old) || f.downloads != 0 {
		t.Fatalf("changed or downloaded (%d downloads)", f.downloads)
	}
}

func TestRunExitsForRestartAfterUpdate(t *testing.T) {
	setVersion(t, "1.0.0")
	dir := t.TempDir()
	old, next := buildAgent(t, dir, "1.0.0"), buildAgent(t, dir, "2.0.0")
	f := newFakeAppliance(t, next, "2.0.0")
	a, exe := newUpdatingAgent(t, f, old)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.Run(ctx); !errors.Is(err, agent.ErrRestart) {
		t.Fatalf("Run: want ErrRestart, got %v", err)
	}
	if got, _ := os.ReadFile(exe); !bytes.Equal(got, next) {
		t.Fatal("the executable does not hold the new build")
	}
	if len(f.heartbeats) == 0 || f.heartbeats[0].AgentVersion != "1.0.0" {
		t.Fatalf("heartbeats before the update: %+v", f.heartbeats)
	}

	// Self-update off: Run keeps running the old build.
	a, exe = newUpdatingAgent(t, f, old)
	a.UpdateEvery = -1
	ctx2, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	if err := a.Run(ctx2); err != nil {
		t.Fatalf("Run without self-update: %v", err)
	}
	if got, _ := os.ReadFile(exe); !bytes.Equal(got, old) {
		t.Fatal("self-update off, yet the executable changed")
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
