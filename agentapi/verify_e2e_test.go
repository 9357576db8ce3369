package agentapi_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"backstop/agent"
	"backstop/agentapi"
	"backstop/agentapi/wire"
	"backstop/app"
	"backstop/app/verify"
)

// TestVerifyAgentBackup proves the whole chain: the agent backs up with the
// real restic through the append-only repository server, and the
// appliance's verify run, with the password it keeps and restic on the
// repository directory, turns readiness green; one flipped byte in a pack
// file on disk turns it red at the next verify.
func TestVerifyAgentBackup(t *testing.T) {
	resticPath := requireRestic(t)
	ctx := context.Background()
	ap := newAppliance(t)
	v := verify.New(verify.Config{Restic: resticPath, TempDir: filepath.Join(ap.dataDir, "tmp"),
		Locate: func(id string) (string, string) {
			return agentapi.RepositoryDir(ap.dataDir, id), agentapi.RepositoryPasswordFile(ap.dataDir, id)
		},
		Endpoints: ap.db, Samples: ap.db, Reports: ap.db})
	ap.runner.Register(v.Kind())
	if err := ap.runner.Open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ap.runner.Close() })

	src := t.TempDir()
	writeTree(t, src, map[string]int{"a.txt": 2000, "sub/b.bin": 200_000, "sub/c.bin": 30_000})
	stateDir := filepath.Join(t.TempDir(), "state")
	resp, err := agent.Enroll(ctx, agent.EnrollOptions{Server: ap.url, Token: ap.token(t), StateDir: stateDir,
		Paths: []string{src}, Restic: resticPath})
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.Open(stateDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := a.Backup(ctx, wire.TriggerManual, "")
	if err != nil || f.State != wire.StateSucceeded || len(f.Sampled) == 0 {
		t.Fatalf("backup: %v %+v", err, f)
	}

	verifyNow := func() *app.Job {
		t.Helper()
		j, err := ap.runner.Submit(ctx, app.JobRequest{TenantID: ap.tenant, Action: app.ActionVerify,
			TargetType: app.TargetEndpoint, TargetID: resp.EndpointID, Trigger: app.TriggerAPI})
		if err != nil {
			t.Fatal(err)
		}
		return waitJob(t, ap.db, j.ID)
	}
	readiness := func() (string, *string) {
		e, err := ap.db.Endpoint(ctx, resp.EndpointID)
		if err != nil {
			t.Fatal(err)
		}
		view := e.View(time.Now(), app.DefaultEndpointRules())
		return view.Readiness.State, view.Attention
	}

	j := verifyNow()
	if j.State != app.JobSucceeded || j.SnapshotID == nil || *j.SnapshotID != f.SnapshotID {
		t.Fatalf("verify of the agent's backup: %s %+v", j.State, j.Failure)
	}
	if state, _ := readiness(); state != app.ReadinessGreen {
		t.Fatalf("readiness after verify = %s, want green", state)
	}
	rep, err := ap.db.LatestVerifyReport(ctx, app.VerifyReportFilter{EndpointID: resp.EndpointID})
	if err != nil || rep.Matched != len(f.Sampled) || rep.Packs.Checked == 0 || rep.Packs.Checked != rep.Packs.Total {
		t.Fatalf("report: %+v %v", rep, err)
	}

	// Flip one byte of the largest pack, as disk rot would.
	var pack string
	var size int64
	filepath.Walk(filepath.Join(agentapi.RepositoryDir(ap.dataDir, resp.EndpointID), "data"), func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() && info.Size() > size {
			pack, size = p, info.Size()
		}
		return nil
	})
	b, err := os.ReadFile(pack)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/3] ^= 0x01
	os.Chmod(pack, 0o600)
	if err := os.WriteFile(pack, b, 0o600); err != nil {
		t.Fatal(err)
	}
	j = verifyNow()
	if j.State != app.JobFailed || j.Failure == nil || j.Failure.Code != "repository.damaged" {
		t.Fatalf("verify after corruption: %s %+v", j.State, j.Failure)
	}
	if state, att := readiness(); state != app.ReadinessRed || att == nil || *att != app.AttentionRepositoryDamaged {
		t.Fatalf("readiness after corruption = %s %v", state, att)
	}
	if len(ap.events(t, app.EventJobFailed, j.ID)) != 1 || len(ap.events(t, app.EventVerifyCompleted, j.ID)) != 1 {
		t.Fatal("job.failed and verify.completed must be in the outbox")
	}
	if left, _ := filepath.Glob(filepath.Join(ap.dataDir, "tmp", "*")); len(left) != 0 {
		t.Fatalf("temporary directories left: %v", left)
	}
}
