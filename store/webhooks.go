package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"

	"backstop/app"
)

var _ app.WebhookStore = (*DB)(nil)

const webhookColumns = `id, tenant_id, url, events, description, enabled, secret, previous_secret, previous_until, created_at, updated_at`

// CreateWebhook stores w. The caller sets the id and the sealed secret.
func (db *DB) CreateWebhook(ctx context.Context, w *app.Webhook) error {
	now := app.At(db.Now())
	if w.CreatedAt.IsZero() {
		w.CreatedAt = now
	}
	w.UpdatedAt = w.CreatedAt
	events, _ := json.Marshal(w.Events)
	_, err := db.write.ExecContext(ctx, `INSERT INTO webhooks (`+webhookColumns+`) VALUES (?,?,?,?,?,?,?,?,?,?,?)`,
		w.ID, w.TenantID, w.URL, string(events), w.Description, w.Enabled, w.SealedSecret, w.SealedPrevious,
		ms(w.PreviousUntil), w.CreatedAt.UnixMilli(), w.UpdatedAt.UnixMilli())
	return convertError(err)
}

// Webhook returns the webhook with the id, or a not-found error.
func (db *DB) Webhook(ctx context.Context, id string) (*app.Webhook, error) {
	return webhookByID(ctx, db.read, id)
}

type queryRower interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func webhookByID(ctx context.Context, q queryRower, id string) (*app.Webhook, error) {
	w, err := scanWebhook(q.QueryRowContext(ctx, `SELECT `+webhookColumns+` FROM webhooks WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, app.NotFound("webhook")
	}
	return w, err
}

// Webhooks lists webhooks oldest first, after the cursor.
func (db *DB) Webhooks(ctx context.Context, f app.WebhookFilter) ([]*app.Webhook, error) {
	q, args := `SELECT `+webhookColumns+` FROM webhooks WHERE id > ?`, []any{f.AfterID}
	if f.TenantID != "" {
		q, args = q+" AND tenant_id = ?", append(args, f.TenantID)
	}
	if f.Limit <= 0 {
		f.Limit = 100
	}
	return queryRows(ctx, db.read, scanWebhook, q+" ORDER BY id LIMIT ?", append(args, f.Limit)...)
}

// UpdateWebhook reads the webhook, applies fn and writes it back in one
// write transaction, so concurrent changes (a rotation and a PATCH) never
// lose each other. fn's error aborts the change and is returned.
func (db *DB) UpdateWebhook(ctx context.Context, id string, fn func(w *app.Webhook) error) (*app.Webhook, error) {
	var w *app.Webhook
	err := db.WriteTx(ctx, func(tx *sql.Tx) error {
		var err error
		if w, err = webhookByID(ctx, tx, id); err != nil {
			return err
		}
		if err := fn(w); err != nil {
			return err
		}
		w.UpdatedAt = app.At(db.Now())
		events, _ := json.Marshal(w.Events)
		_, err = tx.ExecContext(ctx, `UPDATE webhooks SET url = ?, events = ?, description = ?, enabled = ?, secret = ?,
			previous_secret = ?, previous_until = ?, updated_at = ? WHERE id = ?`,
			w.URL, string(events), w.Description, w.Enabled, w.SealedSecret, w.SealedPrevious, ms(w.PreviousUntil),
			w.UpdatedAt.UnixMilli(), id)
		return convertError(err)
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

// DeleteWebhook removes the webhook; its deliveries and attempts go with it
// (ON DELETE CASCADE), so a pending delivery is never attempted afterwards.
func (db *DB) DeleteWebhook(ctx context.Context, id string) error {
	res, err := db.write.ExecContext(ctx, "DELETE FROM webhooks WHERE id = ?", id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return app.NotFound("webhook")
	}
	return nil
}

func scanWebhook(s scanner) (*app.Webhook, error) {
	var w app.Webhook
	var events string
	var until sql.NullInt64
	var created, updated int64
	if err := s.Scan(&w.ID, &w.TenantID, &w.URL, &events, &w.Description, &w.Enabled, &w.SealedSecret,
		&w.SealedPrevious, &until, &created, &updated); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(events), &w.Events); err != nil {
		return nil, err
	}
	w.PreviousUntil = fromMs(until)
	w.CreatedAt, w.UpdatedAt = app.At(msTime(created)), app.At(msTime(updated))
	return &w, nil
}
