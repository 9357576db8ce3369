package agentapi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"backstop/agent"
	"backstop/agentapi"
	"backstop/agentapi/resticrepo"
	"backstop/agentapi/wire"
	"backstop/app"
	"backstop/app/jobs"
	"backstop/assets"
	"backstop/e2e"
	"backstop/store"
	"backstop/store/storetest"
)

// requireRestic returns the real restic binary. Under CI it must exist.
func requireRestic(t *testing.T) string {
	t.Helper()
	return e2e.RequireTool(t, "restic", "restic")
}

// appliance is the agent-facing part of a real appliance on 127.0.0.1: the
// /agent/v1 API, the endpoints' restic repositories and the install files,
// on a real SQLite database, with the job runner's kinds registered.
type appliance struct {
	db      *store.DB
	dataDir string
	url     string
	runner  *jobs.Runner
	tenant  string
	mu      sync.Mutex
	changed []*app.Job
	ended   []*app.Job
}

func newAppliance(t *testing.T) *appliance {
	t.Helper()
	a := &appliance{dataDir: t.TempDir()}
	db := storetest.Open(t, a.dataDir)
	a.db = db
	a.tenant = storetest.Tenant(t, db, "Acme")
	a.runner = jobs.New(jobs.Config{Store: db})
	for _, k := range agentapi.JobKinds(db, db) {
		a.runner.Register(k)
	}
	repo, err := resticrepo.New(resticrepo.Options{Dir: filepath.Join(a.dataDir, "agent", "restic"),
		Auth: resticrepo.EndpointAuthenticator{Endpoints: db}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/agent/v1/", agentapi.New(agentapi.Services{Endpoints: db, Enrollment: db, Agents: db, Jobs: db},
		agentapi.Options{DataDir: a.dataDir, JobChanged: func(j *app.Job) {
			a.mu.Lock()
			a.changed = append(a.changed, j)
			a.mu.Unlock()
		}, JobEnded: func(j *app.Job) {
			a.mu.Lock()
			a.ended = append(a.ended, j)
			a.mu.Unlock()
		}}))
	mux.Handle(resticrepo.PathPrefix, repo)
	mux.Handle("/install/", &agentapi.Install{DataDir: a.dataDir, Script: assets.AgentInstallScript})
	srv := httptest.NewServer(mux) // listens on 127.0.0.1
	t.Cleanup(srv.Close)
	a.url = srv.URL
	return a
}

func (a *appliance) token(t *testing.T) string {
	t.Helper()
	value, tok := app.NewEnrollmentToken(a.tenant, app.ProfileServer, time.Now())
	if err := a.db.CreateEnrollmentToken(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	return value
}

// events returns the outbox's events of a type for a job.
func (a *appliance) events(t *testing.T, typ, jobID string) []map[string]any {
	t.Helper()
	evs, err := a.db.UndispatchedEvents(context.Background(), 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, e := range evs {
		var env struct {
			Type string         `json:"type"`
			Data map[string]any `json:"data"`
		}
		json.Unmarshal(e.Body, &env)
		if job, _ := env.Data["job"].(map[string]any); env.Type == typ && job["id"] == jobID {
			out = append(out, env.Data)
		}
	}
	return out
}

// writeTree writes files with random content and returns their hashes by path.
func writeTree(t *testing.T, dir string, sizes map[string]int) map[string]string {
	t.Helper()
	sums := map[string]string{}
	for name, size := range sizes {
		b := make([]byte, size)
		rand.Read(b)
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		sums[p] = hex.EncodeToString(sum[:])
	}
	return sums
}

func TestAgentEndToEnd(t *testing.T) {
	resticPath := requireRestic(t)
	ctx := context.Background()
	ap := newAppliance(t)
	src := t.TempDir()
	sums := writeTree(t, src, map[string]int{"a.txt": 1000, "sub/b.bin": 300_000, "sub/deeper/c.bin": 70_000, "empty": 0})
	stateDir := filepath.Join(t.TempDir(), "state")

	// Enrollment: garbage refused, the token works once, replay refused.
	token := ap.token(t)
	_, err := agent.Enroll(ctx, agent.EnrollOptions{Server: ap.url, Token: "garbage", StateDir: stateDir})
	if !agent.IsUnauthorized(err) {
		t.Fatalf("garbage token: want 401, got %v", err)
	}
	_, err = agent.Enroll(ctx, agent.EnrollOptions{Server: ap.url, Token: "bse_" + strings.Repeat("x", 40), StateDir: stateDir})
	if !agent.IsUnauthorized(err) || !strings.Contains(err.Error(), "not valid") {
		t.Fatalf("unknown token: want 401 not valid, got %v", err)
	}
	resp, err := agent.Enroll(ctx, agent.EnrollOptions{Server: ap.url, Token: token, StateDir: stateDir, Paths: []string{src}, Restic: resticPath})
	if err != nil {
		t.Fatalf("enroll: %v", err)
	}
	_, err = agent.Enroll(ctx, agent.EnrollOptions{Server: ap.url, Token: token, StateDir: filepath.Join(t.TempDir(), "other")})
	if !agent.IsUnauthorized(err) || !strings.Contains(err.Error(), "already used") {
		t.Fatalf("replayed token: want 401 already used, got %v", err)
	}
	for _, f := range []string{"agent.json", "config.json"} {
		st, err := os.Stat(filepath.Join(stateDir, f))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: want mode 0600, got %v %v", f, st.Mode(), err)
		}
	}
	epID := resp.EndpointID
	pwFile := agentapi.RepositoryPasswordFile(ap.dataDir, epID)
	if st, err := os.Stat(pwFile); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("appliance password file: %v", err)
	}
	if e, _ := ap.db.Endpoint(ctx, epID); e.View(time.Now(), app.DefaultEndpointRules()).Readiness.State != app.ReadinessNoBackup {
		t.Fatalf("fresh endpoint readiness: %+v", e)
	}

	// A backup with the real restic against the real repository server.
	a, err := agent.Open(stateDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var bar bytes.Buffer
	a.Terminal = &bar
	f, err := a.Backup(ctx, wire.TriggerManual, "")
	if err != nil || f.State != wire.StateSucceeded {
		t.Fatalf("backup: %v %+v", err, f.Failure)
	}
	if len(f.SnapshotID) != 64 {
		t.Fatalf("snapshot id %q is not the full id", f.SnapshotID)
	}
	if !strings.Contains(bar.String(), "%") {
		t.Errorf("no progress bar drawn: %q", bar.String())
	}
	// Only non-empty files are worth sampling; every sample must be exact.
	if len(f.Sampled) < 3 {
		t.Fatalf("sampled %d files, want the 4 files: %+v", len(f.Sampled), f.Sampled)
	}
	for _, s := range f.Sampled {
		if sums[s.Path] != s.SHA256 {
			t.Errorf("sample %s: sha256 %s, want %s", s.Path, s.SHA256, sums[s.Path])
		}
	}

	// The appliance sees the snapshot with the password it keeps itself.
	out, err := exec.Command(resticPath, "-r", agentapi.RepositoryDir(ap.dataDir, epID), "--password-file", pwFile,
		"snapshots", "--json").Output()
	if err != nil || !strings.Contains(string(out), f.SnapshotID) {
		t.Fatalf("appliance-side restic snapshots: %v\n%s", err, out)
	}

	e, _ := ap.db.Endpoint(ctx, epID)
	v := e.View(time.Now(), app.DefaultEndpointRules())
	if v.LastSeenAt == nil || v.LastSuccessAt == nil || v.LastBackupAt == nil || v.Readiness.State != app.ReadinessUnverified ||
		v.Connection != app.ConnectionOnline || e.LastSnapshotID != f.SnapshotID || v.OS == "" || v.AgentVersion == "" {
		t.Fatalf("endpoint after backup: %+v (stored %+v)", v, e)
	}
	run, err := ap.db.AgentRun(ctx, f.Run.RunID)
	if err != nil {
		t.Fatal(err)
	}
	job, _ := ap.db.Job(ctx, run.JobID)
	if job.State != app.JobSucceeded || job.Queue != app.QueueEndpointBackup || job.SnapshotID == nil ||
		*job.SnapshotID != f.SnapshotID || job.DurationMs == nil || job.Target.ID != epID {
		t.Fatalf("backup job: %+v", job)
	}
	evs := ap.events(t, app.EventJobCompleted, job.ID)
	if len(evs) != 1 {
		t.Fatalf("job.completed events: %d", len(evs))
	}
	if ep, _ := evs[0]["endpoint"].(map[string]any); ep["id"] != epID || ep["hostname"] == "" || ep["profile"] != "server" {
		t.Fatalf("data.endpoint: %+v", evs[0]["endpoint"])
	}
	if _, files, err := ap.db.SnapshotSamples(ctx, f.SnapshotID); err != nil || len(files) != len(f.Sampled) {
		t.Fatalf("samples kept for restore tests: %v %d", err, len(files))
	}

	t.Run("restore command at the next heartbeat", func(t *testing.T) {
		target := t.TempDir()
		params, _ := json.Marshal(app.RestoreParams{SnapshotID: f.SnapshotID, Destination: target})
		job, err := ap.runner.Submit(ctx, app.JobRequest{TenantID: ap.tenant, Action: app.ActionRestore,
			TargetID: f.SnapshotID, Trigger: app.TriggerAPI, Params: params})
		if err != nil {
			t.Fatal(err)
		}
		if job.Queue != app.QueueEndpointRestore || job.State != app.JobQueued {
			t.Fatalf("queued restore: %+v", job)
		}
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- a.Run(runCtx) }() // heartbeats at once, picks the command up
		j := waitJob(t, ap.db, job.ID)
		stop()
		<-done
		if j.State != app.JobSucceeded || j.Trigger != app.TriggerAPI {
			t.Fatalf("restore job: %+v failure %+v", j, j.Failure)
		}
		for path, want := range sums {
			b, err := os.ReadFile(filepath.Join(target, path))
			got := sha256.Sum256(b)
			if err != nil || hex.EncodeToString(got[:]) != want {
				t.Errorf("restored %s: %v", path, err)
			}
		}
	})

	t.Run("SIGTERM during a run reports interrupted", func(t *testing.T) {
		writeTree(t, src, map[string]int{"big.bin": 120 << 20})
		runCtx, stop := context.WithCancel(ctx)
		a.Terminal = &cancelOnProgress{stop: stop}
		f, err := a.Backup(runCtx, wire.TriggerSchedule, "")
		a.Terminal = nil
		os.Remove(filepath.Join(src, "big.bin"))
		if err != nil || f.State != wire.StateInterrupted {
			t.Fatalf("want interrupted, got %v %+v", err, f)
		}
		run, err := ap.db.AgentRun(ctx, f.Run.RunID)
		if err != nil {
			t.Fatalf("interrupted run not reported: %v", err)
		}
		j, _ := ap.db.Job(ctx, run.JobID)
		if j.State != app.JobInterrupted || j.Failure != nil {
			t.Fatalf("interrupted job: %+v", j)
		}
		if n := len(ap.events(t, app.EventJobFailed, j.ID)) + len(ap.events(t, app.EventJobCompleted, j.ID)); n != 0 {
			t.Fatalf("an interrupted run raised %d webhook events", n)
		}
		if e, _ := ap.db.Endpoint(ctx, epID); e.LastBackupState != app.JobSucceeded {
			t.Fatalf("interruption changed lastBackupState to %q", e.LastBackupState)
		}
	})

	t.Run("spool survives an unreachable appliance and is sent once", func(t *testing.T) {
		off, err := agent.Open(stateDir, nil)
		if err != nil {
			t.Fatal(err)
		}
		off.Client.Server = "http://127.0.0.1:1" // the agent API is unreachable; the repository is not
		f, err := off.Backup(ctx, wire.TriggerSchedule, "")
		if err != nil || f.State != wire.StateSucceeded {
			t.Fatalf("offline backup: %v %+v", err, f.Failure)
		}
		if ids, _ := off.Spool.Pending(); len(ids) != 1 || ids[0] != f.Run.RunID {
			t.Fatalf("spooled: %v", ids)
		}
		if _, err := ap.db.AgentRun(ctx, f.Run.RunID); app.ErrorCode(err) != app.ENOTFOUND {
			t.Fatalf("appliance knows an unsent run: %v", err)
		}
		// Restart: a new agent process on the same state directory sends it.
		back, err := agent.Open(stateDir, nil)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := back.Spool.Flush(ctx); err != nil || n != 1 {
			t.Fatalf("flush: %d %v", n, err)
		}
		if ids, _ := back.Spool.Pending(); len(ids) != 0 {
			t.Fatalf("still spooled: %v", ids)
		}
		run, err := ap.db.AgentRun(ctx, f.Run.RunID)
		if err != nil {
			t.Fatal(err)
		}
		// A repeat (crash between acceptance and removal) is a no-op.
		res, err := back.Client.Finish(ctx, f)
		if err != nil || !res.Duplicate || res.JobID != run.JobID {
			t.Fatalf("repeat finish: %+v %v", res, err)
		}
		if n := len(ap.events(t, app.EventJobCompleted, run.JobID)); n != 1 {
			t.Fatalf("job.completed raised %d times", n)
		}
		ap.mu.Lock()
		var ended int
		for _, j := range ap.ended {
			if j.ID == run.JobID {
				ended++
				if !app.JobTerminal(j.State) {
					t.Errorf("JobEnded told of a %s job", j.State)
				}
			}
		}
		ap.mu.Unlock()
		if ended != 1 { // metrics observe each run's duration once
			t.Fatalf("JobEnded told %d times of the run's job", ended)
		}
		e, _ := ap.db.Endpoint(ctx, epID)
		if e.LastSnapshotID != f.SnapshotID {
			t.Fatalf("lastSnapshotId %s, want the spooled run's %s", e.LastSnapshotID, f.SnapshotID)
		}
	})

	t.Run("missing restic fails with agent.tool_missing", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		a.State.Restic = filepath.Join(t.TempDir(), "no-restic")
		defer func() { a.State.Restic = resticPath }()
		f, err := a.Backup(ctx, wire.TriggerManual, "")
		if err != nil || f.State != wire.StateFailed || f.Failure.Code != "agent.tool_missing" {
			t.Fatalf("want agent.tool_missing, got %v %+v", err, f.Failure)
		}
		run, _ := ap.db.AgentRun(ctx, f.Run.RunID)
		j, _ := ap.db.Job(ctx, run.JobID)
		if j.State != app.JobFailed || j.Failure == nil || j.Failure.Code != "agent.tool_missing" || j.Failure.Category != app.CategoryAgent {
			t.Fatalf("failed job: %+v", j.Failure)
		}
		evs := ap.events(t, app.EventJobFailed, j.ID)
		if len(evs) != 1 || evs[0]["endpoint"] == nil {
			t.Fatalf("job.failed with data.endpoint: %+v", evs)
		}
		if e, _ := ap.db.Endpoint(ctx, epID); *e.View(time.Now(), app.DefaultEndpointRules()).Attention != app.AttentionLastBackupFailed {
			t.Fatalf("attention after a failed backup: %+v", e)
		}
	})

	t.Run("wrong secret and revoked endpoint are refused everywhere", func(t *testing.T) {
		wrong := &agent.Client{Server: ap.url, EndpointID: epID, Secret: "bss_wrong", HTTP: http.DefaultClient}
		if _, err := wrong.Config(ctx); !agent.IsUnauthorized(err) {
			t.Fatalf("wrong secret: %v", err)
		}
		if _, err := ap.db.UpdateEndpoint(ctx, epID, func(e *app.Endpoint) error {
			e.Status, e.RevokedAt = app.EndpointRevoked, app.Ptr(time.Now())
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Client.Config(ctx); !agent.IsUnauthorized(err) {
			t.Errorf("config after revoke: %v", err)
		}
		if _, err := a.Client.Heartbeat(ctx, wire.HeartbeatRequest{OS: "linux", Arch: "amd64"}); !agent.IsUnauthorized(err) {
			t.Errorf("heartbeat after revoke: %v", err)
		}
		if _, err := a.Client.Update(ctx); !agent.IsUnauthorized(err) {
			t.Errorf("update after revoke: %v", err)
		}
		f, err := a.Backup(ctx, wire.TriggerManual, "") // restic is refused by the repository too
		if err != nil || f.State != wire.StateFailed || f.Failure.Code != "restic.repository_refused" {
			t.Errorf("backup after revoke: %v %+v", err, f.Failure)
		}
		if ids, _ := a.Spool.Pending(); len(ids) != 1 {
			t.Errorf("the refused report stays spooled (the appliance may be restored): %v", ids)
		}
		// The data stays: the repository and its snapshots are still there.
		out, err := exec.Command(resticPath, "-r", agentapi.RepositoryDir(ap.dataDir, epID), "--password-file", pwFile,
			"snapshots", "--json").Output()
		if err != nil || !strings.Contains(string(out), e.LastSnapshotID) {
			t.Errorf("repository after revoke: %v", err)
		}
	})
}

// waitJob polls until the job ends (at most 60 s: restic runs for real).
func waitJob(t *testing.T, db *store.DB, id string) *app.Job {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		j, err := db.Job(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if app.JobTerminal(j.State) {
			return j
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("job %s did not end", id)
	return nil
}

// cancelOnProgress is a terminal that stops the run (as SIGTERM does) once
// restic reports upload progress, i.e. while restic is working.
type cancelOnProgress struct {
	once sync.Once
	stop context.CancelFunc
}

func (c *cancelOnProgress) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("uploading")) {
		c.once.Do(c.stop)
	}
	return len(p), nil
}
