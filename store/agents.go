package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"backstop/app"
)

var _ app.AgentService = (*DB)(nil)

// PendingAgentCommands returns the endpoint's due, queued external jobs.
func (db *DB) PendingAgentCommands(ctx context.Context, endpointID string, now time.Time) ([]*app.AgentCommand, error) {
	jobs, err := db.queryJobs(ctx, db.read, `SELECT `+jobColumns+` FROM jobs WHERE target_type = ? AND target_id = ?
		AND state = 'queued' AND executor = ? AND (not_before IS NULL OR not_before <= ?) ORDER BY id`,
		app.TargetEndpoint, endpointID, app.ExecutorExternal, now.UnixMilli())
	if err != nil {
		return nil, err
	}
	out := make([]*app.AgentCommand, 0, len(jobs))
	for _, j := range jobs {
		c := &app.AgentCommand{ID: j.ID, EndpointID: endpointID, Kind: j.Action}
		if j.Action == app.ActionRestore && len(j.Params) > 0 {
			if err := json.Unmarshal(j.Params, &c.Restore); err != nil {
				return nil, err
			}
		}
		out = append(out, c)
	}
	return out, nil
}

const agentRunColumns = `id, endpoint_id, job_id, kind, command_id, started_at, finished_at, state, snapshot_id, stats, sampled`

// StartAgentRun registers a run, idempotently by run id.
func (db *DB) StartAgentRun(ctx context.Context, r *app.AgentRun, newJob *app.Job) (*app.AgentRun, error) {
	var out *app.AgentRun
	err := db.WriteTx(ctx, func(tx *sql.Tx) error {
		existing, err := scanAgentRun(tx.QueryRowContext(ctx, `SELECT `+agentRunColumns+` FROM agent_runs WHERE id = ?`, r.ID))
		if err == nil {
			if existing.EndpointID != r.EndpointID {
				return app.Errorf(app.ECONFLICT, "run id %s is taken", r.ID)
			}
			out = existing
			return nil
		} else if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if r.CommandID != "" {
			j, err := db.jobFrom(ctx, tx, r.CommandID)
			if app.ErrorCode(err) == app.ENOTFOUND || (err == nil && (j.Target.Type != app.TargetEndpoint ||
				j.Target.ID != r.EndpointID || j.Executor != app.ExecutorExternal)) {
				return app.NotFound("command")
			} else if err != nil {
				return err
			}
			if j.State != app.JobQueued {
				return app.Errorf(app.ECONFLICT, "command %s is %s, no longer queued", j.ID, j.State)
			}
			if err := markRunning(ctx, tx, j, r.StartedAt); err != nil {
				return err
			}
			r.JobID = j.ID
		} else {
			newJob.Executor, newJob.State, newJob.StartedAt = app.ExecutorExternal, app.JobRunning, app.Ptr(app.At(r.StartedAt))
			if err := db.insertJob(ctx, tx, newJob); err != nil {
				return err
			}
			r.JobID = newJob.ID
		}
		r.State = app.JobRunning
		_, err = tx.ExecContext(ctx, `INSERT INTO agent_runs (id, endpoint_id, job_id, kind, command_id, started_at, state)
			VALUES (?,?,?,?,?,?,?)`, r.ID, r.EndpointID, r.JobID, r.Kind, r.CommandID, r.StartedAt.UnixMilli(), r.State)
		out = r
		return convertError(err)
	})
	return out, err
}

// AgentRun returns the run with the id.
func (db *DB) AgentRun(ctx context.Context, id string) (*app.AgentRun, error) {
	r, err := scanAgentRun(db.read.QueryRowContext(ctx, `SELECT `+agentRunColumns+` FROM agent_runs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, app.NotFound("run")
	}
	return r, err
}

func scanAgentRun(s scanner) (*app.AgentRun, error) {
	var r app.AgentRun
	var started int64
	var finished sql.NullInt64
	var stats, sampled string
	if err := s.Scan(&r.ID, &r.EndpointID, &r.JobID, &r.Kind, &r.CommandID, &started, &finished, &r.State,
		&r.SnapshotID, &stats, &sampled); err != nil {
		return nil, err
	}
	r.StartedAt, r.FinishedAt, r.Stats = msTime(started), fromMs(finished), json.RawMessage(stats)
	return &r, json.Unmarshal([]byte(sampled), &r.Sampled)
}

// FinishAgentRun ends the run, its job and the endpoint's facts in one
// transaction, with the events the job's end raises.
func (db *DB) FinishAgentRun(ctx context.Context, end app.AgentRunEnd, events func(*app.Job, *app.Endpoint) []*app.Event) (*app.Job, bool, error) {
	var out *app.Job
	duplicate := false
	err := db.WriteTx(ctx, func(tx *sql.Tx) error {
		r, err := scanAgentRun(tx.QueryRowContext(ctx, `SELECT `+agentRunColumns+` FROM agent_runs WHERE id = ?`, end.RunID))
		if errors.Is(err, sql.ErrNoRows) || (err == nil && r.EndpointID != end.EndpointID) {
			return app.NotFound("run")
		} else if err != nil {
			return err
		}
		j, err := db.jobFrom(ctx, tx, r.JobID)
		if err != nil {
			return err
		}
		out = j
		if r.State != app.JobRunning || app.JobTerminal(j.State) {
			duplicate = true
			return nil
		}
		at := end.FinishedAt
		if at.Before(r.StartedAt) {
			at = r.StartedAt
		}
		j.State, j.FinishedAt, j.Failure = end.State, app.Ptr(app.At(at)), end.Failure
		if j.StartedAt == nil {
			j.StartedAt = app.Ptr(app.At(r.StartedAt))
		}
		j.DurationMs = app.Ptr(j.FinishedAt.Sub(j.StartedAt.Time).Milliseconds())
		if end.SnapshotID != "" {
			j.SnapshotID = app.Ptr(end.SnapshotID)
		}
		if end.Message != "" {
			j.ErrorMessage = app.Ptr(end.Message)
		}
		j.Progress.Phase = "done"
		if end.State == app.JobSucceeded || end.State == app.JobPartial {
			j.Progress.Percent = 100
		}
		args, err := jobArgs(j) // positions: 4 state, 9 progress, 11 started, 12 finished, 13 snapshot, 15 message, 16 failure
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE jobs SET state=?4, progress=?9, started_at=?11, finished_at=?12,
			snapshot_id=?13, error_message=?15, failure=?16 WHERE id = ?1`, args...); err != nil {
			return err
		}
		stats := string(end.Stats)
		if stats == "" {
			stats = "{}"
		}
		sampled, _ := json.Marshal(nonNilSamples(end.Sampled))
		if _, err := tx.ExecContext(ctx, `UPDATE agent_runs SET finished_at = ?, state = ?, snapshot_id = ?, stats = ?, sampled = ?
			WHERE id = ?`, at.UnixMilli(), end.State, end.SnapshotID, stats, string(sampled), r.ID); err != nil {
			return err
		}
		e, err := scanEndpoint(tx.QueryRowContext(ctx, `SELECT `+endpointColumns+` FROM endpoints WHERE id = ?`, r.EndpointID))
		if err != nil {
			return err
		}
		if r.Kind == app.ActionBackup && applyBackupEnd(e, end.State, end.SnapshotID, at) {
			if _, err := tx.ExecContext(ctx, `UPDATE endpoints SET last_backup_at = ?, last_backup_state = ?,
				last_success_at = ?, last_snapshot_id = ? WHERE id = ?`, ms(e.LastBackupAt), e.LastBackupState,
				ms(e.LastSuccessAt), e.LastSnapshotID, e.ID); err != nil {
				return err
			}
		}
		if events != nil {
			for _, ev := range events(j, e) {
				if err := db.insertEvent(ctx, tx, ev); err != nil {
					return err
				}
			}
		}
		return nil
	})
	return out, duplicate, err
}

// applyBackupEnd updates the endpoint's backup facts for a backup that ended
// at `at`, unless a later run's end is already recorded (spooled reports can
// arrive out of order). It reports whether anything changed. An interrupted
// run counts as a backup's end but not as an outcome: it leaves
// lastBackupState alone, so it never raises last_backup_failed.
func applyBackupEnd(e *app.Endpoint, state, snapshotID string, at time.Time) bool {
	changed := false
	if e.LastBackupAt == nil || !at.Before(*e.LastBackupAt) {
		e.LastBackupAt = &at
		if state != app.JobInterrupted {
			e.LastBackupState = state
		}
		changed = true
	}
	if snapshotID != "" && (state == app.JobSucceeded || state == app.JobPartial) &&
		(e.LastSuccessAt == nil || !at.Before(*e.LastSuccessAt)) {
		e.LastSuccessAt, e.LastSnapshotID = &at, snapshotID
		changed = true
	}
	return changed
}

// SnapshotSamples returns the sampled files of the backup that made snapshotID.
func (db *DB) SnapshotSamples(ctx context.Context, snapshotID string) (string, []app.SampledFile, error) {
	var endpointID, sampled string
	err := db.read.QueryRowContext(ctx, `SELECT endpoint_id, sampled FROM agent_runs WHERE snapshot_id = ? AND kind = 'backup'
		ORDER BY id DESC LIMIT 1`, snapshotID).Scan(&endpointID, &sampled)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil, app.NotFound("snapshot")
	} else if err != nil {
		return "", nil, err
	}
	var files []app.SampledFile
	return endpointID, files, json.Unmarshal([]byte(sampled), &files)
}

func nonNilSamples(s []app.SampledFile) []app.SampledFile {
	if s == nil {
		return []app.SampledFile{}
	}
	return s
}
