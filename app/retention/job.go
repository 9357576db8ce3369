package retention

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"backstop/app"
	"backstop/app/archive"
	"backstop/app/jobs"
	"backstop/app/resticcmd"
)

// Snapshots is what a retention job needs of the blob store (IMAP,
// mailbox and drive snapshots). The blob store implements it.
type Snapshots interface {
	// Snapshots lists snapshots newest first (paged by f.Before and
	// f.Limit like GET /protected-objects/{id}/snapshots).
	Snapshots(ctx context.Context, f app.SnapshotFilter) ([]*app.Snapshot, error)
	// ForgetSnapshots removes the snapshots from the catalogue and the
	// storage target; their blobs stay until CollectGarbage.
	ForgetSnapshots(ctx context.Context, tenantID string, ids []string) error
	// CollectGarbage deletes the tenant's blobs no snapshot references,
	// never one a running backup may still reference, and returns the bytes
	// it freed on the storage target.
	CollectGarbage(ctx context.Context, tenantID string) (freedBytes int64, err error)
}

// Config configures a Retainer.
type Config struct {
	// Restic is the restic binary (tools.restic).
	Restic string
	// TempDir is where each endpoint's run makes (and removes) its
	// temporary directory: inside the data directory, created on demand.
	TempDir string
	// Locate returns an endpoint's repository directory and the file with
	// the appliance's copy of its password.
	Locate    func(endpointID string) (repoDir, passwordFile string)
	Tenants   app.TenantService
	Endpoints app.EndpointService
	Policies  app.RetentionService
	// Snapshots is the blob store; nil skips the blob-store phase (the
	// summary says so).
	Snapshots Snapshots
	// Leases is shared with the verify runner: a prune waits for a
	// verify of the endpoint to end and the other way round (verify reads
	// without a lock; pruning under it would make its packs vanish
	// mid-read). nil serialises nothing.
	Leases *resticcmd.Leases
	// Pruned, if set, is called after an endpoint's repository was
	// pruned (the repository server recounts its quota).
	Pruned func(endpointID string)
	// Archive, if set, purges the tenant's expired archive messages
	// (CONTRACT §14) before the snapshot phases; nil skips that step.
	Archive ArchivePurger
	// LockRetryWait is the wait before the one retry of a repository that
	// was in use (default 1 minute).
	LockRetryWait time.Duration
	Now           app.Clock
	Logger        *slog.Logger
}

// ArchivePurger applies a tenant's archive retention (archive.Service).
type ArchivePurger interface {
	Purge(ctx context.Context, tenantID string) (archive.PurgeSummary, error)
}

// Retainer runs retention jobs.
type Retainer struct {
	cfg Config
}

// New returns a retainer with cfg's defaults filled in.
func New(cfg Config) *Retainer {
	if cfg.Now == nil {
		cfg.Now = app.SystemClock
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.LockRetryWait == 0 {
		cfg.LockRetryWait = time.Minute
	}
	return &Retainer{cfg: cfg}
}

const tempPrefix = "retention-"

// RemoveStale removes temporary directories a crashed run left behind. Call
// it before the runner starts.
func (r *Retainer) RemoveStale() error {
	return resticcmd.RemoveStale(r.cfg.TempDir, tempPrefix)
}

// TenantPolicy returns the tenant's policy, or the default with isDefault
// when it never saved one.
func TenantPolicy(ctx context.Context, svc app.RetentionService, tenantID string) (p Policy, isDefault bool, err error) {
	p, set, err := svc.TenantRetention(ctx, tenantID)
	if err != nil {
		return Policy{}, false, err
	}
	if !set {
		return Default(), true, nil
	}
	return p, false, nil
}

// EndpointPolicy returns the policy that applies to an endpoint: its
// override, or (inherited) its tenant's.
func EndpointPolicy(ctx context.Context, svc app.RetentionService, e *app.Endpoint) (p Policy, inherited bool, err error) {
	p, set, err := svc.EndpointRetention(ctx, e.ID)
	if err != nil {
		return Policy{}, false, err
	}
	if set {
		return p, false, nil
	}
	p, _, err = TenantPolicy(ctx, svc, e.TenantID)
	return p, true, err
}

// Summary is the result of a retention job: data.retention of its
// job.completed event, and the log line.
type Summary struct {
	SnapshotsForgotten int              `json:"snapshotsForgotten" doc:"Both kinds together."`
	BytesFreed         int64            `json:"bytesFreed" doc:"Both kinds together."`
	ProtectedObjects   ObjectsSummary   `json:"protectedObjects"`
	Endpoints          EndpointsSummary `json:"endpoints"`
	Archive            ArchiveSummary   `json:"archive"`
}

// ArchiveSummary is the archive part of a retention job.
type ArchiveSummary struct {
	Skipped bool `json:"skipped" doc:"True when this appliance has no archive."`
	archive.PurgeSummary
	Failed int `json:"failed" doc:"1 when the archive step failed (a failed item of the job)."`
}

// ObjectsSummary is the blob-store part of a retention job.
type ObjectsSummary struct {
	Skipped            bool  `json:"skipped" doc:"True when this appliance has no blob store to apply retention to."`
	Objects            int   `json:"objects" doc:"Protected objects with snapshots."`
	SnapshotsKept      int   `json:"snapshotsKept"`
	SnapshotsForgotten int   `json:"snapshotsForgotten"`
	BytesFreed         int64 `json:"bytesFreed" doc:"Freed by garbage collection."`
	Failed             int   `json:"failed" doc:"Objects (or the garbage collection) that failed; each is a failed item of the job."`
}

// EndpointsSummary is the endpoint-repository part of a retention job.
type EndpointsSummary struct {
	Repositories       int   `json:"repositories" doc:"Active endpoints with snapshots."`
	SnapshotsKept      int   `json:"snapshotsKept"`
	SnapshotsForgotten int   `json:"snapshotsForgotten"`
	BytesFreed         int64 `json:"bytesFreed" doc:"Shrinkage of the repository directories (approximate while backups write)."`
	BytesBefore        int64 `json:"bytesBefore" doc:"The repository directories' size before their prunes, summed."`
	BytesAfter         int64 `json:"bytesAfter" doc:"Their size after, summed."`
	Failed             int   `json:"failed" doc:"Repositories that failed; each is a failed item of the job."`
	// Each is one repository the run got to, failed ones too, in the
	// order pruned.
	Each []RepositoryResult `json:"each"`
}

// RepositoryResult is what one endpoint repository's prune did. Sizes are
// the bytes of the repository directory on disk (what the provider pays
// for), measured just before and just after restic forget --prune while
// the appliance holds the repository's lease; 0 when the run never got as
// far as measuring.
type RepositoryResult struct {
	EndpointID       string `json:"endpointId"`
	BytesBefore      int64  `json:"bytesBefore"`
	BytesAfter       int64  `json:"bytesAfter"`
	SnapshotsRemoved int    `json:"snapshotsRemoved"`
	SnapshotsKept    int    `json:"snapshotsKept"`
	Failed           bool   `json:"failed"`
}

// Kind is the job kind of retention runs: action retention on a tenant, in
// queue retention, run in process (POST /api/v1/retention/run and the
// nightly schedules).
func (r *Retainer) Kind() jobs.Kind {
	return jobs.Kind{
		Action: app.ActionRetention, TargetType: app.TargetTenant, Queue: app.QueueRetention, MaxAttempts: 1,
		Resolve: func(ctx context.Context, tenantID, targetID string, _ json.RawMessage) (app.JobTarget, error) {
			if tenantID != "" && tenantID != targetID {
				return app.JobTarget{}, app.NotFound("tenant")
			}
			t, err := r.cfg.Tenants.Tenant(ctx, targetID)
			if err != nil {
				return app.JobTarget{}, err
			}
			return app.JobTarget{Type: app.TargetTenant, ID: t.ID, DisplayName: t.Name}, nil
		},
		Run: r.run,
	}
}

// Progress phases of a retention job.
const (
	PhaseSnapshots    = "snapshots"          // forgetting blob-store snapshots
	PhaseGarbage      = "garbage_collection" // the blob store's garbage collection
	PhaseRepositories = "repositories"       // restic forget --prune per endpoint
)

// run is the kind's Run: blob-store snapshots first (forget per object,
// then one garbage collection), then each endpoint repository. A failure
// of one object or repository is a failed item; the job goes on and ends
// partial. Only a failure to read the tenant's own settings fails the job.
func (r *Retainer) run(ctx context.Context, run *jobs.Run) (*jobs.Outcome, error) {
	tenantID := run.Job.Target.ID
	policy, _, err := TenantPolicy(ctx, r.cfg.Policies, tenantID)
	if err != nil {
		return nil, err
	}
	eps, err := r.cfg.Endpoints.Endpoints(ctx, app.EndpointFilter{TenantID: tenantID})
	if err != nil {
		return nil, err
	}
	var repos []*app.Endpoint
	for _, e := range eps {
		if e.Status == app.EndpointActive && e.LastSnapshotID != "" {
			repos = append(repos, e)
		}
	}
	sum := &Summary{}
	sum.Endpoints.Repositories = len(repos)
	sum.Endpoints.Each = []RepositoryResult{}
	p := &progress{run: run, ctx: ctx, sum: sum, total: int64(len(repos))}
	if err := r.archivePhase(ctx, p, tenantID); err != nil {
		return nil, err
	}

	if r.cfg.Snapshots == nil {
		sum.ProtectedObjects.Skipped = true
	} else if err := r.snapshotPhase(ctx, p, tenantID, policy); err != nil {
		return nil, err
	}
	for _, e := range repos {
		p.report(PhaseRepositories)
		if err := r.endpointRepository(ctx, p, e); err != nil {
			return nil, err
		}
		p.done++
	}
	sum.SnapshotsForgotten = sum.ProtectedObjects.SnapshotsForgotten + sum.Endpoints.SnapshotsForgotten
	sum.BytesFreed = sum.ProtectedObjects.BytesFreed + sum.Endpoints.BytesFreed
	r.cfg.Logger.Info("retention run finished", slog.String("job_id", run.Job.ID), slog.String("tenant_id", tenantID),
		slog.Int("snapshots_forgotten", sum.SnapshotsForgotten), slog.Int64("bytes_freed", sum.BytesFreed),
		slog.Int("objects_failed", sum.ProtectedObjects.Failed), slog.Int("repositories_failed", sum.Endpoints.Failed))
	final := app.JobProgress{Phase: "done", Percent: 100, ItemsDone: p.done, ItemsTotal: p.total, BytesDone: sum.BytesFreed}
	return &jobs.Outcome{Progress: &final, EventData: map[string]any{"retention": sum}, Step: "retention"}, nil
}

// PhaseArchive is the archive purge's progress phase.
const PhaseArchive = "archive"

// archivePhase purges the tenant's expired archive messages; a failure is
// a failed item and the job goes on.
func (r *Retainer) archivePhase(ctx context.Context, p *progress, tenantID string) error {
	sum := &p.sum.Archive
	if r.cfg.Archive == nil {
		sum.Skipped = true
		return nil
	}
	p.report(PhaseArchive)
	ps, err := r.cfg.Archive.Purge(ctx, tenantID)
	sum.PurgeSummary = ps
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	sum.Failed++
	r.cfg.Logger.Warn("archive retention failed", slog.String("tenant_id", tenantID), slog.Any("error", err))
	return p.run.ItemFailed(ctx, "archive", "archive", app.Fail("retention.archive_failed",
		map[string]any{"tenantId": tenantID}, fmt.Errorf("archive retention: %w", err)))
}

// progress reports units done (objects, the garbage collection,
// repositories) and bytes freed.
type progress struct {
	run         *jobs.Run
	ctx         context.Context
	sum         *Summary
	done, total int64
}

func (p *progress) report(phase string) {
	pct := 0
	if p.total > 0 {
		pct = int(p.done * 100 / p.total)
	}
	p.run.Progress(p.ctx, app.JobProgress{Phase: phase, Percent: pct, ItemsDone: p.done, ItemsTotal: p.total,
		BytesDone: p.sum.ProtectedObjects.BytesFreed + p.sum.Endpoints.BytesFreed})
}

// snapshotPhase applies the tenant's policy to every protected object's
// snapshots in the blob store, then collects garbage once. Listing the
// snapshots failing is one failed item, like a failed forget.
func (r *Retainer) snapshotPhase(ctx context.Context, p *progress, tenantID string, policy Policy) error {
	sum := &p.sum.ProtectedObjects
	p.report(PhaseSnapshots)
	byObject, order, err := r.listSnapshots(ctx, tenantID)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		sum.Failed++
		return p.run.ItemFailed(ctx, "snapshots", "snapshot list", app.Fail("retention.snapshots_failed",
			map[string]any{"protectedObjectId": ""}, fmt.Errorf("listing the tenant's snapshots: %w", err)))
	}
	sum.Objects = len(order)
	p.total += int64(len(order)) + 1 // the objects and the garbage collection
	now := r.cfg.Now()
	for _, obj := range order {
		snaps := byObject[obj]
		keep, forget := Select(snaps, now, policy)
		sum.SnapshotsKept += len(keep)
		if len(forget) > 0 {
			if err := r.cfg.Snapshots.ForgetSnapshots(ctx, tenantID, forget); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				sum.Failed++
				sum.SnapshotsKept += len(forget)
				if ierr := p.run.ItemFailed(ctx, obj, obj, app.Fail("retention.snapshots_failed",
					map[string]any{"protectedObjectId": obj}, err)); ierr != nil {
					return ierr
				}
			} else {
				sum.SnapshotsForgotten += len(forget)
			}
		}
		p.done++
		p.report(PhaseSnapshots)
	}
	p.report(PhaseGarbage)
	freed, err := r.cfg.Snapshots.CollectGarbage(ctx, tenantID)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		sum.Failed++
		if ierr := p.run.ItemFailed(ctx, "garbage-collection", "garbage collection", app.Fail("retention.snapshots_failed",
			map[string]any{"protectedObjectId": ""}, fmt.Errorf("garbage collection: %w", err))); ierr != nil {
			return ierr
		}
	}
	sum.BytesFreed += max(freed, 0)
	p.done++
	return nil
}

// listPage is how many snapshots one call to the blob store lists.
const listPage = 1000

// listSnapshots reads every snapshot of the tenant, grouped by protected
// object, with the objects in the order first seen (newest snapshot first).
func (r *Retainer) listSnapshots(ctx context.Context, tenantID string) (map[string][]Snap, []string, error) {
	byObject := map[string][]Snap{}
	var order []string
	seen := map[string]bool{}
	before := ""
	for {
		page, err := r.cfg.Snapshots.Snapshots(ctx, app.SnapshotFilter{TenantID: tenantID, Before: before, Limit: listPage})
		if err != nil {
			return nil, nil, err
		}
		added := 0
		for _, s := range page {
			if seen[s.ID] || s.TenantID != "" && s.TenantID != tenantID {
				continue
			}
			seen[s.ID] = true
			added++
			if _, ok := byObject[s.ProtectedObjectID]; !ok {
				order = append(order, s.ProtectedObjectID)
			}
			byObject[s.ProtectedObjectID] = append(byObject[s.ProtectedObjectID], Snap{ID: s.ID, At: s.At.Time})
		}
		// A short page is the last; a page of nothing new means the lister
		// ignores paging and gave everything already.
		if len(page) < listPage || added == 0 {
			return byObject, order, nil
		}
		before = page[len(page)-1].ID
	}
}

// endpointRepository runs restic forget --prune on one endpoint's
// repository with its effective policy. A failure is recorded as the
// endpoint's failed item; only the job's own problems are returned.
func (r *Retainer) endpointRepository(ctx context.Context, p *progress, e *app.Endpoint) error {
	sum := &p.sum.Endpoints
	policy, _, err := EndpointPolicy(ctx, r.cfg.Policies, e)
	if err != nil {
		return err
	}
	res, err := r.prune(ctx, e, policy)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	res.EndpointID, res.Failed = e.ID, err != nil
	sum.Each = append(sum.Each, res)
	if rerr := r.cfg.Policies.RecordEndpointPrune(ctx, e.ID, app.EndpointPrune{JobID: p.run.Job.ID, At: app.At(r.cfg.Now()),
		BytesBefore: res.BytesBefore, BytesAfter: res.BytesAfter, SnapshotsRemoved: res.SnapshotsRemoved,
		SnapshotsKept: res.SnapshotsKept, Failed: res.Failed}); rerr != nil {
		// The job's event still carries the result; only the endpoint
		// page's "last applied" stays behind.
		r.cfg.Logger.Warn("recording an endpoint's prune failed", slog.String("endpoint_id", e.ID), slog.Any("error", rerr))
	}
	sum.SnapshotsKept += res.SnapshotsKept
	sum.SnapshotsForgotten += res.SnapshotsRemoved
	sum.BytesBefore += res.BytesBefore
	sum.BytesAfter += res.BytesAfter
	sum.BytesFreed += max(res.BytesBefore-res.BytesAfter, 0)
	if err != nil {
		sum.Failed++
		var fe *app.FailureError
		if errors.As(err, &fe) {
			if fe.Params == nil {
				fe.Params = map[string]any{}
			}
			fe.Params["endpointId"], fe.Params["hostname"] = e.ID, e.Hostname
		}
		r.cfg.Logger.Warn("retention of an endpoint repository failed", slog.String("endpoint_id", e.ID), slog.Any("error", err))
		return p.run.ItemFailed(ctx, e.ID, endpointName(e), err)
	}
	if res.SnapshotsRemoved > 0 && r.cfg.Pruned != nil {
		r.cfg.Pruned(e.ID)
	}
	return nil
}

func endpointName(e *app.Endpoint) string {
	if e.DisplayName != "" {
		return e.DisplayName
	}
	return e.Hostname
}

// prune forgets and prunes one repository under the endpoint's lease:
// it waits for a verify run of the endpoint to end, and a verify queued
// meanwhile waits for the prune. A repository an agent backup holds
// restic's lock on is retried once after LockRetryWait, removing stale
// locks first; still locked, it fails with retention.repository_locked.
// The result's sizes are measured under the lease, just before and after
// restic ran.
func (r *Retainer) prune(ctx context.Context, e *app.Endpoint, policy Policy) (RepositoryResult, error) {
	var out RepositoryResult
	repoDir, passwordFile := r.cfg.Locate(e.ID)
	if _, err := os.Stat(passwordFile); err != nil {
		return out, app.Fail("restic.wrong_password", nil, fmt.Errorf("the appliance has no password file for this endpoint: %w", err))
	}
	if _, err := os.Stat(filepath.Join(repoDir, "config")); err != nil {
		return out, app.Fail("restic.repository_missing", nil, fmt.Errorf("no restic repository at the endpoint's directory: %w", err))
	}
	if err := os.MkdirAll(r.cfg.TempDir, 0o700); err != nil {
		return out, r.toolFailed("prepare", err)
	}
	tmp, err := os.MkdirTemp(r.cfg.TempDir, tempPrefix+e.ID+"-")
	if err != nil {
		return out, r.toolFailed("prepare", err)
	}
	defer os.RemoveAll(tmp)
	rs := newRestic(r.cfg.Restic, repoDir, passwordFile, tmp)

	release, err := r.cfg.Leases.Acquire(ctx, e.ID, LeaseHolder)
	if err != nil {
		return out, err
	}
	defer release()

	before, err := rs.snapshotIDs(ctx)
	if err != nil {
		return out, err
	}
	out.SnapshotsKept = len(before)
	out.BytesBefore = dirSize(repoDir)
	out.BytesAfter = out.BytesBefore
	var res *result
	for attempt := 1; ; attempt++ {
		if res, err = rs.forget(ctx, policy); err != nil {
			return out, err
		}
		if !locked(res) {
			break
		}
		if attempt == 2 {
			return out, app.Fail("retention.repository_locked", map[string]any{"holder": "restic lock"},
				fmt.Errorf("the repository was locked twice, %s apart; it is left as it is until the next run", r.cfg.LockRetryWait))
		}
		t := time.NewTimer(r.cfg.LockRetryWait)
		select {
		case <-ctx.Done():
			t.Stop()
			return out, ctx.Err()
		case <-t.C:
		}
		rs.unlock(ctx)
	}
	failed := res.Exit != 0
	out.BytesAfter = dirSize(repoDir)
	after, err := rs.snapshotIDs(ctx)
	if err != nil {
		return out, err
	}
	still := make(map[string]bool, len(after))
	for _, id := range after {
		still[id] = true
	}
	for _, id := range before {
		if !still[id] {
			out.SnapshotsRemoved++
		}
	}
	out.SnapshotsKept = len(after)
	if failed {
		return out, rs.failure("forget", res)
	}
	return out, nil
}

// LeaseHolder is how a retention prune holds an endpoint's lease.
const LeaseHolder = "retention"

func (r *Retainer) toolFailed(step string, err error) error {
	return &app.FailureError{Code: "retention.tool_failed", Params: map[string]any{"tool": "restic", "step": step}, Step: step, Err: err}
}
