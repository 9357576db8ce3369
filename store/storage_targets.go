package store

import (
	"context"
	"database/sql"
	"errors"
	"slices"

	"backstop/app"
)

var (
	_ app.StorageTargetStore    = (*DB)(nil)
	_ app.ApplianceKeyDownloads = (*DB)(nil)
)

const storageTargetColumns = `t.id, t.name, t.kind, t.is_default, t.path, t.endpoint, t.region, t.bucket, t.prefix,
	t.access_key_id, t.secret, t.path_style, t.tls, t.state, t.capacity_bytes, t.used_bytes, t.free_bytes, t.checked_at,
	t.last_error, t.created_at, t.updated_at`

// storedBytesColumn sums the blob store's packs on the target, of one
// tenant (?1 non-empty) or of all.
const storedBytesColumn = `(SELECT COALESCE(SUM(p.size), 0) FROM blob_packs p WHERE p.target_id = t.id AND (?1 = '' OR p.tenant_id = ?1))`

// CreateStorageTarget stores t with its placement; see app.StorageTargetStore.
// While no target is the default, t becomes it.
func (db *DB) CreateStorageTarget(ctx context.Context, t *app.StorageTarget) error {
	if t.ID == "" {
		t.ID = app.NewID(app.PrefixStorage)
	}
	now := app.At(db.Now())
	if t.CreatedAt.IsZero() {
		t.CreatedAt = now
	}
	t.UpdatedAt = t.CreatedAt
	if t.State == "" {
		t.State = app.StorageOK
	}
	slices.Sort(t.TenantIDs)
	t.TenantIDs = slices.Compact(t.TenantIDs)
	if t.TenantIDs == nil {
		t.TenantIDs = []string{}
	}
	return db.WriteTx(ctx, func(tx *sql.Tx) error {
		// The first target is the default whatever the caller said:
		// there is always exactly one once any target exists.
		var defaults int
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM storage_targets WHERE is_default = 1").Scan(&defaults); err != nil {
			return err
		}
		if defaults == 0 {
			t.Default = true
		}
		if t.Default {
			if _, err := tx.ExecContext(ctx, "UPDATE storage_targets SET is_default = 0 WHERE is_default = 1"); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO storage_targets (id, name, kind, is_default, path, endpoint, region, bucket,
			prefix, access_key_id, secret, path_style, tls, state, capacity_bytes, used_bytes, free_bytes, checked_at, last_error,
			created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
			t.ID, t.Name, t.Kind, t.Default, t.Path, t.Endpoint, t.Region, t.Bucket, t.Prefix, t.AccessKeyID, t.SealedSecret,
			boolOr(t.PathStyle, false), boolOr(t.TLS, true), t.State, t.CapacityBytes, t.UsedBytes, t.FreeBytes, msA(t.CheckedAt),
			t.LastError, t.CreatedAt.UnixMilli(), t.UpdatedAt.UnixMilli())
		if err != nil {
			return convertError(err)
		}
		return placeTenants(ctx, tx, t)
	})
}

// placeTenants makes t.TenantIDs exactly the tenants placed on t, moving
// each from any other target.
func placeTenants(ctx context.Context, tx *sql.Tx, t *app.StorageTarget) error {
	if _, err := tx.ExecContext(ctx, "DELETE FROM storage_placements WHERE target_id = ?", t.ID); err != nil {
		return err
	}
	for _, tenant := range t.TenantIDs {
		var n int
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM tenants WHERE id = ?", tenant).Scan(&n); err != nil {
			return err
		} else if n == 0 {
			return app.FieldError("tenantIds", "no such tenant %s", tenant)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO storage_placements (tenant_id, target_id) VALUES (?, ?)
			ON CONFLICT (tenant_id) DO UPDATE SET target_id = excluded.target_id`, tenant, t.ID); err != nil {
			return convertError(err)
		}
	}
	return nil
}

// StorageTarget returns the target with the id, or a not-found error.
func (db *DB) StorageTarget(ctx context.Context, id string) (*app.StorageTarget, error) {
	return storageTargetByID(ctx, db.read, id)
}

func storageTargetByID(ctx context.Context, q interface {
	querier
	queryRower
}, id string) (*app.StorageTarget, error) {
	t, err := scanStorageTarget(q.QueryRowContext(ctx, `SELECT `+storageTargetColumns+`, `+storedBytesColumn+`
		FROM storage_targets t WHERE t.id = ?2`, "", id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, app.NotFound("storage target")
	} else if err != nil {
		return nil, err
	}
	if err := loadPlacements(ctx, q, []*app.StorageTarget{t}, ""); err != nil {
		return nil, err
	}
	return t, nil
}

// StorageTargets lists targets in creation order; see app.StorageTargetFilter.
// A tenant's targets are the one its new data goes to and every target that
// still holds packs of it (data written before the tenant moved).
func (db *DB) StorageTargets(ctx context.Context, f app.StorageTargetFilter) ([]*app.StorageTarget, error) {
	q := `SELECT ` + storageTargetColumns + `, ` + storedBytesColumn + ` FROM storage_targets t WHERE t.id > ?2`
	if f.ForTenant != "" {
		q += ` AND (t.id = COALESCE((SELECT target_id FROM storage_placements WHERE tenant_id = ?1),
				(SELECT id FROM storage_targets WHERE is_default = 1))
			OR EXISTS (SELECT 1 FROM blob_packs p WHERE p.target_id = t.id AND p.tenant_id = ?1))`
	}
	q += " ORDER BY t.id"
	limit := f.Limit
	if limit <= 0 {
		limit = -1
	}
	ts, err := queryRows(ctx, db.read, scanStorageTarget, q+" LIMIT ?3", f.ForTenant, f.AfterID, limit)
	if err != nil {
		return nil, err
	}
	if err := loadPlacements(ctx, db.read, ts, f.ForTenant); err != nil {
		return nil, err
	}
	return ts, nil
}

// loadPlacements fills TenantIDs (never nil); with onlyTenant set, only that
// tenant is shown, so a tenant never learns other tenants' ids.
func loadPlacements(ctx context.Context, q querier, ts []*app.StorageTarget, onlyTenant string) error {
	byID := map[string]*app.StorageTarget{}
	for _, t := range ts {
		t.TenantIDs = []string{}
		byID[t.ID] = t
	}
	if len(ts) == 0 {
		return nil
	}
	type placement struct{ tenant, target string }
	rows, err := queryRows(ctx, q, func(s scanner) (placement, error) {
		var p placement
		return p, s.Scan(&p.tenant, &p.target)
	}, `SELECT tenant_id, target_id FROM storage_placements WHERE ?1 = '' OR tenant_id = ?1 ORDER BY tenant_id`, onlyTenant)
	if err != nil {
		return err
	}
	for _, p := range rows {
		if t := byID[p.target]; t != nil {
			t.TenantIDs = append(t.TenantIDs, p.tenant)
		}
	}
	return nil
}

// UpdateStorageTarget applies fn in one write transaction; see
// app.StorageTargetStore.
func (db *DB) UpdateStorageTarget(ctx context.Context, id string, fn func(t *app.StorageTarget) error) (*app.StorageTarget, error) {
	var t *app.StorageTarget
	err := db.WriteTx(ctx, func(tx *sql.Tx) error {
		var err error
		if t, err = storageTargetByID(ctx, tx, id); err != nil {
			return err
		}
		wasDefault, placed := t.Default, slices.Clone(t.TenantIDs)
		if err := fn(t); err != nil {
			return err
		}
		if wasDefault && !t.Default {
			return app.FieldError("default", "exactly one target is the default: make another target the default instead")
		}
		if t.Default && !wasDefault {
			if _, err := tx.ExecContext(ctx, "UPDATE storage_targets SET is_default = 0 WHERE is_default = 1"); err != nil {
				return err
			}
		}
		t.UpdatedAt = app.At(db.Now())
		_, err = tx.ExecContext(ctx, `UPDATE storage_targets SET name = ?, is_default = ?, access_key_id = ?, secret = ?,
			updated_at = ? WHERE id = ?`, t.Name, t.Default, t.AccessKeyID, t.SealedSecret, t.UpdatedAt.UnixMilli(), id)
		if err != nil {
			return convertError(err)
		}
		if t.TenantIDs == nil {
			t.TenantIDs = []string{}
		}
		slices.Sort(t.TenantIDs)
		t.TenantIDs = slices.Compact(t.TenantIDs)
		if !slices.Equal(placed, t.TenantIDs) {
			return placeTenants(ctx, tx, t)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// SaveStorageTargetState records the outcome of a check.
func (db *DB) SaveStorageTargetState(ctx context.Context, id string, s app.StorageTargetState) error {
	res, err := db.write.ExecContext(ctx, `UPDATE storage_targets SET state = ?, capacity_bytes = ?, used_bytes = ?,
		free_bytes = ?, checked_at = ?, last_error = ? WHERE id = ?`,
		s.State, s.CapacityBytes, s.UsedBytes, s.FreeBytes, ms(&s.CheckedAt), s.LastError, id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return app.NotFound("storage target")
	}
	return nil
}

// TenantStorageTarget returns the target the tenant's new data goes to.
func (db *DB) TenantStorageTarget(ctx context.Context, tenantID string) (string, error) {
	var id sql.NullString
	err := db.read.QueryRowContext(ctx, `SELECT COALESCE((SELECT target_id FROM storage_placements WHERE tenant_id = ?),
		(SELECT id FROM storage_targets WHERE is_default = 1))`, tenantID).Scan(&id)
	if err != nil {
		return "", err
	}
	if !id.Valid {
		return "", app.NotFound("storage target")
	}
	return id.String, nil
}

// RecordApplianceKeyDownload records the one download; see
// app.ApplianceKeyDownloads.
func (db *DB) RecordApplianceKeyDownload(ctx context.Context, d app.ApplianceKeyDownload) (*app.ApplianceKeyDownload, error) {
	var earlier *app.ApplianceKeyDownload
	err := db.WriteTx(ctx, func(tx *sql.Tx) error {
		var at int64
		var e app.ApplianceKeyDownload
		err := tx.QueryRowContext(ctx, "SELECT at, user_id, user_email FROM appliance_key_downloads WHERE id = 1").
			Scan(&at, &e.UserID, &e.UserEmail)
		if err == nil {
			e.At = msTime(at)
			earlier = &e
			return nil
		} else if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		_, err = tx.ExecContext(ctx, "INSERT INTO appliance_key_downloads (id, at, user_id, user_email) VALUES (1, ?, ?, ?)",
			d.At.UnixMilli(), d.UserID, d.UserEmail)
		return err
	})
	if err != nil {
		return nil, err
	}
	return earlier, nil
}

func scanStorageTarget(s scanner) (*app.StorageTarget, error) {
	var t app.StorageTarget
	var pathStyle, tls bool
	var checked sql.NullInt64
	var capacity, used, free sql.NullInt64
	var lastError sql.NullString
	var created, updated int64
	if err := s.Scan(&t.ID, &t.Name, &t.Kind, &t.Default, &t.Path, &t.Endpoint, &t.Region, &t.Bucket, &t.Prefix,
		&t.AccessKeyID, &t.SealedSecret, &pathStyle, &tls, &t.State, &capacity, &used, &free, &checked, &lastError,
		&created, &updated, &t.StoredBytes); err != nil {
		return nil, err
	}
	if t.Kind == app.StorageKindS3 {
		t.PathStyle, t.TLS = &pathStyle, &tls
	}
	t.CapacityBytes, t.UsedBytes, t.FreeBytes = nullInt(capacity), nullInt(used), nullInt(free)
	t.CheckedAt = fromMsA(checked)
	if lastError.Valid {
		t.LastError = &lastError.String
	}
	t.CreatedAt, t.UpdatedAt = app.At(msTime(created)), app.At(msTime(updated))
	return &t, nil
}

func nullInt(v sql.NullInt64) *int64 {
	if !v.Valid {
		return nil
	}
	return &v.Int64
}

func boolOr(b *bool, def bool) bool {
	if b == nil {
		return def
	}
	return *b
}
