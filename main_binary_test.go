package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestBuiltBinary builds the real binary and checks what only a process
// shows: the printed version, exit codes, one-line errors on stderr, and a
// clean exit on SIGTERM while serving.
func TestBuiltBinary(t *testing.T) {
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "backstop")
	build := exec.Command("go", "build", "-o", bin, "-ldflags", "-X backstop/app.Version=9.8.7", ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dataDir := t.TempDir()
	cmd := func(envs []string, args ...string) (stdout, stderr string, code int) {
		c := exec.Command(bin, args...)
		c.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, envs...)
		var o, e bytes.Buffer
		c.Stdout, c.Stderr = &o, &e
		err := c.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return o.String(), e.String(), code
	}

	if out, _, code := cmd(nil, "version"); code != 0 || out != "9.8.7\n" {
		t.Errorf("version: %q, exit %d", out, code)
	}
	for _, tt := range []struct {
		envs     []string
		args     []string
		wantCode int
		want     string
	}{
		{[]string{"SERVICE_EDITION=bogus", "SERVICE_DATA_DIR=" + dataDir}, []string{"serve"}, 1, "edition"},
		{nil, []string{"admin", "revoke-key", "--data-dir", dataDir, "key_missing"}, 1, "key_missing"},
		{nil, []string{"admin", "create-key", "--data-dir", dataDir}, 2, "name"},
		{nil, []string{"frobnicate"}, 2, "frobnicate"},
	} {
		out, errOut, code := cmd(tt.envs, tt.args...)
		if code != tt.wantCode {
			t.Errorf("%v: exit %d, want %d (stderr %q)", tt.args, code, tt.wantCode, errOut)
		}
		if lines := strings.Count(errOut, "\n"); lines != 1 || !strings.HasPrefix(errOut, "backstop: ") || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: stderr %q, want one line naming %q", tt.args, errOut, tt.want)
		}
		if out != "" {
			t.Errorf("%v: stdout %q", tt.args, out)
		}
	}

	// SIGTERM: the server stops accepting, finishes, and exits 0.
	serve := exec.Command(bin, "serve")
	serve.Env = []string{"PATH=" + os.Getenv("PATH"), "SERVICE_LISTEN=127.0.0.1:0", "SERVICE_DATA_DIR=" + dataDir, "SERVICE_LOG_FORMAT=json"}
	stderr, _ := serve.StderrPipe()
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	defer serve.Process.Kill()
	addrRe := regexp.MustCompile(`"addr":"([0-9.]+:[0-9]+)"`)
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var addr string
	deadline := time.After(30 * time.Second)
	for addr == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("serve exited before listening")
			}
			if m := addrRe.FindStringSubmatch(l); m != nil {
				addr = m[1]
			}
		case <-deadline:
			t.Fatal("serve did not report its address")
		}
	}
	res, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("healthz %d", res.StatusCode)
	}
	go func() {
		for range lines { // keep draining so the server never blocks on stderr
		}
	}()
	if err := serve.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- serve.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve after SIGTERM: %v, want exit 0", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not exit within 15 s of SIGTERM")
	}
	if _, err := http.Get("http://" + addr + "/healthz"); err == nil {
		t.Error("still serving after SIGTERM")
	}
}
