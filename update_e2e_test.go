package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/update/githubtest"
)

// TestServeUpdateCheckOverHTTP runs the real serve with update.check on
// (from the environment, as from YAML) against a local GitHub stand-in that
// holds its answer: the status call must answer pending at once, without
// waiting for GitHub, and ok with updateAvailable once the check is done.
func TestServeUpdateCheckOverHTTP(t *testing.T) {
	const repo = "backstop-dev/backstop"
	gh := githubtest.New(repo, nil, githubtest.Release{
		Tag: "v1.4.0", CreatedAt: time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC), PublishedAt: time.Date(2026, 2, 1, 10, 0, 0, 0, time.UTC)})
	defer gh.Close()
	gh.Hold()
	defer gh.Release()

	vars := map[string]string{
		"SERVICE_LISTEN": "127.0.0.1:0", "SERVICE_DATA_DIR": t.TempDir(), "SERVICE_LOG_LEVEL": "error",
		"SERVICE_UPDATE_CHECK": "true", "SERVICE_UPDATE_API_URL": gh.URL, "SERVICE_UPDATE_REPOSITORY": repo,
	}
	e := env{stdin: strings.NewReader(""), stdout: new(bytes.Buffer), stderr: new(bytes.Buffer),
		getenv: func(k string) string { return vars[k] }}
	ctx := context.Background()
	adminRun := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		e2 := e
		e2.stdout = &out
		if err := run(ctx, append([]string{"admin"}, args...), e2); err != nil {
			t.Fatalf("admin %v: %v", args, err)
		}
		return strings.TrimSpace(out.String())
	}
	tenant := adminRun("create-tenant", "--name", "Acme")
	key := adminRun("create-key", "--tenant", tenant, "--name", "rmm", "--scopes", "status:read")

	addrc := make(chan string, 1)
	e.listening = func(addr string) { addrc <- addr }
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- run(sctx, []string{"serve"}, e) }()
	var base string
	select {
	case addr := <-addrc:
		base = "http://" + addr
	case err := <-served:
		t.Fatalf("serve ended: %v\n%s", err, e.stderr)
	}
	defer func() {
		stop()
		gh.Release()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()

	status := func() (app.VersionInfo, time.Duration) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+"/api/v1/status", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		took := time.Since(start)
		var body struct {
			Version app.VersionInfo `json:"version"`
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /api/v1/status: %s", resp.Status)
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		return body.Version, took
	}

	deadline := time.Now().Add(10 * time.Second)
	for len(gh.Requests()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("serve made no update check with update.check on")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// GitHub now holds the request open; the status call must not wait.
	v, took := status()
	if v.UpdateCheck != app.UpdateCheckPending || v.Latest != nil || v.UpdateAvailable != nil || v.Running != app.Version {
		t.Fatalf("while GitHub hangs: %+v, want pending", v)
	}
	if took > 2*time.Second {
		t.Fatalf("status call took %s while GitHub hung", took)
	}

	gh.Release()
	for v.UpdateCheck == app.UpdateCheckPending {
		if time.Now().After(deadline) {
			t.Fatal("the check never completed")
		}
		time.Sleep(5 * time.Millisecond)
		v, _ = status()
	}
	if v.UpdateCheck != app.UpdateCheckOK || v.UpdateAvailable == nil || !*v.UpdateAvailable || *v.Latest != "1.4.0" ||
		*v.LatestTag != "v1.4.0" || *v.ReleaseURL != gh.ReleaseURL("v1.4.0") || v.Channel != "stable" || v.CheckedAt == nil {
		t.Fatalf("after the check: %+v", v)
	}
	if ua := gh.Requests()[0].Header.Get("User-Agent"); ua != "backstop/"+app.Version {
		t.Fatalf("User-Agent %q", ua)
	}
}
