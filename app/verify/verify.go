// Package verify runs verify jobs for endpoints: the appliance's proof that
// the newest backup of a server or client restores.
//
// A verify run of an endpoint, with the appliance's copy of the repository
// password and restic run locally against the repository directory:
//
//  1. lists the repository's snapshots: the endpoint's newest snapshot (the
//     one its last successful backup reported) must be there;
//  2. restores only the files that backup sampled (path, size, SHA-256,
//     hashed by the agent while the file was unchanged) into a temporary
//     directory under the data directory, and compares each file's type,
//     size and SHA-256;
//  3. re-hashes pack files against their names: every pack new since the
//     previous verify (within a byte budget) plus a random sample of older
//     ones;
//  4. runs `restic check --read-data-subset=n/t`, rotating n from run to run,
//     so t runs read (decrypt and hash) every blob of the repository.
//
// The outcome is a report (app.VerifyReport), stored together with the
// endpoint facts readiness is computed from (app.Endpoint.View): passed when
// every sampled file matched and no damage was found; failed with
// repository.damaged when a pack does not hash to its name, restic's check
// or restore reports an integrity error, or the snapshot or repository is
// gone; failed with verify.hash_mismatch when a sampled file did not restore
// to its hash and the repository shows no damage; error (readiness
// unchanged) when nothing could be tested. The job runner raises
// verify.completed with the result and, for a failed run, job.failed.
// Temporary directories are removed when a run ends, and stale ones from a
// crash by RemoveStale at start-up. A run reads the repository only while it
// holds the endpoint's lease (Config.Leases), shared with retention: it
// waits for a prune of that repository to end, and a prune waits for it.
package verify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"backstop/app"
	"backstop/app/jobs"
	"backstop/app/resticcmd"
)

// Samples finds the files a backup sampled (app.AgentService has it).
type Samples interface {
	SnapshotSamples(ctx context.Context, snapshotID string) (endpointID string, files []app.SampledFile, err error)
}

// Config configures a Verifier.
type Config struct {
	// Restic is the restic binary (tools.restic).
	Restic string
	// TempDir is where each run makes (and removes) its temporary
	// directory: a directory inside the data directory, created on demand.
	TempDir string
	// Locate returns an endpoint's repository directory and the file with
	// its password.
	Locate    func(endpointID string) (repoDir, passwordFile string)
	Endpoints app.EndpointService
	Samples   Samples
	Reports   app.VerifyReportService
	// Leases is shared with retention: a verify waits for a prune of the
	// endpoint's repository to end, and a prune waits for the verify.
	// nil serialises nothing.
	Leases *resticcmd.Leases
	Now    app.Clock
	Logger *slog.Logger
	// OldPackSample is how many packs older than the previous verify are
	// re-hashed at random per run (default 16).
	OldPackSample int
	// NewPackBudget bounds the bytes of packs new since the previous
	// verify that are all re-hashed (default 4 GiB).
	NewPackBudget int64
	// CheckGroups is t of --read-data-subset=n/t (default 20).
	CheckGroups int
}

// Verifier runs verify jobs.
type Verifier struct {
	cfg Config
}

// New returns a verifier with cfg's defaults filled in.
func New(cfg Config) *Verifier {
	if cfg.Now == nil {
		cfg.Now = app.SystemClock
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.OldPackSample == 0 {
		cfg.OldPackSample = 16
	}
	if cfg.NewPackBudget == 0 {
		cfg.NewPackBudget = 4 << 30
	}
	if cfg.CheckGroups == 0 {
		cfg.CheckGroups = 20
	}
	return &Verifier{cfg: cfg}
}

const tempPrefix = "verify-"

// LeaseHolder is how a verify run holds an endpoint's lease.
const LeaseHolder = "verify"

// RemoveStale removes temporary directories a crashed run left behind. Call
// it before the runner starts, while no verify runs.
func (v *Verifier) RemoveStale() error {
	return resticcmd.RemoveStale(v.cfg.TempDir, tempPrefix)
}

// Kind is the job kind of verify runs of endpoints (POST /api/v1/verifies
// with targetType "endpoint", and the verify schedules). Any endpoint of
// the tenant can be verified, a revoked one too: its data stays.
func (v *Verifier) Kind() jobs.Kind {
	return jobs.Kind{
		Action: app.ActionVerify, TargetType: app.TargetEndpoint, Queue: app.QueueVerify, MaxAttempts: 1,
		Resolve: func(ctx context.Context, tenantID, targetID string, _ json.RawMessage) (app.JobTarget, error) {
			e, err := v.cfg.Endpoints.Endpoint(ctx, targetID)
			if err != nil {
				return app.JobTarget{}, err
			}
			if tenantID != "" && e.TenantID != tenantID {
				return app.JobTarget{}, app.NotFound("endpoint")
			}
			name := e.DisplayName
			if name == "" {
				name = e.Hostname
			}
			return app.JobTarget{Type: app.TargetEndpoint, ID: e.ID, DisplayName: name}, nil
		},
		Run: v.run,
		EventData: func(ctx context.Context, j *app.Job) (map[string]any, error) {
			e, err := v.cfg.Endpoints.Endpoint(ctx, j.Target.ID)
			if err != nil {
				return nil, err
			}
			return map[string]any{"endpoint": app.EndpointEvent(e)}, nil
		},
	}
}

// run is the kind's Run: it verifies, stores the report with the endpoint's
// facts, records mismatched files as the job's failed items, and returns the
// result for verify.completed with the cause of a failure.
func (v *Verifier) run(ctx context.Context, run *jobs.Run) (*jobs.Outcome, error) {
	j := run.Job
	e, err := v.cfg.Endpoints.Endpoint(ctx, j.Target.ID)
	if err != nil {
		return nil, err
	}
	rep := &app.VerifyReport{JobID: j.ID, TenantID: j.TenantID, EndpointID: e.ID, DisplayName: j.Target.DisplayName,
		StartedAt: app.At(v.cfg.Now()), Files: []app.VerifyFile{}, Packs: app.VerifyPacks{Damaged: []string{}}}
	toolErr := v.verify(ctx, run, e, rep)
	if ctx.Err() != nil {
		return nil, ctx.Err() // the runner records an interruption; no report
	}
	cause := decide(rep, toolErr)
	rep.FinishedAt = app.At(v.cfg.Now())
	for _, f := range rep.Files {
		if !f.Matched {
			err := app.Fail("verify.hash_mismatch", map[string]any{"path": f.Path, "problem": f.Problem}, errors.New(f.Problem))
			if ierr := run.ItemFailed(ctx, f.Path, filepath.Base(f.Path), err); ierr != nil {
				return nil, ierr
			}
		}
	}
	if err := v.cfg.Reports.RecordVerifyReport(ctx, rep); err != nil {
		return nil, err
	}
	v.cfg.Logger.Info("verify run finished", slog.String("job_id", j.ID), slog.String("endpoint_id", e.ID),
		slog.String("state", rep.State), slog.Int("sampled", rep.Sampled), slog.Int("mismatched", rep.Mismatched),
		slog.Int("packs_checked", rep.Packs.Checked), slog.Bool("repository_damaged", rep.RepositoryDamaged))
	out := &jobs.Outcome{Result: rep.Result(), Step: "verify"}
	if rep.SnapshotID != nil {
		out.SnapshotID = *rep.SnapshotID
	}
	out.Progress = &app.JobProgress{Phase: "done", Percent: 100, ItemsDone: int64(rep.Sampled), ItemsTotal: int64(rep.Sampled),
		BytesDone: rep.Packs.Bytes, BytesTotal: rep.Packs.Bytes}
	return out, cause
}

// decide sets the report's state from what was found and returns the job's
// cause. Evidence wins over a failure to finish: a mismatch or damage found
// before a later step could not run is still a failed test.
func decide(rep *app.VerifyReport, toolErr error) error {
	var cause *app.FailureError
	switch {
	case rep.RepositoryDamaged:
		cause = app.Fail("repository.damaged", map[string]any{"repository": rep.EndpointID}, errors.New(rep.Details))
	case rep.Mismatched > 0:
		first := ""
		for _, f := range rep.Files {
			if !f.Matched {
				first = f.Path
				break
			}
		}
		snap := ""
		if rep.SnapshotID != nil {
			snap = *rep.SnapshotID
		}
		cause = app.Fail("verify.hash_mismatch", map[string]any{"snapshotId": snap, "path": first, "mismatched": rep.Mismatched},
			fmt.Errorf("%d of %d sampled files did not restore to their recorded size and SHA-256", rep.Mismatched, rep.Sampled))
	case toolErr != nil:
		rep.State = app.VerifyReportError
		code := app.FailureFrom(toolErr, "verify", rep.StartedAt.Time).Code
		rep.FailureCode, rep.Details = &code, app.RedactText(toolErr.Error())
		return toolErr
	default:
		rep.State = app.VerifyReportPassed
		return nil
	}
	cause.Step = "verify"
	rep.State, rep.FailureCode = app.VerifyReportFailed, &cause.Code
	if rep.Details == "" {
		rep.Details = cause.Err.Error()
	}
	rep.Details = app.RedactText(rep.Details)
	return cause
}

// verify fills rep with what it finds. It returns an error when a step could
// not be carried out (nothing to test, restic failed); evidence of damage or
// mismatch is recorded in rep, not returned.
func (v *Verifier) verify(ctx context.Context, run *jobs.Run, e *app.Endpoint, rep *app.VerifyReport) error {
	progress := func(percent int) {
		run.Progress(ctx, app.JobProgress{Phase: "verifying", Percent: percent, ItemsDone: int64(rep.Matched + rep.Mismatched),
			ItemsTotal: int64(rep.Sampled), BytesDone: rep.Packs.Bytes})
	}
	progress(0)
	if e.LastSnapshotID == "" {
		return app.Fail("verify.no_snapshot", map[string]any{"endpointId": e.ID}, errors.New("the endpoint has no snapshot yet: run a backup first"))
	}
	snap := e.LastSnapshotID
	rep.SnapshotID = &snap
	_, samples, err := v.cfg.Samples.SnapshotSamples(ctx, snap)
	if err != nil && app.ErrorCode(err) != app.ENOTFOUND {
		return err
	}
	if len(samples) == 0 {
		return app.Fail("verify.no_samples", map[string]any{"snapshotId": snap, "endpointId": e.ID},
			errors.New("the backup that made the snapshot reported no sampled files"))
	}
	rep.Sampled = len(samples)

	repoDir, passwordFile := v.cfg.Locate(e.ID)
	if _, err := os.Stat(passwordFile); err != nil {
		return app.Fail("restic.wrong_password", nil, fmt.Errorf("the appliance has no password file for this endpoint: %w", err))
	}
	if err := os.MkdirAll(v.cfg.TempDir, 0o700); err != nil {
		return toolFailed("prepare", err)
	}
	tmp, err := os.MkdirTemp(v.cfg.TempDir, tempPrefix+e.ID+"-")
	if err != nil {
		return toolFailed("prepare", err)
	}
	defer os.RemoveAll(tmp)
	r := newRestic(v.cfg.Restic, repoDir, passwordFile, tmp)

	// Reading without a restic lock is safe against agent backups (they
	// only add), not against a prune: hold the endpoint's lease.
	release, err := v.cfg.Leases.Acquire(ctx, e.ID, LeaseHolder)
	if err != nil {
		return err
	}
	defer release()

	// 1. The snapshot must be in the repository.
	ids, err := r.snapshotIDs(ctx)
	if errors.Is(err, errRepositoryMissing) {
		rep.RepositoryDamaged, rep.Details = true, "the repository of a machine with a recorded snapshot is gone: "+err.Error()
		return nil
	} else if err != nil {
		return err
	}
	if !contains(ids, snap) {
		rep.RepositoryDamaged = true
		rep.Details = fmt.Sprintf("snapshot %s, recorded by the machine's last successful backup, is not in the repository", snap)
		return nil
	}
	progress(5)

	// 2. Restore the sampled files and compare them.
	if err := v.restoreAndCompare(ctx, r, snap, samples, rep); err != nil {
		return err
	}
	progress(40)

	// The previous run of the endpoint: where the pack re-hash and the
	// check's read subset continue from.
	prev, err := v.cfg.Reports.LatestVerifyReport(ctx, app.VerifyReportFilter{EndpointID: e.ID})
	if err != nil && app.ErrorCode(err) != app.ENOTFOUND {
		return err
	}

	// 3. Re-hash pack files against their names.
	if err := v.rehashPacks(ctx, repoDir, prev, rep, progress); err != nil {
		return err
	}

	// 4. restic's check with a rotating read subset.
	rep.Check.Subset = v.nextSubset(prev)
	res, err := r.check(ctx, rep.Check.Subset)
	if err != nil {
		return err
	}
	rep.Check.Ran = true
	switch {
	case res.Exit == 0:
		rep.Check.Passed = true
	case reportsDamage(res):
		rep.RepositoryDamaged = true
		rep.Details = joinDetails(rep.Details, "restic check: "+resticcmd.Tail(res.Stderr))
	default:
		return toolFailed("check", fmt.Errorf("restic check exited with %d: %s", res.Exit, resticcmd.Tail(res.Stderr)))
	}
	progress(100)
	return nil
}

// restoreAndCompare restores the sampled files and records each outcome.
func (v *Verifier) restoreAndCompare(ctx context.Context, r *restic, snap string, samples []app.SampledFile, rep *app.VerifyReport) error {
	target := filepath.Join(r.Tmp, "restore")
	paths := make([]string, len(samples))
	for i, s := range samples {
		paths[i] = s.Path
	}
	res, err := r.restore(ctx, snap, target, paths)
	if err != nil {
		return err
	}
	if res.Exit != 0 {
		if !reportsDamage(res) {
			// Not evidence about the backup (a full disk, a signal): the
			// test could not be made, and missing files would be a false
			// alarm.
			return toolFailed("restore", fmt.Errorf("restic restore exited with %d: %s", res.Exit, resticcmd.Tail(res.Stderr)))
		}
		rep.RepositoryDamaged = true
		rep.Details = joinDetails(rep.Details, "restic restore: "+resticcmd.Tail(res.Stderr))
	}
	for _, s := range samples {
		f := app.VerifyFile{Path: s.Path, Size: s.Size, SHA256: s.SHA256}
		f.Problem = compareFile(ctx, filepath.Join(target, filepath.FromSlash(s.Path)), s)
		f.Matched = f.Problem == ""
		if f.Matched {
			rep.Matched++
		} else {
			rep.Mismatched++
		}
		rep.Files = append(rep.Files, f)
	}
	return nil
}

// compareFile returns what is wrong with a restored file, or "".
func compareFile(ctx context.Context, path string, want app.SampledFile) string {
	info, err := os.Lstat(path)
	switch {
	case err != nil:
		return app.VerifyFileMissing
	case !info.Mode().IsRegular():
		return app.VerifyFileNotRegular
	case info.Size() != want.Size:
		return app.VerifyFileSize
	}
	sum, err := sha256File(ctx, path)
	if err != nil || !strings.EqualFold(sum, want.SHA256) {
		return app.VerifyFileContent
	}
	return ""
}

// rehashPacks re-hashes the chosen packs and records those that differ.
func (v *Verifier) rehashPacks(ctx context.Context, repoDir string, prev, rep *app.VerifyReport, progress func(int)) error {
	packs, err := listPacks(repoDir)
	if err != nil {
		return toolFailed("packs", fmt.Errorf("listing pack files: %w", err))
	}
	rep.Packs.Total = len(packs)
	// Packs are new when written after the previous run that got as far
	// as hashing started; after an error run, all are new again.
	var since *time.Time
	if prev != nil && prev.State != app.VerifyReportError {
		since = &prev.StartedAt.Time
	}
	chosen := choosePacks(packs, since, v.cfg.NewPackBudget, v.cfg.OldPackSample, rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())))
	for i, p := range chosen {
		ok, err := packMatches(ctx, p)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		rep.Packs.Checked++
		rep.Packs.Bytes += p.size
		if !ok {
			rep.RepositoryDamaged = true
			rep.Packs.Damaged = append(rep.Packs.Damaged, p.id)
			msg := fmt.Sprintf("pack %s does not hash to its name", p.id)
			if err != nil {
				msg = err.Error()
			}
			rep.Details = joinDetails(rep.Details, msg)
		}
		progress(40 + 30*(i+1)/len(chosen))
	}
	return nil
}

// nextSubset continues the rotation of --read-data-subset from the
// endpoint's previous check: n/t, then n+1/t, wrapping to 1/t.
func (v *Verifier) nextSubset(prev *app.VerifyReport) string {
	t := v.cfg.CheckGroups
	if prev == nil || !prev.Check.Ran {
		return fmt.Sprintf("1/%d", t)
	}
	var n, pt int
	if _, err := fmt.Sscanf(prev.Check.Subset, "%d/%d", &n, &pt); err != nil || pt != t {
		return fmt.Sprintf("1/%d", t)
	}
	return fmt.Sprintf("%d/%d", n%t+1, t)
}

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func joinDetails(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
