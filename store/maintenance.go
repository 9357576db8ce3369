package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"

	"backstop/app"
)

var _ app.MaintenanceService = (*DB)(nil)

// maintenanceRecord is the stored form of app.Maintenance: one JSON row of
// the settings table under the key 'maintenance'.
type maintenanceRecord struct {
	Phase         string  `json:"phase"`
	TargetVersion string  `json:"targetVersion"`
	StartsAt      *int64  `json:"startsAt,omitempty"`
	Error         *string `json:"error,omitempty"`
	FromVersion   string  `json:"fromVersion"`
}

// Maintenance returns the maintenance record or a not-found error.
func (db *DB) Maintenance(ctx context.Context) (*app.Maintenance, error) {
	m, err := readMaintenance(db.read.QueryRowContext(ctx, "SELECT value FROM settings WHERE key = 'maintenance'"))
	if err == nil && m == nil {
		return nil, app.NotFound("maintenance")
	}
	return m, err
}

func readMaintenance(row *sql.Row) (*app.Maintenance, error) {
	var raw string
	if err := row.Scan(&raw); errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var rec maintenanceRecord
	if err := json.Unmarshal([]byte(raw), &rec); err != nil {
		return nil, err
	}
	m := &app.Maintenance{Phase: rec.Phase, TargetVersion: rec.TargetVersion, Error: rec.Error, FromVersion: rec.FromVersion}
	if rec.StartsAt != nil {
		t := msTime(*rec.StartsAt)
		m.StartsAt = app.AtPtr(&t)
	}
	return m, nil
}

// UpdateMaintenance applies fn to the record in one write transaction.
func (db *DB) UpdateMaintenance(ctx context.Context, fn func(m *app.Maintenance) (*app.Maintenance, error)) (*app.Maintenance, error) {
	var out *app.Maintenance
	err := db.WriteTx(ctx, func(tx *sql.Tx) error {
		cur, err := readMaintenance(tx.QueryRowContext(ctx, "SELECT value FROM settings WHERE key = 'maintenance'"))
		if err != nil {
			return err
		}
		next, err := fn(cur)
		if err != nil {
			return err
		}
		out = next
		if next == nil {
			_, err = tx.ExecContext(ctx, "DELETE FROM settings WHERE key = 'maintenance'")
			return err
		}
		rec := maintenanceRecord{Phase: next.Phase, TargetVersion: next.TargetVersion, Error: next.Error, FromVersion: next.FromVersion}
		if next.StartsAt != nil {
			rec.StartsAt = app.Ptr(next.StartsAt.UnixMilli())
		}
		raw, _ := json.Marshal(rec)
		_, err = tx.ExecContext(ctx, `INSERT INTO settings (key, value) VALUES ('maintenance', ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`, string(raw))
		return err
	})
	return out, err
}
