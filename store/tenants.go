package store

import (
	"context"
	"database/sql"
	"errors"

	"backstop/app"
)

var _ app.TenantService = (*DB)(nil)

// CreateTenant stores t, assigning an id and creation time when unset.
func (db *DB) CreateTenant(ctx context.Context, t *app.Tenant) error {
	if err := app.ValidateTenantName(t.Name); err != nil {
		return err
	}
	if t.ID == "" {
		t.ID = app.NewID(app.PrefixTenant)
	}
	if t.CreatedAt.IsZero() {
		t.CreatedAt = app.At(db.Now())
	}
	_, err := db.write.ExecContext(ctx, "INSERT INTO tenants (id, name, created_at) VALUES (?, ?, ?)",
		t.ID, t.Name, t.CreatedAt.UnixMilli())
	return convertError(err)
}

// Tenant returns the tenant with the id, or a not-found error.
func (db *DB) Tenant(ctx context.Context, id string) (*app.Tenant, error) {
	t, err := scanTenant(db.read.QueryRowContext(ctx, "SELECT id, name, created_at FROM tenants WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, app.NotFound("tenant")
	}
	return t, err
}

// Tenants lists tenants in creation order.
func (db *DB) Tenants(ctx context.Context, f app.TenantFilter) ([]*app.Tenant, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	return queryRows(ctx, db.read, scanTenant, "SELECT id, name, created_at FROM tenants WHERE id > ? ORDER BY id LIMIT ?",
		f.AfterID, limit)
}

func scanTenant(s scanner) (*app.Tenant, error) {
	var t app.Tenant
	var at int64
	if err := s.Scan(&t.ID, &t.Name, &at); err != nil {
		return nil, err
	}
	t.CreatedAt = app.At(msTime(at))
	return &t, nil
}
