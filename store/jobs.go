package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"backstop/app"
)

var _ app.JobService = (*DB)(nil)

const jobColumns = `id, tenant_id, queue, state, target_type, target_id, target_name, trigger, progress, queued_at,
	started_at, finished_at, snapshot_id, items_failed, error_message, failure, item_causes, action, executor, params,
	attempt, max_attempts, not_before, retry_of`

// CreateJob stores a new job, assigning id and queue time when unset.
func (db *DB) CreateJob(ctx context.Context, j *app.Job) error {
	return db.WriteTx(ctx, func(tx *sql.Tx) error { return db.insertJob(ctx, tx, j) })
}

func (db *DB) insertJob(ctx context.Context, tx *sql.Tx, j *app.Job) error {
	if j.ID == "" {
		j.ID = app.NewID(app.PrefixJob)
	}
	if j.QueuedAt.IsZero() {
		j.QueuedAt = app.At(db.Now())
	}
	if j.State == "" {
		j.State = app.JobQueued
	}
	if j.Attempt == 0 {
		j.Attempt = 1
	}
	if j.MaxAttempts == 0 {
		j.MaxAttempts = 1
	}
	if j.Executor == "" {
		j.Executor = app.ExecutorLocal
	}
	args, err := jobArgs(j)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO jobs (`+jobColumns+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`, args...)
	return convertError(err)
}

// Job returns the job with the id.
func (db *DB) Job(ctx context.Context, id string) (*app.Job, error) {
	return db.jobFrom(ctx, db.read, id)
}

type jobRowQuerier interface {
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

func (db *DB) jobFrom(ctx context.Context, q jobRowQuerier, id string) (*app.Job, error) {
	j, err := scanJob(q.QueryRowContext(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, app.NotFound("job")
	}
	return j, err
}

// Jobs lists jobs newest first.
func (db *DB) Jobs(ctx context.Context, f app.JobFilter) ([]*app.Job, error) {
	q, args := `SELECT `+jobColumns+` FROM jobs WHERE 1=1`, []any{}
	if f.TenantID != "" {
		q, args = q+" AND tenant_id = ?", append(args, f.TenantID)
	}
	if f.State != "" {
		q, args = q+" AND state = ?", append(args, f.State)
	}
	if f.Queue != "" {
		q, args = q+" AND queue = ?", append(args, f.Queue)
	}
	if f.TargetID != "" {
		q, args = q+" AND target_id = ?", append(args, f.TargetID)
	}
	if f.Since != nil {
		q, args = q+" AND queued_at >= ?", append(args, f.Since.UnixMilli())
	}
	if f.Before != nil {
		at := f.Before.QueuedAt.UnixMilli()
		q, args = q+" AND (queued_at < ? OR (queued_at = ? AND id < ?))", append(args, at, at, f.Before.ID)
	}
	if f.Limit <= 0 {
		f.Limit = 100
	}
	return db.queryJobs(ctx, db.read, q+" ORDER BY queued_at DESC, id DESC LIMIT ?", append(args, f.Limit)...)
}

func (db *DB) queryJobs(ctx context.Context, qr querier, q string, args ...any) ([]*app.Job, error) {
	return queryRows(ctx, qr, scanJob, q, args...)
}

// ClaimJobs moves due queued local jobs of a queue to running, oldest first.
func (db *DB) ClaimJobs(ctx context.Context, queue string, limit int, now time.Time) ([]*app.Job, error) {
	var out []*app.Job
	err := db.WriteTx(ctx, func(tx *sql.Tx) error {
		jobs, err := db.queryJobs(ctx, tx, `SELECT `+jobColumns+` FROM jobs WHERE state = 'queued' AND queue = ?
			AND executor = 'local' AND (not_before IS NULL OR not_before <= ?) ORDER BY queued_at, id LIMIT ?`,
			queue, now.UnixMilli(), limit)
		if err != nil {
			return err
		}
		for _, j := range jobs {
			if err := markRunning(ctx, tx, j, now); err != nil {
				return err
			}
		}
		out = jobs
		return nil
	})
	return out, err
}

// StartJob moves one queued job to running.
func (db *DB) StartJob(ctx context.Context, id string, now time.Time) (*app.Job, error) {
	var out *app.Job
	err := db.WriteTx(ctx, func(tx *sql.Tx) error {
		j, err := db.jobFrom(ctx, tx, id)
		if err != nil {
			return err
		}
		if j.State != app.JobQueued {
			return app.Errorf(app.ECONFLICT, "job %s is %s, not queued", id, j.State)
		}
		out = j
		return markRunning(ctx, tx, j, now)
	})
	return out, err
}

func markRunning(ctx context.Context, tx *sql.Tx, j *app.Job, now time.Time) error {
	j.State, j.StartedAt = app.JobRunning, app.Ptr(app.At(now))
	j.Progress.Phase = "starting"
	p, _ := json.Marshal(j.Progress)
	_, err := tx.ExecContext(ctx, "UPDATE jobs SET state = 'running', started_at = ?, progress = ? WHERE id = ?",
		now.UnixMilli(), string(p), j.ID)
	return err
}

// SaveJobProgress stores the progress of a running job; other states are
// left alone (a late report after the end changes nothing).
func (db *DB) SaveJobProgress(ctx context.Context, id string, p app.JobProgress) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return db.WriteTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "UPDATE jobs SET progress = ? WHERE id = ? AND state = 'running'", string(b), id)
		return err
	})
}

// FinishJob commits a running job's end with its follow-up job and events.
func (db *DB) FinishJob(ctx context.Context, id string, fn app.JobFinisher) (*app.Job, error) {
	var out *app.Job
	err := db.WriteTx(ctx, func(tx *sql.Tx) error {
		j, err := db.jobFrom(ctx, tx, id)
		if err != nil {
			return err
		}
		if j.State != app.JobRunning {
			return app.Errorf(app.ECONFLICT, "job %s is %s, not running", id, j.State)
		}
		follow, err := fn(j)
		if err != nil {
			return err
		}
		args, err := jobArgs(j)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE jobs SET tenant_id=?2, queue=?3, state=?4, target_type=?5, target_id=?6,
			target_name=?7, trigger=?8, progress=?9, queued_at=?10, started_at=?11, finished_at=?12, snapshot_id=?13,
			items_failed=?14, error_message=?15, failure=?16, item_causes=?17, action=?18, executor=?19, params=?20,
			attempt=?21, max_attempts=?22, not_before=?23, retry_of=?24 WHERE id = ?1`, args...)
		if err != nil {
			return err
		}
		if follow != nil {
			if follow.Next != nil {
				if err := db.insertJob(ctx, tx, follow.Next); err != nil {
					return err
				}
			}
			for _, e := range follow.Events {
				if err := db.insertEvent(ctx, tx, e); err != nil {
					return err
				}
			}
		}
		out = j
		return nil
	})
	return out, err
}

// RunningJobs lists the running jobs of an executor.
func (db *DB) RunningJobs(ctx context.Context, executor string) ([]*app.Job, error) {
	return db.queryJobs(ctx, db.read, `SELECT `+jobColumns+` FROM jobs WHERE state = 'running' AND executor = ? ORDER BY id`, executor)
}

// NextJobDueAt is the earliest future notBefore of a queued local job.
func (db *DB) NextJobDueAt(ctx context.Context, now time.Time) (*time.Time, error) {
	var v sql.NullInt64
	err := db.read.QueryRowContext(ctx, `SELECT min(not_before) FROM jobs WHERE state = 'queued' AND executor = 'local'
		AND not_before > ?`, now.UnixMilli()).Scan(&v)
	return fromMs(v), err
}

// ActiveJobFor returns a queued or running job of the action on the target.
func (db *DB) ActiveJobFor(ctx context.Context, action, targetType, targetID string) (*app.Job, error) {
	jobs, err := db.queryJobs(ctx, db.read, `SELECT `+jobColumns+` FROM jobs WHERE target_type = ? AND target_id = ?
		AND action = ? AND state IN ('queued', 'running') ORDER BY id LIMIT 1`, targetType, targetID, action)
	if err != nil {
		return nil, err
	}
	if len(jobs) == 0 {
		return nil, app.NotFound("job")
	}
	return jobs[0], nil
}

func jobArgs(j *app.Job) ([]any, error) {
	progress, err := json.Marshal(j.Progress)
	if err != nil {
		return nil, err
	}
	var failure any
	if j.Failure != nil {
		b, err := json.Marshal(j.Failure)
		if err != nil {
			return nil, err
		}
		failure = string(b)
	}
	causes := j.ItemCauses
	if causes == nil {
		causes = []app.ItemCause{}
	}
	itemCauses, _ := json.Marshal(causes)
	params := string(j.Params)
	if params == "" {
		params = "{}"
	}
	snapshot, errMsg := "", ""
	if j.SnapshotID != nil {
		snapshot = *j.SnapshotID
	}
	if j.ErrorMessage != nil {
		errMsg = *j.ErrorMessage
	}
	return []any{j.ID, j.TenantID, j.Queue, j.State, j.Target.Type, j.Target.ID, j.Target.DisplayName, j.Trigger,
		string(progress), j.QueuedAt.UnixMilli(), msA(j.StartedAt), msA(j.FinishedAt), snapshot, j.ItemsFailed, errMsg,
		failure, string(itemCauses), j.Action, j.Executor, params, j.Attempt, j.MaxAttempts, ms(j.NotBefore), j.RetryOf}, nil
}

func scanJob(s scanner) (*app.Job, error) {
	var j app.Job
	var queued int64
	var started, finished, notBefore sql.NullInt64
	var progress, snapshot, errMsg, causes, params string
	var failure sql.NullString
	if err := s.Scan(&j.ID, &j.TenantID, &j.Queue, &j.State, &j.Target.Type, &j.Target.ID, &j.Target.DisplayName,
		&j.Trigger, &progress, &queued, &started, &finished, &snapshot, &j.ItemsFailed, &errMsg, &failure, &causes,
		&j.Action, &j.Executor, &params, &j.Attempt, &j.MaxAttempts, &notBefore, &j.RetryOf); err != nil {
		return nil, err
	}
	j.QueuedAt, j.StartedAt, j.FinishedAt = app.At(msTime(queued)), fromMsA(started), fromMsA(finished)
	j.NotBefore = fromMs(notBefore)
	if j.StartedAt != nil && j.FinishedAt != nil {
		j.DurationMs = app.Ptr(j.FinishedAt.Sub(j.StartedAt.Time).Milliseconds())
	}
	if snapshot != "" {
		j.SnapshotID = &snapshot
	}
	if errMsg != "" {
		j.ErrorMessage = &errMsg
	}
	j.Params = json.RawMessage(params)
	if err := json.Unmarshal([]byte(progress), &j.Progress); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(causes), &j.ItemCauses); err != nil {
		return nil, err
	}
	if failure.Valid {
		j.Failure = &app.Failure{}
		if err := json.Unmarshal([]byte(failure.String), j.Failure); err != nil {
			return nil, err
		}
	}
	return &j, nil
}
