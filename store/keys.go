package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"backstop/app"
)

var _ app.KeyService = (*DB)(nil)

const keyColumns = `id, tenant_id, name, provider, scopes, fingerprint, created_at, created_by, expires_at, revoked_at, last_used_at`

// CreateKey stores k. The caller sets the id and fingerprint.
func (db *DB) CreateKey(ctx context.Context, k *app.APIKey) error {
	scopes, _ := json.Marshal(k.Scopes)
	if k.CreatedAt.IsZero() {
		k.CreatedAt = app.At(db.Now())
	}
	var tenant any
	if k.TenantID != "" {
		tenant = k.TenantID
	}
	_, err := db.write.ExecContext(ctx, `INSERT INTO api_keys (`+keyColumns+`) VALUES (?,?,?,?,?,?,?,?,?,?,?)`,
		k.ID, tenant, k.Name, k.Provider, string(scopes), k.Fingerprint, k.CreatedAt.UnixMilli(), k.CreatedBy,
		msA(k.ExpiresAt), msA(k.RevokedAt), msA(k.LastUsedAt))
	return convertError(err)
}

// Key returns the key with the id, or a not-found error.
func (db *DB) Key(ctx context.Context, id string) (*app.APIKey, error) {
	if k, ok, err := db.cachedKey(ctx, id); ok {
		return k, err
	}
	k, err := scanKey(db.queryRowCached(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, app.NotFound("API key")
	}
	return k, err
}

// Keys lists keys, newest first.
func (db *DB) Keys(ctx context.Context, f app.KeyFilter) ([]*app.APIKey, error) {
	q, args := `SELECT `+keyColumns+` FROM api_keys WHERE 1=1`, []any{}
	if f.TenantID != nil {
		if *f.TenantID == "" {
			q += " AND tenant_id IS NULL"
		} else {
			q, args = q+" AND tenant_id = ?", append(args, *f.TenantID)
		}
	}
	if f.BeforeID != "" {
		q, args = q+" AND id < ?", append(args, f.BeforeID)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	return queryRows(ctx, db.read, scanKey, q+" ORDER BY id DESC LIMIT ?", append(args, limit)...)
}

// RevokeKey revokes the key; a second revocation keeps the first time.
func (db *DB) RevokeKey(ctx context.Context, id string, at time.Time) error {
	res, err := db.write.ExecContext(ctx, "UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?", at.UnixMilli(), id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return app.NotFound("API key")
	}
	return nil
}

// keyTouchEvery coalesces lastUsedAt writes: a key used continuously costs
// one write a minute, not one per request.
const keyTouchEvery = time.Minute

// TouchKey records a use of the key.
func (db *DB) TouchKey(ctx context.Context, id string, at time.Time) error {
	db.touchMu.Lock()
	last, ok := db.touched[id]
	if ok && at.Sub(last) < keyTouchEvery {
		db.touchMu.Unlock()
		return nil
	}
	db.touched[id] = at
	db.touchMu.Unlock()
	_, err := db.write.ExecContext(ctx, "UPDATE api_keys SET last_used_at = ? WHERE id = ?", at.UnixMilli(), id)
	return err
}

type scanner interface{ Scan(dest ...any) error }

func scanKey(s scanner) (*app.APIKey, error) {
	var k app.APIKey
	var tenant sql.NullString
	var scopes string
	var created int64
	var expires, revoked, used sql.NullInt64
	if err := s.Scan(&k.ID, &tenant, &k.Name, &k.Provider, &scopes, &k.Fingerprint, &created, &k.CreatedBy,
		&expires, &revoked, &used); err != nil {
		return nil, err
	}
	k.TenantID = tenant.String
	if err := json.Unmarshal([]byte(scopes), &k.Scopes); err != nil {
		return nil, err
	}
	k.CreatedAt, k.ExpiresAt, k.RevokedAt, k.LastUsedAt = app.At(msTime(created)), fromMsA(expires), fromMsA(revoked), fromMsA(used)
	return &k, nil
}
