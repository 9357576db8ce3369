package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/update"
	"backstop/app/update/githubtest"
)

// TestUpdateApplyWithRealBinaries runs the whole update path with real
// builds: version 1.2.0 serves under a small supervisor that restarts it
// whenever it exits (as systemd's Restart=always does); a fake GitHub serves
// release v1.3.0 with the 1.3.0 build, SHA256SUMS and its signature by a
// test key built into both binaries. A good release is applied and 1.3.0
// answers; a tampered asset and a bad signature end failed with the binary
// unchanged; a 1.3.0 whose /readyz never answers ready is rolled back.
func TestUpdateApplyWithRealBinaries(t *testing.T) {
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("builds the binary three times")
	}
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	_, otherPriv, _ := ed25519.GenerateKey(rand.Reader)
	key := "-X backstop/app/update.releaseKey=" + base64.StdEncoding.EncodeToString(pub)
	dir := t.TempDir()
	builds := map[string]string{
		"old":      "-X backstop/app.Version=1.2.0 " + key,
		"new":      "-X backstop/app.Version=1.3.0 " + key,
		"notready": "-X backstop/app.Version=1.3.0 -X main.testNotReady=1 " + key,
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(builds))
	for name, flags := range builds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, name), "-ldflags", flags, ".").CombinedOutput(); err != nil {
				errs <- fmt.Errorf("go build %s: %v\n%s", name, err, out)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	oldBin, newBin, notReadyBin := read("old"), read("new"), read("notready")
	asset := update.AssetName()
	release := func(binary []byte, signer ed25519.PrivateKey) map[string][]byte {
		h := sha256.Sum256(binary)
		sums := []byte(hex.EncodeToString(h[:]) + "  " + asset + "\n")
		return map[string][]byte{asset: binary, update.SumsName: sums,
			update.SignatureName: []byte(base64.StdEncoding.EncodeToString(ed25519.Sign(signer, sums)) + "\n")}
	}
	tampered := release(newBin, priv)
	tampered[asset] = append(bytes.Clone(newBin), 0)

	tests := []struct {
		name      string
		assets    map[string][]byte
		holdPhase bool   // hold the download and see phase downloading
		wantError string // "" : the update succeeds
		wantExe   []byte
		wantRun   string
	}{
		{"good", release(newBin, priv), true, "", newBin, "1.3.0"},
		{"tampered asset", tampered, false, "does not match", oldBin, "1.2.0"},
		{"bad signature", release(newBin, otherPriv), false, "signature", oldBin, "1.2.0"},
		{"never ready", release(notReadyBin, priv), false, "rolled back", oldBin, "1.2.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runUpdateScenario(t, oldBin, tt.assets, tt.holdPhase, tt.wantError, tt.wantExe, tt.wantRun)
		})
	}
}

func runUpdateScenario(t *testing.T, oldBin []byte, assets map[string][]byte, hold bool, wantError string, wantExe []byte, wantRun string) {
	const repo = "backstop-dev/backstop"
	at := time.Now().Add(-time.Hour)
	gh := githubtest.New(repo, nil, githubtest.Release{Tag: "v1.3.0", CreatedAt: at, PublishedAt: at, Assets: assets})
	defer gh.Close()

	root := t.TempDir()
	exe := filepath.Join(root, "backstop")
	if err := os.WriteFile(exe, oldBin, 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + root, "SERVICE_LISTEN=" + addr,
		"SERVICE_DATA_DIR=" + filepath.Join(root, "data"), "SERVICE_LOG_LEVEL=warn", "SERVICE_UPDATE_CHECK=true",
		"SERVICE_UPDATE_API_URL=" + gh.URL, "SERVICE_UPDATE_REPOSITORY=" + repo, "SERVICE_UPDATE_ROLLBACK_AFTER=4s"}
	os.MkdirAll(filepath.Join(root, "data"), 0o700)
	create := exec.Command(exe, "admin", "create-user", "--email", "root@example.com", "--password-stdin", "--provider")
	create.Env, create.Stdin = env, strings.NewReader("provider-password-1\n")
	if out, err := create.CombinedOutput(); err != nil {
		t.Fatalf("create-user: %v\n%s", err, out)
	}

	// The supervisor: like systemd with Restart=always, it follows the main
	// process, not its output: the output goes to a file, because a pipe
	// stays open while the watchdog the process started runs on.
	logs, err := os.Create(filepath.Join(root, "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	var mu sync.Mutex
	var current *exec.Cmd
	var exits []int
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			cmd := exec.Command(exe, "serve")
			cmd.Env, cmd.Stdout, cmd.Stderr = env, logs, logs
			mu.Lock()
			err := cmd.Start()
			current = cmd
			if err == nil {
				fmt.Fprintf(logs, "%s supervisor: started pid %d\n", time.Now().Format("15:04:05.000"), cmd.Process.Pid)
			}
			mu.Unlock()
			if err != nil {
				t.Errorf("start: %v", err)
				return
			}
			err = cmd.Wait()
			var ee *exec.ExitError
			code := 0
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			}
			mu.Lock()
			exits = append(exits, code)
			fmt.Fprintf(logs, "%s supervisor: exited %d\n", time.Now().Format("15:04:05.000"), code)
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	defer func() {
		close(stop)
		mu.Lock()
		current.Process.Signal(syscall.SIGTERM)
		mu.Unlock()
		<-done
		if t.Failed() {
			mu.Lock()
			b, _ := os.ReadFile(logs.Name())
			t.Logf("exits %v; logs:\n%s", exits, b)
			mu.Unlock()
		}
	}()

	base := "http://" + addr
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Timeout: 5 * time.Second}
	var csrf string
	waitFor(t, 20*time.Second, "sign-in", func() bool {
		resp, err := client.Post(base+"/api/v1/session", "application/json", strings.NewReader(`{"email":"root@example.com","password":"provider-password-1"}`))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var b struct{ CSRFToken string }
		json.NewDecoder(resp.Body).Decode(&b)
		csrf = b.CSRFToken
		return resp.StatusCode == 200
	})
	version := func() (v app.VersionInfo) {
		resp, err := client.Get(base + "/api/v1/version")
		if err != nil {
			return v
		}
		defer resp.Body.Close()
		json.NewDecoder(resp.Body).Decode(&v)
		return v
	}
	waitFor(t, 20*time.Second, "the update check to find 1.3.0", func() bool {
		v := version()
		return v.UpdateAvailable != nil && *v.UpdateAvailable
	})

	if hold {
		gh.Hold()
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/maintenance", strings.NewReader(`{"targetVersion":"1.3.0"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-Token", csrf)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var m app.Maintenance
	json.NewDecoder(resp.Body).Decode(&m)
	resp.Body.Close()
	if resp.StatusCode != 200 || m.Phase != app.MaintenanceAnnounced {
		t.Fatalf("announce: %d %+v", resp.StatusCode, m)
	}
	if hold {
		waitFor(t, 15*time.Second, "phase downloading", func() bool {
			v := version()
			return v.Maintenance != nil && v.Maintenance.Phase == app.MaintenanceDownloading
		})
		gh.Release()
	}

	var last app.VersionInfo
	waitFor(t, 40*time.Second, "the update to end", func() bool {
		last = version()
		if wantError == "" {
			return last.Running == wantRun && last.Maintenance == nil
		}
		return last.Running == wantRun && last.Maintenance != nil && last.Maintenance.Phase == app.MaintenanceFailed
	})
	if wantError != "" && (last.Maintenance.Error == nil || !strings.Contains(*last.Maintenance.Error, wantError)) {
		t.Errorf("maintenance %+v, want error containing %q", last.Maintenance, wantError)
	}
	if b, _ := os.ReadFile(exe); !bytes.Equal(b, wantExe) {
		t.Errorf("binary on disk is not the expected build (%d bytes)", len(b))
	}
	mu.Lock()
	defer mu.Unlock()
	if wantError == "" && (len(exits) == 0 || exits[0] != exitRestart) {
		t.Errorf("exits %v, want the first %d", exits, exitRestart)
	}
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}
