package retention_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/retention"
	"backstop/e2e"
)

// resticEndpoint is an active endpoint with a real restic repository in the
// appliance's layout.
type resticEndpoint struct {
	a      *appliance
	e      *app.Endpoint
	restic string
	src    string
}

func (a *appliance) resticEndpoint(t *testing.T, restic, hostname string) *resticEndpoint {
	t.Helper()
	e := &app.Endpoint{TenantID: a.tenant, Hostname: hostname, Profile: app.ProfileServer, Status: app.EndpointActive,
		Schedule: app.DefaultEndpointSchedule}
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
	r := &resticEndpoint{a: a, e: e, restic: restic, src: filepath.Join(t.TempDir(), "src")}
	if err := os.MkdirAll(r.src, 0o755); err != nil {
		t.Fatal(err)
	}
	r.cmd(t, nil, "init")
	return r
}

// cmd runs restic on the endpoint's repository as the agent would, in UTC
// (restic reads --time in the local zone and buckets in the stored one).
func (r *resticEndpoint) cmd(t *testing.T, stdin io.Reader, args ...string) []byte {
	t.Helper()
	repo, pw := r.a.locate(r.e.ID)
	cmd := exec.Command(r.restic, append(args, "--no-cache")...)
	cmd.Env = append(os.Environ(), "RESTIC_REPOSITORY="+repo, "RESTIC_PASSWORD_FILE="+pw, "TMPDIR="+t.TempDir(), "TZ=UTC")
	cmd.Stdin = stdin
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("restic %s: %v: %s", args[0], err, stderr.String())
	}
	return out
}

// backupAt makes a snapshot dated at with 32 KiB of fresh random data, so
// forgetting it frees space.
func (r *resticEndpoint) backupAt(t *testing.T, at time.Time) {
	t.Helper()
	b := make([]byte, 32<<10)
	rand.Read(b)
	if err := os.WriteFile(filepath.Join(r.src, "data.bin"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	r.cmd(t, nil, "backup", "--quiet", "--host", "server1", "--time", at.UTC().Format("2006-01-02 15:04:05"), r.src)
}

// copyEndpoint makes another endpoint whose repository and password are a
// copy of r's.
func (a *appliance) copyEndpoint(t *testing.T, r *resticEndpoint, hostname string) *resticEndpoint {
	t.Helper()
	e := &app.Endpoint{TenantID: a.tenant, Hostname: hostname, Profile: app.ProfileServer, Status: app.EndpointActive,
		Schedule: app.DefaultEndpointSchedule}
	if err := a.db.CreateEndpoint(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	fromRepo, fromPW := a.locate(r.e.ID)
	toRepo, toPW := a.locate(e.ID)
	if err := os.CopyFS(toRepo, os.DirFS(fromRepo)); err != nil {
		t.Fatal(err)
	}
	pw, err := os.ReadFile(fromPW)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(toPW, pw, 0o600); err != nil {
		t.Fatal(err)
	}
	return &resticEndpoint{a: a, e: e, restic: r.restic, src: r.src}
}

type resticSnap struct {
	ID   string    `json:"id"`
	Time time.Time `json:"time"`
}

func (r *resticEndpoint) snapshots(t *testing.T) []resticSnap {
	t.Helper()
	var snaps []resticSnap
	if err := json.Unmarshal(r.cmd(t, nil, "snapshots", "--json"), &snaps); err != nil {
		t.Fatal(err)
	}
	return snaps
}

// markBackedUp records the newest snapshot as the endpoint's, as a finished
// agent backup does; retention only looks at endpoints with a snapshot.
func (r *resticEndpoint) markBackedUp(t *testing.T, snapshotID string) {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	job := &app.Job{TenantID: r.e.TenantID, Queue: app.QueueEndpointBackup, Action: app.ActionBackup, Trigger: app.TriggerSchedule,
		Target: app.JobTarget{Type: app.TargetEndpoint, ID: r.e.ID, DisplayName: r.e.Hostname}, QueuedAt: app.At(now)}
	run := &app.AgentRun{ID: "run_" + app.RandomToken(12), EndpointID: r.e.ID, Kind: app.ActionBackup, StartedAt: now}
	if _, err := r.a.db.StartAgentRun(ctx, run, job); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.a.db.FinishAgentRun(ctx, app.AgentRunEnd{RunID: run.ID, EndpointID: r.e.ID, State: app.JobSucceeded,
		FinishedAt: now, SnapshotID: snapshotID}, nil); err != nil {
		t.Fatal(err)
	}
}

// ages are the snapshot ages in days (at 01:00 UTC plus the given hours),
// spread over two years, with several on one day and in one week.
var ages = []struct {
	days  int
	hours int
}{
	{0, 0}, {1, 0}, {2, 0}, {3, 0}, {6, 0}, {6, 5}, {10, 0}, {10, 3}, {12, 0}, {20, 0},
	{31, 0}, {32, 0}, {40, 0}, {44, 0}, {45, 0}, {70, 0}, {95, 0}, {120, 0}, {150, 0}, {152, 0},
	{200, 0}, {300, 0}, {350, 0}, {380, 0}, {400, 0}, {410, 0}, {500, 0}, {600, 0}, {700, 0}, {729, 0},
}

func TestRetentionJobPrunesEndpointRepositoriesWithRealRestic(t *testing.T) {
	restic := e2e.RequireTool(t, "restic", "restic")
	a := newAppliance(t, applianceOptions{restic: restic})
	ctx := context.Background()
	latest := time.Date(2026, 11, 21, 1, 0, 0, 0, time.UTC) // a Saturday

	// Three endpoints with the same history (made once, then copied, as
	// every restic run costs a key derivation): one on the tenant's
	// (default) policy, one with its own, and a revoked one, left alone.
	inherit := a.resticEndpoint(t, restic, "inherits")
	for i := len(ages) - 1; i >= 0; i-- {
		inherit.backupAt(t, latest.AddDate(0, 0, -ages[i].days).Add(time.Duration(ages[i].hours)*time.Hour))
	}
	custom := a.copyEndpoint(t, inherit, "custom")
	revoked := a.copyEndpoint(t, inherit, "revoked")
	override := retention.Policy{KeepAllDays: 7, KeepWeeklyDays: 60, KeepMonthlyDays: 365}
	if err := a.db.SetEndpointRetention(ctx, custom.e.ID, &override); err != nil {
		t.Fatal(err)
	}
	snaps := inherit.snapshots(t)
	if len(snaps) != len(ages) {
		t.Fatalf("%d snapshots made, want %d", len(snaps), len(ages))
	}
	for _, r := range []*resticEndpoint{inherit, custom, revoked} {
		r.markBackedUp(t, snaps[len(snaps)-1].ID)
	}
	if _, err := a.db.UpdateEndpoint(ctx, revoked.e.ID, func(e *app.Endpoint) error {
		e.Status = app.EndpointRevoked
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// restic measures from the newest snapshot: the expectation is Select
	// with now = that snapshot's time.
	var all []retention.Snap
	for _, s := range snaps {
		all = append(all, retention.Snap{ID: s.ID, At: s.Time})
	}
	expect := func(p retention.Policy) []time.Time {
		keep, _ := retention.Select(all, latest, p)
		var times []time.Time
		for _, s := range all {
			if slices.Contains(keep, s.ID) {
				times = append(times, s.At.UTC())
			}
		}
		slices.SortFunc(times, time.Time.Compare)
		return times
	}
	wantInherit, wantCustom := expect(retention.Default()), expect(override)
	remaining := func(r *resticEndpoint) []time.Time {
		var times []time.Time
		for _, s := range r.snapshots(t) {
			times = append(times, s.Time.UTC())
		}
		slices.SortFunc(times, time.Time.Compare)
		return times
	}
	repoDir, _ := a.locate(custom.e.ID)
	inheritDir, _ := a.locate(inherit.e.ID)
	sizeBefore := dirSizeForTest(repoDir)
	inheritBefore := dirSizeForTest(inheritDir)

	j := a.runRetention(t)
	if j.State != app.JobSucceeded {
		t.Fatalf("job %s: %v %+v", j.State, j.ErrorMessage, a.failedItems(t, j.ID))
	}
	if got := remaining(inherit); !slices.EqualFunc(got, wantInherit, time.Time.Equal) {
		t.Errorf("default policy keeps\n%v\nwant\n%v", got, wantInherit)
	}
	if got := remaining(custom); !slices.EqualFunc(got, wantCustom, time.Time.Equal) {
		t.Errorf("override keeps\n%v\nwant\n%v", got, wantCustom)
	}
	if n := len(revoked.snapshots(t)); n != len(ages) {
		t.Errorf("the revoked endpoint's repository went from %d to %d snapshots", len(ages), n)
	}

	// A few by hand (latest is Saturday 2026-11-21 01:00 UTC).
	at := func(days, hours int) time.Time {
		return latest.AddDate(0, 0, -days).Add(time.Duration(hours) * time.Hour)
	}
	has := func(list []time.Time, t time.Time) bool { return slices.ContainsFunc(list, t.Equal) }
	gotInherit, gotCustom := remaining(inherit), remaining(custom)
	for _, c := range []struct {
		list []time.Time
		at   time.Time
		kept bool
		why  string
	}{
		{gotInherit, at(6, 0), true, "default: inside 30 days every snapshot stays"},
		{gotInherit, at(6, 5), true, "default: a second one the same day stays inside 30 days"},
		{gotInherit, at(729, 0), true, "default: a 2-year-old monthly survives 7 years"},
		{gotCustom, at(0, 0), true, "the newest always stays"},
		{gotCustom, at(10, 3), false, "override: 10 days old but not the newest of its ISO week (6 days old is)"},
		{gotCustom, at(31, 0), true, "override: newest of its ISO week within 60 days"},
		{gotCustom, at(380, 0), false, "override: older than a year goes"},
		{gotCustom, at(729, 0), false, "override: 2 years old goes"},
	} {
		if has(c.list, c.at) != c.kept {
			t.Errorf("%s (%s): kept=%v", c.why, c.at.Format(time.DateTime), !c.kept)
		}
	}
	if len(gotCustom) >= len(gotInherit) || len(gotCustom) < 5 {
		t.Errorf("override kept %d, default %d", len(gotCustom), len(gotInherit))
	}

	sum := a.summary(t, j.ID)
	ep := sum.Endpoints
	forgotten := 2*len(ages) - len(gotInherit) - len(gotCustom)
	if ep.Repositories != 2 || ep.SnapshotsForgotten != forgotten || ep.SnapshotsKept != len(gotInherit)+len(gotCustom) ||
		ep.Failed != 0 || ep.BytesFreed <= 0 {
		t.Errorf("endpoint summary %+v, want 2 repositories, %d forgotten", ep, forgotten)
	}
	sizeAfter, inheritAfter := dirSizeForTest(repoDir), dirSizeForTest(inheritDir)
	if sizeAfter >= sizeBefore {
		t.Errorf("repository did not shrink: %d -> %d bytes", sizeBefore, sizeAfter)
	}
	// Each repository's size before and after, exactly as on disk (nothing
	// else wrote meanwhile), and the totals.
	want := map[string]retention.RepositoryResult{
		inherit.e.ID: {EndpointID: inherit.e.ID, BytesBefore: inheritBefore, BytesAfter: inheritAfter,
			SnapshotsRemoved: len(ages) - len(gotInherit), SnapshotsKept: len(gotInherit)},
		custom.e.ID: {EndpointID: custom.e.ID, BytesBefore: sizeBefore, BytesAfter: sizeAfter,
			SnapshotsRemoved: len(ages) - len(gotCustom), SnapshotsKept: len(gotCustom)},
	}
	if len(ep.Each) != 2 {
		t.Fatalf("per-repository results %+v, want 2", ep.Each)
	}
	for _, got := range ep.Each {
		if got != want[got.EndpointID] {
			t.Errorf("repository result %+v, want %+v", got, want[got.EndpointID])
		}
		// The endpoint's latest prune, as its page and API show it.
		last, err := a.db.LastEndpointPrune(ctx, got.EndpointID)
		if err != nil || last == nil || last.JobID != j.ID || last.BytesBefore != got.BytesBefore || last.BytesAfter != got.BytesAfter ||
			last.SnapshotsRemoved != got.SnapshotsRemoved || last.SnapshotsKept != got.SnapshotsKept || last.Failed || last.At.IsZero() {
			t.Errorf("last prune of %s = %+v, %v; want the job's %+v", got.EndpointID, last, err, got)
		}
	}
	if ep.BytesBefore != sizeBefore+inheritBefore || ep.BytesAfter != sizeAfter+inheritAfter ||
		ep.BytesFreed != ep.BytesBefore-ep.BytesAfter {
		t.Errorf("totals before %d after %d freed %d, want %d, %d", ep.BytesBefore, ep.BytesAfter, ep.BytesFreed,
			sizeBefore+inheritBefore, sizeAfter+inheritAfter)
	}
	if !sum.ProtectedObjects.Skipped || sum.SnapshotsForgotten != forgotten || sum.BytesFreed != ep.BytesFreed {
		t.Errorf("summary %+v", sum)
	}
	// The repository still checks out, and nothing temporary is left.
	custom.cmd(t, nil, "check")
	if left, _ := filepath.Glob(filepath.Join(a.dataDir, "tmp", "*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// TestRetentionJobLeavesALockedRepositoryAndGoesOn: a backup holding the
// repository's lock makes that endpoint a failed item (after one retry)
// while the other endpoint is pruned, and the job ends partial.
func TestRetentionJobLeavesALockedRepositoryAndGoesOn(t *testing.T) {
	restic := e2e.RequireTool(t, "restic", "restic")
	var pruned []string
	a := newAppliance(t, applianceOptions{restic: restic, lockRetry: 300 * time.Millisecond,
		pruned: func(id string) { pruned = append(pruned, id) }})
	latest := time.Date(2026, 11, 21, 1, 0, 0, 0, time.UTC)
	// The tenant keeps 30 days: of 800, 10 and 0 days old, 800 goes.
	if err := a.db.SetTenantRetention(context.Background(), a.tenant, retention.Policy{KeepAllDays: 30}); err != nil {
		t.Fatal(err)
	}
	busy := a.resticEndpoint(t, restic, "busy")
	for _, d := range []int{800, 10, 0} {
		busy.backupAt(t, latest.AddDate(0, 0, -d))
	}
	free := a.copyEndpoint(t, busy, "free")
	snaps := busy.snapshots(t)
	busy.markBackedUp(t, snaps[len(snaps)-1].ID)
	free.markBackedUp(t, snaps[len(snaps)-1].ID)

	// A backup in progress: restic reading stdin holds a lock until stdin
	// closes.
	repo, pw := a.locate(busy.e.ID)
	cmd := exec.Command(restic, "backup", "--stdin", "--stdin-filename", "dump.sql", "--no-cache", "--quiet")
	cmd.Env = append(os.Environ(), "RESTIC_REPOSITORY="+repo, "RESTIC_PASSWORD_FILE="+pw, "TMPDIR="+t.TempDir())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if locks, _ := os.ReadDir(filepath.Join(repo, "locks")); len(locks) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the backup took no lock")
		}
		time.Sleep(20 * time.Millisecond)
	}

	j := a.runRetention(t)
	if j.State != app.JobPartial || j.ItemsFailed != 1 {
		t.Fatalf("job %s with %d failed items, want partial with 1", j.State, j.ItemsFailed)
	}
	items := a.failedItems(t, j.ID)
	f := items[0].Failure
	if items[0].Ref != busy.e.ID || f.Code != "retention.repository_locked" || !f.Transient || f.Params["holder"] != "restic lock" ||
		f.Params["endpointId"] != busy.e.ID || f.Params["hostname"] != "busy" {
		t.Fatalf("failed item %+v failure %+v", items[0], f)
	}
	if n := len(busy.snapshots(t)); n != 3 {
		t.Errorf("locked repository has %d snapshots, want all 3", n)
	}
	if n := len(free.snapshots(t)); n != 2 { // 10 and 0 days old
		t.Errorf("free repository has %d snapshots, want 2", n)
	}
	s := a.summary(t, j.ID).Endpoints
	if s.Failed != 1 || s.SnapshotsForgotten != 1 || len(s.Each) != 2 {
		t.Fatalf("summary %+v", s)
	}
	if last, err := a.db.LastEndpointPrune(context.Background(), busy.e.ID); err != nil || last == nil || !last.Failed || last.JobID != j.ID {
		t.Errorf("last prune of the locked repository = %+v, %v; want a failed one of %s", last, err, j.ID)
	}
	for _, r := range s.Each {
		switch {
		case r.EndpointID == busy.e.ID && (!r.Failed || r.SnapshotsRemoved != 0 || r.BytesBefore == 0 || r.BytesAfter != r.BytesBefore):
			t.Errorf("locked repository's result %+v", r)
		case r.EndpointID == free.e.ID && (r.Failed || r.SnapshotsRemoved != 1 || r.BytesAfter >= r.BytesBefore):
			t.Errorf("free repository's result %+v", r)
		}
	}
	if !slices.Equal(pruned, []string{free.e.ID}) {
		t.Errorf("pruned callback for %v, want only the free endpoint", pruned)
	}
}

func dirSizeForTest(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
		return nil
	})
	return n
}
