package store

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"backstop/app"
)

var _ app.EnrollmentService = (*DB)(nil)

// CreateEnrollmentToken stores t.
func (db *DB) CreateEnrollmentToken(ctx context.Context, t *app.EnrollmentToken) error {
	var endpoint any
	if t.EndpointID != "" {
		endpoint = t.EndpointID
	}
	_, err := db.write.ExecContext(ctx, `INSERT INTO enrollment_tokens (id, tenant_id, profile, token_hash, endpoint_id,
		created_at, expires_at) VALUES (?,?,?,?,?,?,?)`, t.ID, t.TenantID, t.Profile, t.TokenHash, endpoint,
		t.CreatedAt.UnixMilli(), t.ExpiresAt.UnixMilli())
	return convertError(err)
}

// ConsumeEnrollmentToken marks a usable token used and returns it.
func (db *DB) ConsumeEnrollmentToken(ctx context.Context, tokenHash string, now time.Time) (*app.EnrollmentToken, error) {
	var t app.EnrollmentToken
	err := db.WriteTx(ctx, func(tx *sql.Tx) error {
		var endpoint sql.NullString
		var created, expires int64
		var used sql.NullInt64
		err := tx.QueryRowContext(ctx, `SELECT id, tenant_id, profile, token_hash, endpoint_id, created_at, expires_at, used_at
			FROM enrollment_tokens WHERE token_hash = ?`, tokenHash).Scan(&t.ID, &t.TenantID, &t.Profile, &t.TokenHash,
			&endpoint, &created, &expires, &used)
		if errors.Is(err, sql.ErrNoRows) {
			return app.Errorf(app.EUNAUTHORIZED, "enrollment token is not valid")
		} else if err != nil {
			return err
		}
		t.EndpointID, t.CreatedAt, t.ExpiresAt = endpoint.String, msTime(created), msTime(expires)
		if used.Valid {
			return app.Errorf(app.EUNAUTHORIZED, "enrollment token was already used")
		}
		if !now.Before(t.ExpiresAt) {
			return app.Errorf(app.EUNAUTHORIZED, "enrollment token has expired")
		}
		t.UsedAt = &now
		_, err = tx.ExecContext(ctx, "UPDATE enrollment_tokens SET used_at = ? WHERE id = ?", now.UnixMilli(), t.ID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &t, nil
}
