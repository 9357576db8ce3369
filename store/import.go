package store

import (
	"context"
	"database/sql"

	"backstop/app"
)

// Bulk imports fill a database fast: one write transaction and one prepared
// statement per call, instead of a transaction per row. They are for
// seeding (benchmarks, migrations from another system), not for the request
// path, and they hold the write lock for their whole run.

// ImportEndpoints inserts the endpoints in one transaction, assigning ids
// and creation times where unset. Any failure rolls back the whole call.
func (db *DB) ImportEndpoints(ctx context.Context, eps []*app.Endpoint) error {
	return db.WriteTx(ctx, func(tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, insertEndpoint)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for _, e := range eps {
			if e.ID == "" {
				e.ID = app.NewID(app.PrefixEndpoint)
			}
			if e.CreatedAt.IsZero() {
				e.CreatedAt = db.Now()
			}
			if e.Status == "" {
				e.Status = app.EndpointActive
			}
			if _, err := stmt.ExecContext(ctx, endpointArgs(e)...); err != nil {
				return convertError(err)
			}
		}
		return nil
	})
}

// ImportAudit inserts audit rows in one transaction, keeping each row's At
// (rows without one get the current time) and setting its ID. Unlike
// WriteAudit it bypasses the group-commit writer, so it must not be used
// for rows that answer a request.
func (db *DB) ImportAudit(ctx context.Context, rows []*app.AuditEntry) error {
	return db.WriteTx(ctx, func(tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, `INSERT INTO audit_log (at, actor_type, actor_id, actor_name, tenant_id,
			action, target, status, ip, user_agent, request_id) VALUES (?,?,?,?,?,?,?,?,?,?,?)`)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for _, e := range rows {
			if e.At.IsZero() {
				e.At = app.At(db.Now())
			}
			res, err := stmt.ExecContext(ctx, e.At.UnixMilli(), e.ActorType, e.ActorID, e.ActorName, e.TenantID,
				e.Action, e.Target, e.Status, e.IP, e.UserAgent, e.RequestID)
			if err != nil {
				return err
			}
			e.ID, _ = res.LastInsertId()
		}
		return nil
	})
}
