package verify_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/jobs"
	"backstop/app/resticcmd"
	"backstop/app/verify"
	"backstop/e2e"
	"backstop/store"
	"backstop/store/storetest"
)

// requireRestic returns the real restic binary. Under CI it must exist.
func requireRestic(t *testing.T) string {
	t.Helper()
	return e2e.RequireTool(t, "restic", "restic")
}

// appliance is the verify side of a real appliance: a real SQLite
// database, the real job runner with the verify kind, and endpoint
// repositories in the data directory's layout.
type appliance struct {
	db      *store.DB
	dataDir string
	restic  string
	runner  *jobs.Runner
	tenant  string
}

func newAppliance(t *testing.T) *appliance {
	t.Helper()
	return newApplianceVerifyingWith(t, "")
}

// newApplianceVerifyingWith runs verify jobs with another restic binary
// than the one the test's repositories are made with ("" for the same).
func newApplianceVerifyingWith(t *testing.T, verifyRestic string) *appliance {
	t.Helper()
	return newApplianceWith(t, verifyRestic, nil)
}

// newApplianceWith also shares leases with the verify runner (nil: none).
func newApplianceWith(t *testing.T, verifyRestic string, leases *resticcmd.Leases) *appliance {
	t.Helper()
	ctx := context.Background()
	a := &appliance{dataDir: t.TempDir(), restic: requireRestic(t)}
	if verifyRestic == "" {
		verifyRestic = a.restic
	}
	db := storetest.Open(t, a.dataDir)
	a.db = db
	a.tenant = storetest.Tenant(t, db, "Acme")
	v := verify.New(verify.Config{Restic: verifyRestic, TempDir: a.tempDir(), Locate: a.locate,
		Endpoints: db, Samples: db, Reports: db, Leases: leases, Logger: slog.New(slog.DiscardHandler)})
	a.runner = jobs.New(jobs.Config{Store: db, Schedules: db})
	a.runner.Register(v.Kind())
	if err := a.runner.Open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.runner.Close() })
	return a
}

func (a *appliance) tempDir() string { return filepath.Join(a.dataDir, "tmp") }

// locate is the data directory's layout (CONTRACT §1): agent/restic/<id>
// and agent/keys/<id>.
func (a *appliance) locate(id string) (string, string) {
	return filepath.Join(a.dataDir, "agent", "restic", id), filepath.Join(a.dataDir, "agent", "keys", id)
}

// endpoint creates an active endpoint with an initialised repository.
func (a *appliance) endpoint(t *testing.T, hostname string) *app.Endpoint {
	t.Helper()
	seen := time.Now()
	e := &app.Endpoint{TenantID: a.tenant, Hostname: hostname, Profile: app.ProfileServer, LastSeenAt: &seen}
	if err := a.db.CreateEndpoint(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	_, pw := a.locate(e.ID)
	if err := os.MkdirAll(filepath.Dir(pw), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pw, []byte(app.RandomToken(32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a.resticCmd(t, e.ID, "init")
	return e
}

func (a *appliance) resticCmd(t *testing.T, endpointID string, args ...string) []byte {
	t.Helper()
	repo, pw := a.locate(endpointID)
	cmd := exec.Command(a.restic, append(args, "--no-cache")...)
	cmd.Env = append(os.Environ(), "RESTIC_REPOSITORY="+repo, "RESTIC_PASSWORD_FILE="+pw, "TMPDIR="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("restic %s: %v: %s", args[0], err, stderr.String())
	}
	return out
}

// backup backs src up with restic, as the agent does, and reports the run
// with the given samples (nil: every regular file under src, hashed here),
// which makes the snapshot the endpoint's newest. It returns the snapshot id.
func (a *appliance) backup(t *testing.T, e *app.Endpoint, src string, samples []app.SampledFile) (string, []app.SampledFile) {
	t.Helper()
	ctx := context.Background()
	a.resticCmd(t, e.ID, "backup", "--json", src)
	var snaps []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(a.resticCmd(t, e.ID, "snapshots", "--json", "latest"), &snaps); err != nil || len(snaps) != 1 {
		t.Fatalf("snapshots: %v %v", snaps, err)
	}
	if samples == nil {
		samples = hashTree(t, src)
	}
	now := time.Now()
	job := &app.Job{TenantID: e.TenantID, Queue: app.QueueEndpointBackup, Action: app.ActionBackup, Trigger: app.TriggerSchedule,
		Target: app.JobTarget{Type: app.TargetEndpoint, ID: e.ID, DisplayName: e.Hostname}, QueuedAt: app.At(now)}
	run := &app.AgentRun{ID: "run_" + app.RandomToken(12), EndpointID: e.ID, Kind: app.ActionBackup, StartedAt: now}
	if _, err := a.db.StartAgentRun(ctx, run, job); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.db.FinishAgentRun(ctx, app.AgentRunEnd{RunID: run.ID, EndpointID: e.ID, State: app.JobSucceeded,
		FinishedAt: now, SnapshotID: snaps[0].ID, Sampled: samples}, nil); err != nil {
		t.Fatal(err)
	}
	return snaps[0].ID, samples
}

// hashTree samples every regular file under root, as the agent would.
func hashTree(t *testing.T, root string) []app.SampledFile {
	t.Helper()
	var out []app.SampledFile
	err := filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err != nil || !info.Mode().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		out = append(out, app.SampledFile{Path: p, Size: info.Size(), SHA256: hex.EncodeToString(sum[:])})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// writeTree writes files (relative path -> content) under a new directory.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "src")
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// verifyNow submits a verify of the endpoint through the runner and waits
// for the job's end.
func (a *appliance) verifyNow(t *testing.T, endpointID string) *app.Job {
	t.Helper()
	ctx := context.Background()
	j, err := a.runner.Submit(ctx, app.JobRequest{TenantID: a.tenant, Action: app.ActionVerify, TargetType: app.TargetEndpoint,
		TargetID: endpointID, Trigger: app.TriggerAPI})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		got, err := a.db.Job(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if app.JobTerminal(got.State) {
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("verify job %s did not finish", j.ID)
	return nil
}

// readiness is the endpoint's readiness and attention as the API shows them.
func (a *appliance) readiness(t *testing.T, id string) (string, string) {
	t.Helper()
	e, err := a.db.Endpoint(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	v := e.View(time.Now(), app.DefaultEndpointRules())
	att := ""
	if v.Attention != nil {
		att = *v.Attention
	}
	return v.Readiness.State, att
}

// events returns the data of the outbox's events of a type for a job.
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
		if err := json.Unmarshal(e.Body, &env); err != nil {
			t.Fatal(err)
		}
		if job, _ := env.Data["job"].(map[string]any); env.Type == typ && job["id"] == jobID {
			out = append(out, env.Data)
		}
	}
	return out
}

// report returns the latest verify report of the endpoint.
func (a *appliance) report(t *testing.T, endpointID string) *app.VerifyReport {
	t.Helper()
	r, err := a.db.LatestVerifyReport(context.Background(), app.VerifyReportFilter{EndpointID: endpointID})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// largestPack returns the path of the biggest pack file (file data).
func (a *appliance) largestPack(t *testing.T, endpointID string) string {
	t.Helper()
	repo, _ := a.locate(endpointID)
	var best string
	var size int64
	filepath.Walk(filepath.Join(repo, "data"), func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() && info.Size() > size {
			best, size = p, info.Size()
		}
		return nil
	})
	if best == "" {
		t.Fatal("no pack files")
	}
	return best
}

// flipBytes inverts a few bytes in the middle of a file (restic makes pack
// files read-only).
func flipBytes(t *testing.T, path string) {
	t.Helper()
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(b) / 2; i < len(b)/2+4; i++ {
		b[i] ^= 0xff
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// assertNoTemp fails when a verify left anything in the temp directory.
func (a *appliance) assertNoTemp(t *testing.T) {
	t.Helper()
	left, _ := filepath.Glob(filepath.Join(a.tempDir(), "*"))
	if len(left) > 0 {
		t.Fatalf("temporary files left behind: %s", strings.Join(left, ", "))
	}
}
