package protect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"time"

	"backstop/app"
	"backstop/app/blobstore"
	"backstop/app/jobs"
)

// VerifyKind is the job kind of verify runs of protected objects (queue
// verify; POST /verifies with targetType protected_object, and the daily
// verify schedules). A run:
//
//  1. reads back a random sample of the newest snapshot's items
//     (VerifySamples, every item when there are fewer) through the path a
//     restore takes, each decrypted, authenticated and compared with its
//     SHA-256 in the catalogue;
//  2. re-reads every pack of the tenant written since the object's last
//     verify that checked packs (all of them the first time): each must
//     hash to its name and every blob in it must open.
//
// Outcome, recorded on the object (readiness follows): passed when every
// sample matched and no pack is damaged — the snapshot is proven and
// readiness can be green; failed with repository.damaged when a pack is
// damaged or the snapshot is gone from the catalogue (attention
// repository_damaged; the next run checks those packs again), else failed
// with verify.hash_mismatch when a sample did not match (each one a failed
// item); error when nothing could be tested (readiness unchanged).
// verify.completed carries data.result {state, sampled, matched,
// mismatched} and data.protectedObject.
func (m *Manager) VerifyKind() jobs.Kind {
	return jobs.Kind{
		Action: app.ActionVerify, TargetType: app.TargetProtectedObject, Queue: app.QueueVerify, MaxAttempts: 1,
		Resolve: func(ctx context.Context, tenantID, targetID string, _ json.RawMessage) (app.JobTarget, error) {
			o, err := m.object(ctx, tenantID, targetID)
			if err != nil {
				return app.JobTarget{}, err
			}
			return app.JobTarget{Type: app.TargetProtectedObject, ID: o.ID, DisplayName: o.DisplayName}, nil
		},
		Run:       m.runVerify,
		EventData: m.eventData,
	}
}

func (m *Manager) runVerify(ctx context.Context, run *jobs.Run) (*jobs.Outcome, error) {
	o, err := m.cfg.Objects.ProtectedObject(ctx, run.Job.Target.ID)
	if err != nil {
		return nil, err
	}
	res := app.VerifyResult{State: app.VerifyReportError}
	out := &jobs.Outcome{Result: &res, Step: "verify"}
	if o.LastSnapshotID == "" {
		return out, app.Fail("verify.object_no_snapshot", map[string]any{"protectedObjectId": o.ID},
			errors.New("the protected object has no snapshot yet: run a backup first"))
	}
	snap := o.LastSnapshotID
	out.SnapshotID = snap
	started := m.cfg.Now()
	run.Progress(ctx, app.JobProgress{Phase: "verifying"})

	// snapProblem is damage found in the snapshot itself.
	snapProblem := ""
	sc, err := m.cfg.Blobs.VerifySample(ctx, snap, m.cfg.VerifySamples)
	switch {
	case app.ErrorCode(err) == app.ENOTFOUND:
		snapProblem = "snapshot " + snap + ", recorded by the object's last backup, is not in the catalogue"
	case errors.Is(err, blobstore.ErrCorrupt):
		snapProblem = "the manifest of snapshot " + snap + " does not read back: " + err.Error()
	case err != nil:
		return m.verifyError(ctx, out, err)
	}
	missing := snapProblem != ""
	res.Sampled, res.Matched, res.Mismatched = sc.Sampled, sc.Matched, sc.Mismatched
	run.Progress(ctx, app.JobProgress{Phase: "verifying", Percent: 50, ItemsDone: int64(sc.Sampled), ItemsTotal: int64(sc.Sampled)})

	var since time.Time
	if o.LastVerifyStartedAt != nil {
		since = *o.LastVerifyStartedAt
	}
	pc, err := m.cfg.Blobs.CheckPacks(ctx, o.TenantID, since)
	if err != nil && !missing && sc.Mismatched == 0 {
		return m.verifyError(ctx, out, err)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	for _, d := range sc.Damaged {
		ferr := app.Fail("verify.hash_mismatch", map[string]any{"snapshotId": snap, "path": d.Path}, errors.New(d.Reason))
		if ierr := run.ItemFailed(ctx, d.ItemID, path.Join(d.Path, d.ItemID), ferr); ierr != nil {
			return nil, ierr
		}
	}
	damaged := missing || len(pc.Damaged) > 0
	var cause *app.FailureError
	switch {
	case damaged:
		reason := fmt.Sprintf("%d of %d packs checked are damaged", len(pc.Damaged), pc.Packs)
		if missing {
			reason = snapProblem
		} else if len(pc.Damaged) > 0 {
			reason += "; first: pack " + pc.Damaged[0].PackID + ": " + pc.Damaged[0].Reason
		}
		cause = app.Fail("repository.damaged", map[string]any{"repository": o.ID}, errors.New(reason))
	case sc.Mismatched > 0:
		first := sc.Damaged[0].Path
		cause = app.Fail("verify.hash_mismatch", map[string]any{"snapshotId": snap, "path": first, "mismatched": sc.Mismatched},
			fmt.Errorf("%d of %d sampled items did not read back to their SHA-256", sc.Mismatched, sc.Sampled))
	}
	now := m.cfg.Now()
	if _, err := m.cfg.Objects.UpdateProtectedObject(ctx, o.ID, func(o *app.ProtectedObject) error {
		o.VerifyCheckedAt = &now
		if cause == nil {
			o.VerifyState, o.VerifyPassedSnapshotID, o.RepositoryDamaged = app.VerifyPassed, snap, false
			o.LastVerifyStartedAt = &started
			return nil
		}
		// Failed: packs found damaged are checked again by the next run, so
		// LastVerifyStartedAt stays.
		o.VerifyState, o.RepositoryDamaged = app.VerifyFailed, damaged
		if !damaged {
			o.LastVerifyStartedAt = &started
		}
		return nil
	}); err != nil {
		return nil, err
	}
	res.State = app.VerifyReportPassed
	if cause != nil {
		res.State = app.VerifyReportFailed
		cause.Step = "verify"
	}
	m.log.Info("verify finished", "job_id", run.Job.ID, "protected_object_id", o.ID, "snapshot_id", snap, "state", res.State,
		"sampled", res.Sampled, "mismatched", res.Mismatched, "packs_checked", pc.Packs, "packs_damaged", len(pc.Damaged))
	out.Progress = &app.JobProgress{Phase: "done", Percent: 100, ItemsDone: int64(res.Sampled), ItemsTotal: int64(res.Sampled),
		BytesDone: pc.Bytes, BytesTotal: pc.Bytes}
	if cause != nil {
		return out, cause
	}
	return out, nil
}

// verifyError ends a run that could not test anything: readiness stays.
func (m *Manager) verifyError(ctx context.Context, out *jobs.Outcome, err error) (*jobs.Outcome, error) {
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return out, err
}
