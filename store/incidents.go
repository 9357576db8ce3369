package store

import (
	"context"
	"database/sql"
	"errors"

	"backstop/app"
)

// attachIncident applies the end of the job a job.failed or job.completed
// event reports to the open incidents and sets data.incident, inside the
// transaction that inserts the event. Every job end, from the job runner or
// an agent's run, passes through insertEvent, so every job kind gets
// incidents. Events without a job in data change nothing.
func (db *DB) attachIncident(ctx context.Context, tx *sql.Tx, e *app.Event) error {
	if e.Type != app.EventJobFailed && e.Type != app.EventJobCompleted {
		return nil
	}
	data, ok := e.Data.(map[string]any)
	if !ok {
		return nil
	}
	j, ok := data["job"].(*app.Job)
	if !ok || j == nil || j.Target.ID == "" {
		return nil
	}
	open, err := openIncident(ctx, tx, j.Target.Type, j.Target.ID, j.Queue)
	if err != nil {
		return err
	}
	at := e.CreatedAt.Time
	if j.FinishedAt != nil {
		at = j.FinishedAt.Time
	}
	carried, next := app.NextIncident(j, open, at)
	switch {
	case next == nil && open != nil:
		_, err = tx.ExecContext(ctx, `DELETE FROM open_incidents WHERE target_type = ? AND target_id = ? AND queue = ?`,
			open.TargetType, open.TargetID, open.Queue)
	case next != nil && next != open:
		_, err = tx.ExecContext(ctx, `INSERT INTO open_incidents (target_type, target_id, queue, tenant_id, incident_key, opened_at)
			VALUES (?,?,?,?,?,?) ON CONFLICT (target_type, target_id, queue) DO UPDATE SET
			tenant_id = excluded.tenant_id, incident_key = excluded.incident_key, opened_at = excluded.opened_at`,
			next.TargetType, next.TargetID, next.Queue, next.TenantID, next.Key, next.OpenedAt.UnixMilli())
	}
	if err != nil {
		return err
	}
	if carried != nil {
		data["incident"] = carried
	}
	return nil
}

func openIncident(ctx context.Context, tx *sql.Tx, targetType, targetID, queue string) (*app.OpenIncident, error) {
	o := app.OpenIncident{TargetType: targetType, TargetID: targetID, Queue: queue}
	var opened int64
	err := tx.QueryRowContext(ctx, `SELECT tenant_id, incident_key, opened_at FROM open_incidents
		WHERE target_type = ? AND target_id = ? AND queue = ?`, targetType, targetID, queue).Scan(&o.TenantID, &o.Key, &opened)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	o.OpenedAt = msTime(opened)
	return &o, nil
}

// OpenIncidents lists the incidents open now, oldest first (for tests and
// the operator's view of what a PSA should have open).
func (db *DB) OpenIncidents(ctx context.Context) ([]*app.OpenIncident, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT tenant_id, target_type, target_id, queue, incident_key, opened_at
		FROM open_incidents ORDER BY opened_at, target_id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*app.OpenIncident
	for rows.Next() {
		var o app.OpenIncident
		var opened int64
		if err := rows.Scan(&o.TenantID, &o.TargetType, &o.TargetID, &o.Queue, &o.Key, &opened); err != nil {
			return nil, err
		}
		o.OpenedAt = msTime(opened)
		out = append(out, &o)
	}
	return out, rows.Err()
}
