package store

import (
	"context"
	"database/sql"
	"errors"

	"backstop/app"
)

var _ app.RetentionService = (*DB)(nil)

// TenantRetention returns the tenant's stored retention policy, if any.
func (db *DB) TenantRetention(ctx context.Context, tenantID string) (app.RetentionPolicy, bool, error) {
	return scanPolicy(db.read.QueryRowContext(ctx, `SELECT keep_all_days, keep_daily_days, keep_weekly_days, keep_monthly_days
		FROM retention_policies WHERE tenant_id = ?`, tenantID))
}

// SetTenantRetention stores the tenant's retention policy, replacing any.
func (db *DB) SetTenantRetention(ctx context.Context, tenantID string, p app.RetentionPolicy) error {
	_, err := db.write.ExecContext(ctx, `INSERT INTO retention_policies
		(tenant_id, keep_all_days, keep_daily_days, keep_weekly_days, keep_monthly_days, updated_at) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (tenant_id) DO UPDATE SET keep_all_days = excluded.keep_all_days, keep_daily_days = excluded.keep_daily_days,
		keep_weekly_days = excluded.keep_weekly_days, keep_monthly_days = excluded.keep_monthly_days, updated_at = excluded.updated_at`,
		tenantID, p.KeepAllDays, p.KeepDailyDays, p.KeepWeeklyDays, p.KeepMonthlyDays, db.Now().UnixMilli())
	return convertError(err)
}

// EndpointRetention returns the endpoint's retention override, if any.
func (db *DB) EndpointRetention(ctx context.Context, endpointID string) (app.RetentionPolicy, bool, error) {
	return scanPolicy(db.read.QueryRowContext(ctx, `SELECT keep_all_days, keep_daily_days, keep_weekly_days, keep_monthly_days
		FROM endpoint_retention WHERE endpoint_id = ?`, endpointID))
}

// SetEndpointRetention stores the endpoint's override, or with nil removes
// it so the endpoint inherits its tenant's policy.
func (db *DB) SetEndpointRetention(ctx context.Context, endpointID string, p *app.RetentionPolicy) error {
	if p == nil {
		_, err := db.write.ExecContext(ctx, "DELETE FROM endpoint_retention WHERE endpoint_id = ?", endpointID)
		return err
	}
	_, err := db.write.ExecContext(ctx, `INSERT INTO endpoint_retention
		(endpoint_id, keep_all_days, keep_daily_days, keep_weekly_days, keep_monthly_days, updated_at) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (endpoint_id) DO UPDATE SET keep_all_days = excluded.keep_all_days, keep_daily_days = excluded.keep_daily_days,
		keep_weekly_days = excluded.keep_weekly_days, keep_monthly_days = excluded.keep_monthly_days, updated_at = excluded.updated_at`,
		endpointID, p.KeepAllDays, p.KeepDailyDays, p.KeepWeeklyDays, p.KeepMonthlyDays, db.Now().UnixMilli())
	return convertError(err)
}

// RecordEndpointPrune stores the endpoint's latest prune, replacing any.
func (db *DB) RecordEndpointPrune(ctx context.Context, endpointID string, p app.EndpointPrune) error {
	_, err := db.write.ExecContext(ctx, `INSERT INTO endpoint_prunes
		(endpoint_id, job_id, at, bytes_before, bytes_after, snapshots_removed, snapshots_kept, failed) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (endpoint_id) DO UPDATE SET job_id = excluded.job_id, at = excluded.at, bytes_before = excluded.bytes_before,
		bytes_after = excluded.bytes_after, snapshots_removed = excluded.snapshots_removed, snapshots_kept = excluded.snapshots_kept,
		failed = excluded.failed`,
		endpointID, p.JobID, p.At.UnixMilli(), p.BytesBefore, p.BytesAfter, p.SnapshotsRemoved, p.SnapshotsKept, p.Failed)
	return convertError(err)
}

// LastEndpointPrune returns the endpoint's latest prune, or nil.
func (db *DB) LastEndpointPrune(ctx context.Context, endpointID string) (*app.EndpointPrune, error) {
	var p app.EndpointPrune
	var at int64
	err := db.read.QueryRowContext(ctx, `SELECT job_id, at, bytes_before, bytes_after, snapshots_removed, snapshots_kept, failed
		FROM endpoint_prunes WHERE endpoint_id = ?`, endpointID).Scan(&p.JobID, &at, &p.BytesBefore, &p.BytesAfter,
		&p.SnapshotsRemoved, &p.SnapshotsKept, &p.Failed)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	p.At = app.At(msTime(at))
	return &p, nil
}

func scanPolicy(row *sql.Row) (app.RetentionPolicy, bool, error) {
	var p app.RetentionPolicy
	err := row.Scan(&p.KeepAllDays, &p.KeepDailyDays, &p.KeepWeeklyDays, &p.KeepMonthlyDays)
	if errors.Is(err, sql.ErrNoRows) {
		return app.RetentionPolicy{}, false, nil
	} else if err != nil {
		return app.RetentionPolicy{}, false, err
	}
	return p, true, nil
}
