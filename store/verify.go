package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"

	"backstop/app"
)

var _ app.VerifyReportService = (*DB)(nil)

// RecordVerifyReport stores r and applies it to the endpoint's verify facts
// in one transaction, so readiness never shows a verify whose report is
// missing, or the reverse. Recording a job's report twice is a conflict.
func (db *DB) RecordVerifyReport(ctx context.Context, r *app.VerifyReport) error {
	body, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return db.WriteTx(ctx, func(tx *sql.Tx) error {
		e, err := scanEndpoint(tx.QueryRowContext(ctx, `SELECT `+endpointColumns+` FROM endpoints WHERE id = ?`, r.EndpointID))
		if errors.Is(err, sql.ErrNoRows) {
			return app.NotFound("endpoint")
		} else if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO verify_reports (job_id, tenant_id, endpoint_id, state, finished_at, report)
			VALUES (?,?,?,?,?,?)`, r.JobID, r.TenantID, r.EndpointID, r.State, r.FinishedAt.UnixMilli(), string(body)); err != nil {
			return convertError(err)
		}
		r.ApplyTo(e)
		_, err = tx.ExecContext(ctx, `UPDATE endpoints SET verify_state = ?, verify_checked_at = ?,
			verify_passed_snapshot_id = ?, repository_damaged = ? WHERE id = ?`,
			e.VerifyState, ms(e.VerifyCheckedAt), e.VerifyPassedSnapshotID, e.RepositoryDamaged, e.ID)
		return err
	})
}

// LatestVerifyReport returns the newest report the filter selects.
func (db *DB) LatestVerifyReport(ctx context.Context, f app.VerifyReportFilter) (*app.VerifyReport, error) {
	q, args := `SELECT report FROM verify_reports WHERE 1=1`, []any{}
	if f.TenantID != "" {
		q, args = q+" AND tenant_id = ?", append(args, f.TenantID)
	}
	if f.EndpointID != "" {
		q, args = q+" AND endpoint_id = ?", append(args, f.EndpointID)
	}
	var body string
	err := db.read.QueryRowContext(ctx, q+" ORDER BY finished_at DESC, job_id DESC LIMIT 1", args...).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, app.NotFound("verify report")
	} else if err != nil {
		return nil, err
	}
	var r app.VerifyReport
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		return nil, err
	}
	return &r, nil
}
