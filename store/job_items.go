package store

import (
	"context"
	"database/sql"
	"encoding/json"

	"backstop/app"
)

var _ app.JobScheduleService = (*DB)(nil)

// AddJobItem records a failed item of a running job and bumps itemsFailed.
func (db *DB) AddJobItem(ctx context.Context, jobID string, it *app.JobItem) (*app.Job, error) {
	if it.State == "" {
		it.State = app.JobFailed
	}
	if it.At.IsZero() {
		it.At = app.At(db.Now())
	}
	var failure any
	code := ""
	if it.Failure != nil {
		b, err := json.Marshal(it.Failure)
		if err != nil {
			return nil, err
		}
		failure, code = string(b), it.Failure.Code
	}
	var out *app.Job
	err := db.WriteTx(ctx, func(tx *sql.Tx) error {
		j, err := db.jobFrom(ctx, tx, jobID)
		if err != nil {
			return err
		}
		if j.State != app.JobRunning {
			return app.Errorf(app.ECONFLICT, "job %s is %s, not running", jobID, j.State)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO job_items (job_id, ref, name, state, at, code, failure) VALUES (?,?,?,?,?,?,?)`,
			jobID, it.Ref, it.Name, it.State, it.At.UnixMilli(), code, failure); err != nil {
			return convertError(err)
		}
		if _, err := tx.ExecContext(ctx, "UPDATE jobs SET items_failed = items_failed + 1 WHERE id = ?", jobID); err != nil {
			return err
		}
		j.ItemsFailed++
		out = j
		return nil
	})
	return out, err
}

// JobItems returns a job's failed items in report order.
func (db *DB) JobItems(ctx context.Context, jobID string, limit int) ([]*app.JobItem, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT ref, name, state, at, failure FROM job_items WHERE job_id = ? ORDER BY seq LIMIT ?`,
		jobID, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*app.JobItem{}
	for rows.Next() {
		var it app.JobItem
		var at int64
		var failure sql.NullString
		if err := rows.Scan(&it.Ref, &it.Name, &it.State, &at, &failure); err != nil {
			return nil, err
		}
		it.At = app.At(msTime(at))
		if failure.Valid {
			it.Failure = &app.Failure{}
			if err := json.Unmarshal([]byte(failure.String), it.Failure); err != nil {
				return nil, err
			}
		}
		out = append(out, &it)
	}
	return out, rows.Err()
}

// FailureGroups groups a job's failed items by cause, most frequent first;
// the sample is the first item reported with the cause.
func (db *DB) FailureGroups(ctx context.Context, jobID string) ([]app.FailureGroup, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT code, count(*), (SELECT name FROM job_items s WHERE s.job_id = i.job_id
		AND s.code = i.code ORDER BY seq LIMIT 1) FROM job_items i WHERE job_id = ? GROUP BY code ORDER BY count(*) DESC, code`, jobID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []app.FailureGroup{}
	for rows.Next() {
		var g app.FailureGroup
		if err := rows.Scan(&g.Code, &g.Count, &g.Sample); err != nil {
			return nil, err
		}
		if g.Code == "" {
			g.Code = app.CodeUnknown
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

// SaveJobSchedule creates or replaces the schedule of an action on a target.
func (db *DB) SaveJobSchedule(ctx context.Context, s *app.JobSchedule) error {
	if s.ID == "" {
		s.ID = app.NewID(app.PrefixSchedule)
	}
	if s.CreatedAt.IsZero() {
		s.CreatedAt = db.Now()
	}
	params := string(s.Params)
	if params == "" {
		params = "{}"
	}
	return db.WriteTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO job_schedules (id, tenant_id, action, target_type, target_id, spec, params,
			enabled, created_at) VALUES (?,?,?,?,?,?,?,?,?) ON CONFLICT (action, target_type, target_id) DO UPDATE SET
			spec = excluded.spec, params = excluded.params, enabled = excluded.enabled`,
			s.ID, s.TenantID, s.Action, s.TargetType, s.TargetID, s.Spec, params, s.Enabled, s.CreatedAt.UnixMilli())
		return convertError(err)
	})
}

// JobSchedules lists every schedule.
func (db *DB) JobSchedules(ctx context.Context) ([]*app.JobSchedule, error) {
	return db.jobSchedules(ctx, "")
}

// EnabledJobSchedules lists the enabled schedules whose cron expression is spec.
func (db *DB) EnabledJobSchedules(ctx context.Context, spec string) ([]*app.JobSchedule, error) {
	return db.jobSchedules(ctx, "WHERE enabled AND spec = ?", spec)
}

// JobScheduleSpecs lists the distinct cron expressions of the enabled schedules.
func (db *DB) JobScheduleSpecs(ctx context.Context) ([]string, error) {
	return queryRows(ctx, db.read, func(row scanner) (string, error) {
		var spec string
		return spec, row.Scan(&spec)
	}, `SELECT DISTINCT spec FROM job_schedules WHERE enabled ORDER BY spec`)
}

func (db *DB) jobSchedules(ctx context.Context, where string, args ...any) ([]*app.JobSchedule, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT id, tenant_id, action, target_type, target_id, spec, params, enabled,
		created_at FROM job_schedules `+where+` ORDER BY id`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*app.JobSchedule
	for rows.Next() {
		var s app.JobSchedule
		var params string
		var created int64
		if err := rows.Scan(&s.ID, &s.TenantID, &s.Action, &s.TargetType, &s.TargetID, &s.Spec, &params, &s.Enabled, &created); err != nil {
			return nil, err
		}
		s.Params, s.CreatedAt = json.RawMessage(params), msTime(created)
		out = append(out, &s)
	}
	return out, rows.Err()
}

// DeleteJobSchedule removes a schedule.
func (db *DB) DeleteJobSchedule(ctx context.Context, id string) error {
	return db.WriteTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "DELETE FROM job_schedules WHERE id = ?", id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return app.NotFound("schedule")
		}
		return nil
	})
}
