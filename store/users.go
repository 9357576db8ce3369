package store

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"backstop/app"
)

var _ app.UserService = (*DB)(nil)

// CreateUser stores u; a second user with the same e-mail is a conflict.
func (db *DB) CreateUser(ctx context.Context, u *app.User) error {
	if u.ID == "" {
		u.ID = app.NewID(app.PrefixUser)
	}
	if u.CreatedAt.IsZero() {
		u.CreatedAt = app.At(db.Now())
	}
	var tenant any
	if u.TenantID != "" {
		tenant = u.TenantID
	}
	_, err := db.write.ExecContext(ctx, "INSERT INTO users (id, email, tenant_id, password_hash, created_at) VALUES (?,?,?,?,?)",
		u.ID, u.Email, tenant, u.PasswordHash, u.CreatedAt.UnixMilli())
	return convertError(err)
}

// User returns the user with the id.
func (db *DB) User(ctx context.Context, id string) (*app.User, error) {
	return db.userWhere(ctx, "id = ?", id)
}

// UserByEmail returns the user with the (normalized) e-mail.
func (db *DB) UserByEmail(ctx context.Context, email string) (*app.User, error) {
	return db.userWhere(ctx, "email = ?", email)
}

func (db *DB) userWhere(ctx context.Context, where string, arg any) (*app.User, error) {
	var u app.User
	var tenant sql.NullString
	var created int64
	err := db.read.QueryRowContext(ctx, "SELECT id, email, tenant_id, password_hash, created_at FROM users WHERE "+where, arg).
		Scan(&u.ID, &u.Email, &tenant, &u.PasswordHash, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, app.NotFound("user")
	} else if err != nil {
		return nil, err
	}
	u.TenantID, u.CreatedAt = tenant.String, app.At(msTime(created))
	return &u, nil
}

// CountUsers counts administrators.
func (db *DB) CountUsers(ctx context.Context) (int, error) {
	var n int
	err := db.read.QueryRowContext(ctx, "SELECT count(*) FROM users").Scan(&n)
	return n, err
}

// CreateSession stores s.
func (db *DB) CreateSession(ctx context.Context, s *app.Session) error {
	_, err := db.write.ExecContext(ctx, "INSERT INTO sessions (id_hash, user_id, csrf_token, created_at, expires_at) VALUES (?,?,?,?,?)",
		s.IDHash, s.UserID, s.CSRFToken, s.CreatedAt.UnixMilli(), s.ExpiresAt.UnixMilli())
	return convertError(err)
}

// SessionByIDHash returns a session, expired or not.
func (db *DB) SessionByIDHash(ctx context.Context, idHash string) (*app.Session, error) {
	var s app.Session
	var created, expires int64
	err := db.read.QueryRowContext(ctx, "SELECT id_hash, user_id, csrf_token, created_at, expires_at FROM sessions WHERE id_hash = ?", idHash).
		Scan(&s.IDHash, &s.UserID, &s.CSRFToken, &created, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, app.NotFound("session")
	} else if err != nil {
		return nil, err
	}
	s.CreatedAt, s.ExpiresAt = msTime(created), msTime(expires)
	return &s, nil
}

// DeleteSession ends a session; ending an absent one is not an error.
func (db *DB) DeleteSession(ctx context.Context, idHash string) error {
	_, err := db.write.ExecContext(ctx, "DELETE FROM sessions WHERE id_hash = ?", idHash)
	return err
}

// DeleteExpiredSessions removes sessions that expired before now.
func (db *DB) DeleteExpiredSessions(ctx context.Context, now time.Time) error {
	_, err := db.write.ExecContext(ctx, "DELETE FROM sessions WHERE expires_at < ?", now.UnixMilli())
	return err
}
