package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/jobs"
	"backstop/store"
)

// jobsHelperEnv switches the test binary into a serve process with a test
// job kind (see TestJobsServeHelper).
const jobsHelperEnv = "BACKSTOP_JOBS_HELPER"

// TestJobsServeHelper is not a test: run with BACKSTOP_JOBS_HELPER set, it is
// the appliance process of TestJobsSurviveKill9 — the real serve command
// with one extra job kind, endpoint backups that either block until the
// process stops ("block") or finish at once ("finish").
func TestJobsServeHelper(t *testing.T) {
	mode := os.Getenv(jobsHelperEnv)
	if mode == "" {
		t.Skip("helper process for TestJobsSurviveKill9")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	kind := jobs.Kind{Action: app.ActionBackup, TargetType: "endpoint", Queue: app.QueueEndpointBackup,
		Resolve: func(ctx context.Context, tenantID, id string, _ json.RawMessage) (app.JobTarget, error) {
			return app.JobTarget{Type: "endpoint", ID: id, DisplayName: "host-" + id}, nil
		},
		Run: func(ctx context.Context, r *jobs.Run) (*jobs.Outcome, error) {
			r.Progress(ctx, app.JobProgress{Phase: "transferring", Percent: 10})
			if mode == "block" {
				<-ctx.Done()
				return nil, ctx.Err()
			}
			r.Progress(ctx, app.JobProgress{Phase: "transferring", Percent: 90})
			return &jobs.Outcome{SnapshotID: "snap-" + r.Job.ID}, nil
		}}
	e := env{stdin: strings.NewReader(""), stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv, jobKinds: []jobs.Kind{kind},
		listening: func(addr string) { os.Stdout.WriteString("LISTENING " + addr + "\n") }}
	if err := run(ctx, []string{"serve"}, e); err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(1)
	}
	os.Exit(0)
}

// jobsChild is one appliance process.
type jobsChild struct {
	cmd  *exec.Cmd
	base string
}

func startJobsChild(t *testing.T, dataDir, mode string) *jobsChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestJobsServeHelper$")
	cmd.Env = append(os.Environ(), jobsHelperEnv+"="+mode, "SERVICE_LISTEN=127.0.0.1:0", "SERVICE_DATA_DIR="+dataDir,
		"SERVICE_LOG_LEVEL=warn")
	cmd.Stderr = io.Discard
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "LISTENING "); ok {
				addr <- a
			}
		}
	}()
	select {
	case a := <-addr:
		return &jobsChild{cmd: cmd, base: "http://" + a}
	case <-time.After(30 * time.Second):
		t.Fatal("appliance did not start listening")
		return nil
	}
}

// TestJobsSurviveKill9 runs jobs in a real appliance process, kills it with
// SIGKILL while they run and a client follows one over SSE, restarts it on
// the same data directory and checks over HTTP that the jobs were ended as
// interrupted (no webhook event) and ran again to completion.
func TestJobsSurviveKill9(t *testing.T) {
	dataDir := t.TempDir()
	admin := func(args ...string) string {
		var out bytes.Buffer
		e := env{stdin: strings.NewReader(""), stdout: &out, stderr: io.Discard,
			getenv: func(k string) string { return map[string]string{"SERVICE_DATA_DIR": dataDir}[k] }}
		if err := run(context.Background(), append([]string{"admin"}, args...), e); err != nil {
			t.Fatalf("admin %v: %v", args, err)
		}
		return strings.TrimSpace(out.String())
	}
	tenant := admin("create-tenant", "--name", "Acme")
	key := admin("create-key", "--tenant", tenant, "--name", "psa", "--scopes", "jobs:read,restore:write")

	call := func(c *jobsChild, method, path, body string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, c.base+path, strings.NewReader(body))
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

	first := startJobsChild(t, dataDir, "block")
	var started []string
	for _, ep := range []string{"ep_one", "ep_two"} {
		code, b := call(first, "POST", "/api/v1/backups", `{"targetType":"endpoint","targetId":"`+ep+`"}`)
		if code != 202 {
			t.Fatalf("start backup: %d %s", code, b)
		}
		var j app.Job
		json.Unmarshal(b, &j)
		started = append(started, j.ID)
	}
	// Follow the first job over SSE while it runs.
	req, _ := http.NewRequest("GET", first.base+"/api/v1/jobs/"+started[0]+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	rd := bufio.NewReader(res.Body)
	for sawSnapshot := false; !sawSnapshot; {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		sawSnapshot = line == "event: snapshot\n"
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, b := call(first, "GET", "/api/v1/jobs?state=running", "")
		if code == 200 && strings.Count(string(b), `"state":"running"`) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobs not running: %s", b)
		}
		time.Sleep(10 * time.Millisecond)
	}

	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.cmd.Wait()
	io.Copy(io.Discard, rd) // the stream breaks off with the process

	second := startJobsChild(t, dataDir, "finish")
	for _, id := range started {
		code, b := call(second, "GET", "/api/v1/jobs/"+id, "")
		var j app.Job
		json.Unmarshal(b, &j)
		if code != 200 || j.State != app.JobInterrupted || j.Failure != nil || j.FinishedAt == nil {
			t.Fatalf("job %s after the restart: %d %s", id, code, b)
		}
	}
	deadline = time.Now().Add(10 * time.Second)
	var reruns []app.Job
	for {
		code, b := call(second, "GET", "/api/v1/jobs?state=succeeded", "")
		var page struct{ Items []app.Job }
		json.Unmarshal(b, &page)
		if code == 200 && len(page.Items) == 2 {
			reruns = page.Items
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("re-runs did not finish: %d %s", code, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	targets := map[string]bool{}
	for _, j := range reruns {
		if j.Trigger != app.TriggerRetry || j.SnapshotID == nil || *j.SnapshotID != "snap-"+j.ID {
			t.Errorf("re-run %+v", j)
		}
		targets[j.Target.ID] = true
	}
	if !targets["ep_one"] || !targets["ep_two"] {
		t.Errorf("re-runs cover %v, want both endpoints", targets)
	}

	// The interrupted job's stream: snapshot and end at once, state interrupted.
	req, _ = http.NewRequest("GET", second.base+"/api/v1/jobs/"+started[0]+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	res2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res2.Body)
	res2.Body.Close()
	if !bytes.Contains(body, []byte("event: snapshot\n")) || !bytes.Contains(body, []byte("event: end\n")) ||
		!bytes.Contains(body, []byte(`"state":"interrupted"`)) {
		t.Fatalf("stream of the interrupted job: %s", body)
	}

	// Only the re-runs raised events: an interruption is not a failure.
	db, err := store.Open(context.Background(), filepath.Join(dataDir, "backstop.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Reader().Query("SELECT type, body FROM events")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	completed := 0
	for rows.Next() {
		var typ, b string
		if err := rows.Scan(&typ, &b); err != nil {
			t.Fatal(err)
		}
		var ev struct {
			Data struct{ Job app.Job } `json:"data"`
		}
		json.Unmarshal([]byte(b), &ev)
		for _, id := range started {
			if ev.Data.Job.ID == id {
				t.Errorf("the interrupted job %s raised %s", id, typ)
			}
		}
		if typ == app.EventJobCompleted {
			completed++
		}
	}
	if completed != 2 {
		t.Errorf("%d job.completed events, want 2", completed)
	}

	if err := second.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := second.cmd.Wait(); err != nil {
		t.Errorf("graceful stop: %v", err)
	}
}
