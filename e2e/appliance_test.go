package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds the backstop binary once per test process.
func binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "backstop-e2e-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "backstop")
		cmd := exec.Command("go", "build", "-o", binPath, "backstop")
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// appliance is a running `backstop serve` on 127.0.0.1.
type appliance struct {
	URL        string
	DataDir    string
	SetupToken string
	stderr     *lockedBuffer
	// stop ends the process (SIGTERM, then kill) and waits; the test's
	// cleanup calls it too, so a test may stop an appliance early to start
	// another on the same data directory.
	stop func()
	pid  int // of the serve process
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

var (
	setupRE = regexp.MustCompile(`/setup#token=([A-Za-z0-9]+)`)
	addrRE  = regexp.MustCompile(`backstop serving.*addr=([0-9.]+:[0-9]+)`)
)

// startAppliance runs the binary with a fresh data directory (or the one
// env names with SERVICE_DATA_DIR, to restart on an earlier one) and
// returns once it serves; it is stopped (SIGTERM, then kill) when the test ends.
func startAppliance(t testing.TB, env ...string) *appliance {
	t.Helper()
	bin := binary(t)
	a := &appliance{DataDir: t.TempDir(), stderr: &lockedBuffer{}}
	for _, e := range env {
		if dir, ok := strings.CutPrefix(e, "SERVICE_DATA_DIR="); ok {
			a.DataDir = dir
		}
	}
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(), "SERVICE_LISTEN=127.0.0.1:0", "SERVICE_DATA_DIR="+a.DataDir, "SERVICE_EDITION=provider",
		"SERVICE_LOG_LEVEL=info")
	cmd.Env = append(cmd.Env, env...)
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	a.pid = cmd.Process.Pid
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			a.stderr.Write([]byte(line + "\n"))
			if m := setupRE.FindStringSubmatch(line); m != nil {
				a.SetupToken = m[1]
			}
			if m := addrRE.FindStringSubmatch(line); m != nil && !signalled {
				a.URL = "http://" + m[1]
				signalled = true
				close(ready)
			}
		}
	}()
	a.stop = sync.OnceFunc(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); pw.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	t.Cleanup(func() {
		a.stop()
		if t.Failed() {
			t.Logf("appliance log:\n%s", a.stderr.String())
		}
	})
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatalf("appliance did not start:\n%s", a.stderr.String())
	}
	return a
}

// call makes an API request outside the browser (as an integration would).
func (a *appliance) call(t *testing.T, method, path, bearer string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, a.URL+path, rd)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}

// routeExists reports whether this build serves the API route (a 404 with
// "No route" means the route is not registered at all).
func (a *appliance) routeExists(t *testing.T, path string) bool {
	t.Helper()
	code, body := a.call(t, http.MethodGet, path, "", nil)
	detail, _ := body["detail"].(string)
	return !(code == http.StatusNotFound && strings.HasPrefix(detail, "No route"))
}

// createAdmin completes first-run setup through the API.
func (a *appliance) createAdmin(t *testing.T, email, password string) {
	t.Helper()
	code, body := a.call(t, http.MethodPost, "/api/v1/setup", "", map[string]string{"token": a.SetupToken, "email": email, "password": password})
	if code/100 != 2 {
		t.Fatalf("setup: %d %v", code, body)
	}
}

// signIn signs in through the API and returns the session cookie's value.
func (a *appliance) signIn(t *testing.T, email, password string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"email": email, "password": password})
	res, err := http.Post(a.URL+"/api/v1/session", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	for _, c := range res.Cookies() {
		if c.Name == "backstop_session" && c.Value != "" {
			return c.Value
		}
	}
	t.Fatalf("sign-in: %d and no session cookie", res.StatusCode)
	return ""
}

func waitFor(t testing.TB, what string, timeout time.Duration, ok func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
