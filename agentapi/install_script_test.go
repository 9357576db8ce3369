package agentapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"backstop/agentapi"
	"backstop/app"
	"backstop/assets"
	"backstop/e2e"
	"backstop/store"
	"backstop/store/storetest"
)

// installAppliance is a real appliance on 127.0.0.1 serving /agent/v1 and
// /install/, whose /install/ offers the freshly built backstop binary. Its
// SHA256SUMS can be tampered with to play a corrupted or substituted file.
type installAppliance struct {
	db      *store.DB
	dataDir string
	url     string
	tenant  string
	// tamper names the file whose line in SHA256SUMS is replaced by a
	// wrong sum; "" serves the real sums.
	tamper atomic.Value
}

// scriptRun is what one run of `curl … | sh` left behind.
type scriptRun struct {
	stdout, stderr string
	code           int
}

func newInstallAppliance(t *testing.T, executable string) *installAppliance {
	t.Helper()
	a := &installAppliance{dataDir: t.TempDir()}
	a.tamper.Store("")
	db := storetest.Open(t, a.dataDir)
	a.db = db
	a.tenant = storetest.Tenant(t, db, "Acme")
	install := &agentapi.Install{DataDir: a.dataDir, Executable: executable, Script: assets.AgentInstallScript}
	mux := http.NewServeMux()
	mux.Handle("/agent/v1/", agentapi.New(agentapi.Services{Endpoints: db, Enrollment: db, Agents: db, Jobs: db},
		agentapi.Options{DataDir: a.dataDir}))
	mux.Handle("/install/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := a.tamper.Load().(string)
		if r.URL.Path != "/install/SHA256SUMS" || name == "" {
			install.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		install.ServeHTTP(rec, r)
		var out strings.Builder
		for _, line := range strings.SplitAfter(rec.Body.String(), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[1] == name {
				line = sha256Hex([]byte("not the file")) + "  " + name + "\n"
			}
			out.WriteString(line)
		}
		io.WriteString(w, out.String())
	}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	a.url = srv.URL
	return a
}

// offer puts a file into data_dir/install/, where the appliance serves it.
func (a *installAppliance) offer(t *testing.T, name string, content []byte) {
	t.Helper()
	dir := filepath.Join(a.dataDir, "install")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
		t.Fatal(err)
	}
}

func (a *installAppliance) token(t *testing.T, profile string) string {
	t.Helper()
	value, tok := app.NewEnrollmentToken(a.tenant, profile, time.Now())
	if err := a.db.CreateEnrollmentToken(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	return value
}

func (a *installAppliance) endpointCount(t *testing.T) int {
	t.Helper()
	eps, err := a.db.Endpoints(context.Background(), app.EndpointFilter{TenantID: a.tenant})
	if err != nil {
		t.Fatal(err)
	}
	return len(eps)
}

// run does what the documentation tells an operator to do, `curl -fsSL
// URL/install/agent.sh | sh -s -- ARGS`, with DESTDIR set. unameDir, when
// not empty, is put first on PATH so its `uname` decides the platform.
func (a *installAppliance) run(t *testing.T, destdir, unameDir string, args ...string) scriptRun {
	t.Helper()
	path := os.Getenv("PATH")
	if unameDir != "" {
		path = unameDir + string(os.PathListSeparator) + path
	}
	tmp := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", `curl -fsSL "$URL/install/agent.sh" | sh -s -- "$@"`, "sh")
	cmd.Args = append(cmd.Args, args...)
	// A clean environment: no proxy variables, a private TMPDIR (checked
	// below: the script must remove its downloads), the caller's PATH.
	cmd.Env = []string{"PATH=" + path, "HOME=" + t.TempDir(), "TMPDIR=" + tmp, "URL=" + a.url, "DESTDIR=" + destdir}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	res := scriptRun{}
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		res.code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	res.stdout, res.stderr = o.String(), e.String()
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("the script left %d entries in TMPDIR", len(left))
	}
	return res
}

// unameShim makes a PATH directory whose `uname` reports a platform.
func unameShim(t *testing.T, system, machine string) string {
	t.Helper()
	dir := t.TempDir()
	script := fmt.Sprintf("#!/bin/sh\ncase \"$1\" in\n-m) echo %s ;;\n*) echo %s ;;\nesac\n", machine, system)
	if err := os.WriteFile(filepath.Join(dir, "uname"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// requireFile checks a file's content hash and permission bits.
func requireFile(t *testing.T, path string, want []byte, mode fs.FileMode) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("not installed: %v", err)
	}
	if sha256Hex(got) != sha256Hex(want) {
		t.Errorf("%s: sha256 %s, want %s", path, sha256Hex(got), sha256Hex(want))
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != mode {
		t.Errorf("%s: mode %v, want %v", path, st.Mode().Perm(), mode)
	}
}

// requireEmpty fails when anything was written under dir.
func requireEmpty(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if p != dir {
			t.Errorf("installed %s although the script failed", p)
		}
		return err
	})
}

// readAgentJSON checks agent.json's mode and returns its endpoint id.
func readAgentJSON(t *testing.T, stateDir, server string) string {
	t.Helper()
	path := filepath.Join(stateDir, "agent.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("not enrolled: %v", err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("agent.json mode %v, want 0600", st.Mode().Perm())
	}
	var st struct {
		Server     string `json:"server"`
		EndpointID string `json:"endpointId"`
	}
	if err := json.Unmarshal(b, &st); err != nil || !strings.HasPrefix(st.EndpointID, "ep_") || st.Server != server {
		t.Fatalf("agent.json: %v %s", err, b)
	}
	return st.EndpointID
}

// TestInstallScript runs /install/agent.sh for real: piped from curl into
// sh, against a real appliance offering the real built binary, installing
// into DESTDIR and enrolling through /agent/v1.
func TestInstallScript(t *testing.T) {
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("builds the binary")
	}
	e2e.RequireTool(t, "sh", "dash")
	e2e.RequireTool(t, "curl", "curl")
	var ownUnit, ownState string
	switch runtime.GOOS {
	case "linux":
		ownUnit, ownState = "/etc/systemd/system/backstop-agent.service", "/var/lib/backstop-agent"
	case "darwin":
		ownUnit, ownState = "/Library/LaunchDaemons/dev.backstop.agent.plist", "/Library/Application Support/Backstop Agent"
	default:
		t.Skipf("the install script supports linux and darwin, not %s", runtime.GOOS)
	}

	bin := filepath.Join(t.TempDir(), "backstop")
	if out, err := exec.Command("go", "build", "-o", bin, "backstop").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	binBytes, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	ap := newInstallAppliance(t, bin)
	own := runtime.GOOS + "-" + runtime.GOARCH
	restic := []byte("#!/bin/sh\necho 'restic 0.16.4 (stand-in)'\n")
	ap.offer(t, "restic-"+own, restic)
	ctx := context.Background()

	// The native platform, detected by the real uname. The token is a
	// client token: --profile server must reach the enrollment.
	dest := t.TempDir()
	res := ap.run(t, dest, "", "--token", ap.token(t, app.ProfileClient), "--profile", "server")
	if res.code != 0 {
		t.Fatalf("install: exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	requireFile(t, filepath.Join(dest, "usr/local/bin/backstop"), binBytes, 0o755)
	requireFile(t, filepath.Join(dest, ownState, "restic"), restic, 0o755)
	if st, err := os.Stat(filepath.Join(dest, ownState)); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("state dir: %v %v, want mode 0700", st.Mode().Perm(), err)
	}
	epID := readAgentJSON(t, filepath.Join(dest, ownState), ap.url)
	ep, err := ap.db.Endpoint(ctx, epID)
	if err != nil {
		t.Fatalf("enrolled endpoint not in the appliance: %v", err)
	}
	if ep.TenantID != ap.tenant || ep.Profile != app.ProfileServer {
		t.Errorf("endpoint: tenant %s profile %s, want %s server", ep.TenantID, ep.Profile, ap.tenant)
	}
	unit, err := os.ReadFile(filepath.Join(dest, ownUnit))
	if err != nil {
		t.Fatalf("service file: %v", err)
	}
	wantRun := "ExecStart=/usr/local/bin/backstop agent run --state-dir /var/lib/backstop-agent\n"
	if runtime.GOOS == "darwin" {
		wantRun = "<string>" + ownState + "</string>"
	}
	if !strings.Contains(string(unit), wantRun) || strings.Contains(string(unit), dest) {
		t.Errorf("service file names the wrong paths (want %q, no DESTDIR):\n%s", wantRun, unit)
	}
	if !strings.Contains(res.stdout, "service manager not run") {
		t.Errorf("stdout does not say the service manager was skipped: %q", res.stdout)
	}

	t.Run("second run keeps the enrollment", func(t *testing.T) {
		before, _ := os.ReadFile(filepath.Join(dest, ownState, "agent.json"))
		// The token is spent: only keeping agent.json lets this succeed.
		res := ap.run(t, dest, "", "--token", "bse_spent", "--profile", "server")
		if res.code != 0 || !strings.Contains(res.stdout, "already enrolled") {
			t.Fatalf("re-run: exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
		}
		after, _ := os.ReadFile(filepath.Join(dest, ownState, "agent.json"))
		if !bytes.Equal(before, after) || ap.endpointCount(t) != 1 {
			t.Errorf("re-run changed the enrollment (endpoints: %d)", ap.endpointCount(t))
		}
		requireFile(t, filepath.Join(dest, "usr/local/bin/backstop"), binBytes, 0o755)
	})

	for _, name := range []string{"backstop-" + own, "restic-" + own} {
		t.Run("tampered sum of "+name, func(t *testing.T) {
			ap.tamper.Store(name)
			defer ap.tamper.Store("")
			dest := t.TempDir()
			res := ap.run(t, dest, "", "--token", ap.token(t, app.ProfileServer))
			if res.code == 0 || !strings.Contains(res.stderr, "checksum mismatch for "+name) {
				t.Fatalf("exit %d, stderr %q: want a checksum mismatch for %s", res.code, res.stderr, name)
			}
			requireEmpty(t, dest)
			if n := ap.endpointCount(t); n != 1 {
				t.Errorf("%d endpoints after a refused install, want 1", n)
			}
		})
	}

	t.Run("bad token", func(t *testing.T) {
		dest := t.TempDir()
		res := ap.run(t, dest, "", "--token", "bse_"+strings.Repeat("x", 40))
		if res.code == 0 || !strings.Contains(res.stderr, "not valid") || !strings.Contains(res.stderr, "enrollment with "+ap.url+" failed") {
			t.Fatalf("exit %d, stderr %q: want the appliance's refusal and the script's explanation", res.code, res.stderr)
		}
		if _, err := os.Stat(filepath.Join(dest, ownState, "agent.json")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("agent.json after a refused token: %v", err)
		}
		if _, err := os.Stat(filepath.Join(dest, ownUnit)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("service installed although enrollment failed: %v", err)
		}
		if n := ap.endpointCount(t); n != 1 {
			t.Errorf("%d endpoints after a refused token, want 1", n)
		}
	})

	t.Run("darwin arm64", func(t *testing.T) {
		// The stand-in must run here as the agent that enrolls, so it is
		// the real binary; the appended bytes make its sum differ from
		// the native offer, proving which name the script downloaded.
		standIn := append(append([]byte{}, binBytes...), "\nbackstop darwin/arm64 stand-in\n"...)
		ap.offer(t, "backstop-darwin-arm64", standIn)
		dest := t.TempDir()
		res := ap.run(t, dest, unameShim(t, "Darwin", "arm64"), "--token", ap.token(t, app.ProfileServer))
		if res.code != 0 {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
		}
		requireFile(t, filepath.Join(dest, "usr/local/bin/backstop"), standIn, 0o755)
		state := filepath.Join(dest, "Library/Application Support/Backstop Agent")
		if _, err := ap.db.Endpoint(ctx, readAgentJSON(t, state, ap.url)); err != nil {
			t.Errorf("darwin endpoint not in the appliance: %v", err)
		}
		plist, err := os.ReadFile(filepath.Join(dest, "Library/LaunchDaemons/dev.backstop.agent.plist"))
		if err != nil {
			t.Fatalf("plist: %v", err)
		}
		want := "<array><string>/usr/local/bin/backstop</string><string>agent</string><string>run</string>" +
			"<string>--state-dir</string><string>/Library/Application Support/Backstop Agent</string></array>"
		if !strings.Contains(string(plist), want) || strings.Contains(string(plist), dest) {
			t.Errorf("plist ProgramArguments wrong (want %q):\n%s", want, plist)
		}
		if _, err := os.Stat(filepath.Join(dest, "etc")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("a systemd unit was written on darwin: %v", err)
		}
	})

	for _, tt := range []struct{ system, machine, want string }{
		{"FreeBSD", "amd64", "unsupported operating system FreeBSD"},
		{"Linux", "riscv64", "unsupported architecture riscv64"},
	} {
		t.Run(tt.system+" "+tt.machine, func(t *testing.T) {
			dest := t.TempDir()
			res := ap.run(t, dest, unameShim(t, tt.system, tt.machine), "--token", ap.token(t, app.ProfileServer))
			if res.code == 0 || !strings.Contains(res.stderr, tt.want) {
				t.Fatalf("exit %d, stderr %q: want %q", res.code, res.stderr, tt.want)
			}
			requireEmpty(t, dest)
		})
	}
}
