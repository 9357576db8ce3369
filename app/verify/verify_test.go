package verify_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"backstop/app"
)

// TestVerifyGreenThenCorruptPackRed is the "done when": a verify
// run makes readiness green; flipping bytes in one pack file on disk makes
// the next verify red with repository.damaged, job.failed and
// verify.completed; putting the pack back makes it green again.
func TestVerifyGreenThenCorruptPackRed(t *testing.T) {
	a := newAppliance(t)
	e := a.endpoint(t, "files01")
	src := writeTree(t, map[string]string{
		"a.txt":                 strings.Repeat("alpha ", 3000),
		"docs/b.bin":            strings.Repeat("\x00\x01bravo", 2000),
		"docs/we[ir]d *name?.t": "a name full of pattern characters",
		"empty":                 "",
	})
	snap, samples := a.backup(t, e, src, nil)
	if state, _ := a.readiness(t, e.ID); state != app.ReadinessUnverified {
		t.Fatalf("before any verify readiness = %s, want unverified", state)
	}

	j := a.verifyNow(t, e.ID)
	if j.State != app.JobSucceeded || j.Queue != app.QueueVerify || j.SnapshotID == nil || *j.SnapshotID != snap {
		t.Fatalf("verify job = %s queue %s snapshot %v (failure %+v)", j.State, j.Queue, j.SnapshotID, j.Failure)
	}
	if state, att := a.readiness(t, e.ID); state != app.ReadinessGreen || att != "" {
		t.Fatalf("after a passing verify readiness = %s attention %q, want green and none", state, att)
	}
	rep := a.report(t, e.ID)
	if rep.State != app.VerifyReportPassed || rep.Sampled != len(samples) || rep.Matched != len(samples) || rep.Mismatched != 0 {
		t.Fatalf("report = %+v", rep)
	}
	if rep.Packs.Total == 0 || rep.Packs.Checked != rep.Packs.Total || !rep.Check.Ran || !rep.Check.Passed || rep.Check.Subset != "1/20" {
		t.Fatalf("packs/check = %+v %+v", rep.Packs, rep.Check)
	}
	ev := a.events(t, app.EventVerifyCompleted, j.ID)
	if len(ev) != 1 {
		t.Fatalf("verify.completed events = %d", len(ev))
	}
	res := ev[0]["result"].(map[string]any)
	if res["state"] != "passed" || res["sampled"] != float64(len(samples)) || res["matched"] != float64(len(samples)) || res["mismatched"] != float64(0) {
		t.Fatalf("verify.completed result = %v", res)
	}
	if ep, _ := ev[0]["endpoint"].(map[string]any); ep["id"] != e.ID {
		t.Fatalf("verify.completed endpoint = %v", ev[0]["endpoint"])
	}
	if n := len(a.events(t, app.EventJobCompleted, j.ID)); n != 1 {
		t.Fatalf("job.completed events = %d", n)
	}
	a.assertNoTemp(t)

	// Corrupt one pack file on disk.
	pack := a.largestPack(t, e.ID)
	good, err := os.ReadFile(pack)
	if err != nil {
		t.Fatal(err)
	}
	flipBytes(t, pack)
	j = a.verifyNow(t, e.ID)
	if j.State != app.JobFailed || j.Failure == nil || j.Failure.Code != "repository.damaged" || j.Failure.Category != app.CategoryIntegrity {
		t.Fatalf("verify of a corrupted repository = %s %+v", j.State, j.Failure)
	}
	if state, att := a.readiness(t, e.ID); state != app.ReadinessRed || att != app.AttentionRepositoryDamaged {
		t.Fatalf("after corruption readiness = %s attention %q, want red and repository_damaged", state, att)
	}
	rep = a.report(t, e.ID)
	if rep.State != app.VerifyReportFailed || !rep.RepositoryDamaged || !slices.Contains(rep.Packs.Damaged, filepath.Base(pack)) {
		t.Fatalf("report after corruption = %+v", rep)
	}
	if rep.Check.Subset != "2/20" {
		t.Fatalf("check subset did not rotate: %s", rep.Check.Subset)
	}
	if n := len(a.events(t, app.EventJobFailed, j.ID)); n != 1 {
		t.Fatalf("job.failed events = %d", n)
	}
	ev = a.events(t, app.EventVerifyCompleted, j.ID)
	if len(ev) != 1 || ev[0]["result"].(map[string]any)["state"] != "failed" {
		t.Fatalf("verify.completed after corruption = %v", ev)
	}
	a.assertNoTemp(t)

	// Repair the pack: the next verify clears the damage.
	if err := os.WriteFile(pack, good, 0o400); err != nil {
		t.Fatal(err)
	}
	if j = a.verifyNow(t, e.ID); j.State != app.JobSucceeded {
		t.Fatalf("verify after repair = %s %+v", j.State, j.Failure)
	}
	if state, att := a.readiness(t, e.ID); state != app.ReadinessGreen || att != "" {
		t.Fatalf("after repair readiness = %s attention %q", state, att)
	}
}

// TestVerifyHashMismatch: a sampled file that restores with other content
// than the backup recorded (the repository itself intact) is
// verify.hash_mismatch, red with restore_test_failed, and the file is a
// failed item of the job.
func TestVerifyHashMismatch(t *testing.T) {
	a := newAppliance(t)
	e := a.endpoint(t, "laptop7")
	src := writeTree(t, map[string]string{"one.txt": "one", "two.txt": "two", "sub/three.txt": "three"})
	samples := hashTree(t, src)
	samples[1].SHA256 = strings.Repeat("0", 64) // what the agent hashed is not what was backed up
	samples = append(samples, app.SampledFile{Path: filepath.Join(src, "never-backed-up"), Size: 1, SHA256: strings.Repeat("1", 64)})
	snap, _ := a.backup(t, e, src, samples)

	j := a.verifyNow(t, e.ID)
	if j.State != app.JobFailed || j.Failure == nil || j.Failure.Code != "verify.hash_mismatch" {
		t.Fatalf("verify = %s %+v", j.State, j.Failure)
	}
	if j.Failure.Params["snapshotId"] != snap || j.Failure.Params["mismatched"] != float64(2) && j.Failure.Params["mismatched"] != 2 {
		t.Fatalf("failure params = %v", j.Failure.Params)
	}
	if state, att := a.readiness(t, e.ID); state != app.ReadinessRed || att != app.AttentionRestoreTestFailed {
		t.Fatalf("readiness = %s attention %q, want red and restore_test_failed", state, att)
	}
	rep := a.report(t, e.ID)
	if rep.Sampled != 4 || rep.Matched != 2 || rep.Mismatched != 2 || rep.RepositoryDamaged || !rep.Check.Passed {
		t.Fatalf("report = %+v", rep)
	}
	problems := map[string]string{}
	for _, f := range rep.Files {
		problems[f.Path] = f.Problem
	}
	if problems[samples[1].Path] != app.VerifyFileContent || problems[samples[3].Path] != app.VerifyFileMissing || problems[samples[0].Path] != "" {
		t.Fatalf("file problems = %v", problems)
	}
	items, err := a.db.JobItems(context.Background(), j.ID, 10)
	if err != nil || len(items) != 2 || items[0].Failure.Code != "verify.hash_mismatch" {
		t.Fatalf("job items = %v %v", items, err)
	}
	ev := a.events(t, app.EventVerifyCompleted, j.ID)
	if len(ev) != 1 || ev[0]["result"].(map[string]any)["mismatched"] != float64(2) {
		t.Fatalf("verify.completed = %v", ev)
	}
	if n := len(a.events(t, app.EventJobFailed, j.ID)); n != 1 {
		t.Fatalf("job.failed events = %d", n)
	}
	a.assertNoTemp(t)
}

// TestVerifyWithoutSnapshot: nothing to test is a clear failure that leaves
// readiness alone, never green.
func TestVerifyWithoutSnapshot(t *testing.T) {
	a := newAppliance(t)
	e := a.endpoint(t, "new-box")
	j := a.verifyNow(t, e.ID)
	if j.State != app.JobFailed || j.Failure == nil || j.Failure.Code != "verify.no_snapshot" {
		t.Fatalf("verify = %s %+v", j.State, j.Failure)
	}
	if state, _ := a.readiness(t, e.ID); state != app.ReadinessNoBackup {
		t.Fatalf("readiness = %s, want no_backup", state)
	}
	rep := a.report(t, e.ID)
	if rep.State != app.VerifyReportError || rep.FailureCode == nil || *rep.FailureCode != "verify.no_snapshot" || rep.SnapshotID != nil {
		t.Fatalf("report = %+v", rep)
	}
	ev := a.events(t, app.EventVerifyCompleted, j.ID)
	if len(ev) != 1 || ev[0]["result"].(map[string]any)["state"] != "error" {
		t.Fatalf("verify.completed = %v", ev)
	}
}

// TestVerifyMissingSnapshotIsDamage: a snapshot on record that the
// repository no longer has is lost data: red, repository.damaged.
func TestVerifyMissingSnapshotIsDamage(t *testing.T) {
	a := newAppliance(t)
	e := a.endpoint(t, "db01")
	src := writeTree(t, map[string]string{"x": "x"})
	snap, _ := a.backup(t, e, src, nil)
	repo, _ := a.locate(e.ID)
	if err := os.Remove(filepath.Join(repo, "snapshots", snap)); err != nil {
		t.Fatal(err)
	}
	j := a.verifyNow(t, e.ID)
	if j.State != app.JobFailed || j.Failure == nil || j.Failure.Code != "repository.damaged" {
		t.Fatalf("verify = %s %+v", j.State, j.Failure)
	}
	if state, att := a.readiness(t, e.ID); state != app.ReadinessRed || att != app.AttentionRepositoryDamaged {
		t.Fatalf("readiness = %s %q", state, att)
	}
}

// TestVerifyOtherTenantNotFound: another tenant's endpoint is not found.
func TestVerifyOtherTenantNotFound(t *testing.T) {
	a := newAppliance(t)
	e := a.endpoint(t, "theirs")
	_, err := a.runner.Submit(context.Background(), app.JobRequest{TenantID: "tn_other", Action: app.ActionVerify,
		TargetType: app.TargetEndpoint, TargetID: e.ID, Trigger: app.TriggerAPI})
	if app.ErrorCode(err) != app.ENOTFOUND {
		t.Fatalf("submit for another tenant = %v, want not found", err)
	}
}

// TestVerifyResticMissing: an appliance that cannot run restic tested
// nothing: the job fails with verify.tool_failed and readiness stays as it
// was, neither green nor red.
func TestVerifyResticMissing(t *testing.T) {
	a := newApplianceVerifyingWith(t, filepath.Join(t.TempDir(), "no-restic-here"))
	e := a.endpoint(t, "web01")
	a.backup(t, e, writeTree(t, map[string]string{"index.html": "<h1>hi</h1>"}), nil)
	j := a.verifyNow(t, e.ID)
	if j.State != app.JobFailed || j.Failure == nil || j.Failure.Code != "verify.tool_failed" {
		t.Fatalf("verify = %s %+v", j.State, j.Failure)
	}
	if state, _ := a.readiness(t, e.ID); state != app.ReadinessUnverified {
		t.Fatalf("readiness = %s, want unverified", state)
	}
	if rep := a.report(t, e.ID); rep.State != app.VerifyReportError {
		t.Fatalf("report = %+v", rep)
	}
	a.assertNoTemp(t)
}
