package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"backstop/app"

	"github.com/google/go-github/v72/github"
)

// TestWebhooksSurviveKill9 drives the built binary over HTTP: register a
// webhook, queue test events while the receiver hangs, kill -9 the
// appliance mid-attempt, restart it on the same data directory, and check
// that every queued delivery arrives, signed with the secret shown at
// creation (secret key file and sealed secrets survive the restart too).
func TestWebhooksSurviveKill9(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "backstop")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dataDir := t.TempDir()
	environ := append(os.Environ(), "SERVICE_LISTEN=127.0.0.1:0", "SERVICE_DATA_DIR="+dataDir,
		"SERVICE_WEBHOOK_ALLOW_PRIVATE=true", "SERVICE_LOG_LEVEL=info")
	admin := func(args ...string) string {
		cmd := exec.Command(bin, append([]string{"admin"}, args...)...)
		cmd.Env = environ
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("admin %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	tenant := admin("create-tenant", "--name", "Acme")
	key := admin("create-key", "--tenant", tenant, "--name", "psa", "--scopes", "webhooks:manage")

	var mu sync.Mutex
	hang := true
	seen := map[string]int{} // delivery id -> verified requests
	var badSig []string
	var secret string
	inFlight := make(chan struct{}, 100)
	release := make(chan struct{})
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		hanging := hang
		mu.Unlock()
		if hanging {
			inFlight <- struct{}{}
			select { // until the appliance dies (the connection drops) or the test ends
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if err := github.ValidateSignature(r.Header.Get("X-Service-Signature"), body, []byte(secret)); err != nil {
			badSig = append(badSig, r.Header.Get("X-Service-Delivery"))
		}
		seen[r.Header.Get("X-Service-Delivery")]++
	}))
	defer recv.Close()
	defer close(release)

	a := startServe(t, bin, environ)
	call := func(method, path, body string) (int, []byte) {
		req, _ := http.NewRequest(method, a+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, b
	}
	code, b := call("POST", "/api/v1/webhooks", `{"url":"`+recv.URL+`/hook","events":["job.failed"]}`)
	if code != 201 {
		t.Fatalf("create: %d %s", code, b)
	}
	var created struct{ ID, Secret string }
	json.Unmarshal(b, &created)
	mu.Lock()
	secret = created.Secret
	mu.Unlock()
	const queued = 6
	var ids []string
	for range queued {
		code, b := call("POST", "/api/v1/webhooks/"+created.ID+"/test", "")
		if code != 202 {
			t.Fatalf("test: %d %s", code, b)
		}
		var d app.Delivery
		json.Unmarshal(b, &d)
		ids = append(ids, d.ID)
	}
	select {
	case <-inFlight:
	case <-time.After(10 * time.Second):
		t.Fatal("no attempt started")
	}

	killServe(t) // kill -9 while attempts are in flight
	mu.Lock()
	hang = false
	mu.Unlock()

	a = startServe(t, bin, environ)
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, b := call("GET", "/api/v1/webhooks/"+created.ID+"/deliveries", "")
		var page struct{ Items []app.Delivery }
		json.Unmarshal(b, &page)
		done := code == 200 && len(page.Items) == queued
		for _, d := range page.Items {
			done = done && d.State == app.DeliveryDelivered
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after restart: %d %s", code, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		if seen[id] == 0 {
			t.Errorf("delivery %s never arrived after the restart", id)
		}
	}
	if len(badSig) > 0 {
		t.Errorf("deliveries with a bad signature after restart: %v", badSig)
	}
	if raw, err := os.ReadFile(filepath.Join(dataDir, "backstop.db")); err == nil && bytes.Contains(raw, []byte(secret)) {
		t.Error("the database holds the secret in the clear")
	}
}

var (
	serveMu   sync.Mutex
	serveProc *exec.Cmd
	addrLine  = regexp.MustCompile(`backstop serving.*addr=([0-9.]+:[0-9]+)`)
)

// startServe runs `backstop serve` and returns its base URL once it serves.
func startServe(t *testing.T, bin string, environ []string) string {
	t.Helper()
	cmd := exec.Command(bin, "serve")
	cmd.Env = environ
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	serveMu.Lock()
	serveProc = cmd
	serveMu.Unlock()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := addrLine.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	select {
	case a := <-addr:
		return "http://" + a
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not start")
		return ""
	}
}

// killServe sends SIGKILL: no shutdown code runs.
func killServe(t *testing.T) {
	serveMu.Lock()
	defer serveMu.Unlock()
	if err := serveProc.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	serveProc.Wait()
}
