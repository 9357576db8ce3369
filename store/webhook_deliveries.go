package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"backstop/app"
)

// The webhook delivery queue lives in SQLite so that a restart (even kill
// -9) loses no pending delivery: fan-out marks events dispatched in the
// transaction that creates their deliveries, and an attempt's outcome is
// committed before its delivery can be claimed again.

const insertDeliverySQL = `INSERT INTO webhook_deliveries (id, webhook_id, tenant_id, event_id, event_type, state, created_at, next_attempt_at)
	VALUES (?,?,?,?,?,?,?,?)`

const deliveryColumns = `id, webhook_id, tenant_id, event_id, event_type, state, created_at, finished_at, next_attempt_at`

// FanOut creates the deliveries of each event and marks it dispatched.
func (db *DB) FanOut(ctx context.Context, events []*app.StoredEvent) (int, error) {
	created := 0
	err := db.WriteTx(ctx, func(tx *sql.Tx) error {
		created = 0
		now := db.Now().UnixMilli()
		insert, err := tx.PrepareContext(ctx, insertDeliverySQL)
		if err != nil {
			return err
		}
		defer insert.Close()
		subscribers := map[string][]*app.Webhook{} // tenant -> enabled webhooks
		for _, e := range events {
			res, err := tx.ExecContext(ctx, "UPDATE events SET dispatched_at = ? WHERE id = ? AND dispatched_at IS NULL", now, e.ID)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				continue // already fanned out
			}
			hooks, ok := subscribers[e.TenantID]
			if !ok {
				if hooks, err = enabledWebhooks(ctx, tx, e.TenantID); err != nil {
					return err
				}
				subscribers[e.TenantID] = hooks
			}
			for _, w := range hooks {
				if !w.Subscribes(e.Type) {
					continue
				}
				if _, err := insert.ExecContext(ctx, app.NewID(app.PrefixDelivery), w.ID, w.TenantID, e.ID, e.Type, app.DeliveryPending, now, now); err != nil {
					return convertError(err)
				}
				created++
			}
		}
		return nil
	})
	return created, err
}

func enabledWebhooks(ctx context.Context, tx *sql.Tx, tenantID string) ([]*app.Webhook, error) {
	return queryRows(ctx, tx, scanWebhook, `SELECT `+webhookColumns+` FROM webhooks WHERE tenant_id = ? AND enabled = 1`, tenantID)
}

// EnqueueTestEvent stores the test event, already dispatched, with one
// delivery to the webhook.
func (db *DB) EnqueueTestEvent(ctx context.Context, webhookID string, e *app.Event) (*app.Delivery, error) {
	var id string
	err := db.WriteTx(ctx, func(tx *sql.Tx) error {
		w, err := webhookByID(ctx, tx, webhookID)
		if err != nil {
			return err
		}
		if err := db.insertEvent(ctx, tx, e); err != nil {
			return err
		}
		now := db.Now().UnixMilli()
		if _, err := tx.ExecContext(ctx, "UPDATE events SET dispatched_at = ? WHERE id = ?", now, e.ID); err != nil {
			return err
		}
		id, err = newDelivery(ctx, tx, w, e.ID, e.Type, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	return db.Delivery(ctx, id)
}

func newDelivery(ctx context.Context, tx *sql.Tx, w *app.Webhook, eventID, eventType string, now int64) (string, error) {
	id := app.NewID(app.PrefixDelivery)
	_, err := tx.ExecContext(ctx, insertDeliverySQL, id, w.ID, w.TenantID, eventID, eventType, app.DeliveryPending, now, now)
	return id, convertError(err)
}

// ReplayDelivery queues the delivery's event again to the same webhook as a
// new delivery, due now.
func (db *DB) ReplayDelivery(ctx context.Context, webhookID, deliveryID string) (*app.Delivery, error) {
	var id string
	err := db.WriteTx(ctx, func(tx *sql.Tx) error {
		w, err := webhookByID(ctx, tx, webhookID)
		if err != nil {
			return err
		}
		var eventID, eventType string
		err = tx.QueryRowContext(ctx, "SELECT event_id, event_type FROM webhook_deliveries WHERE id = ? AND webhook_id = ?",
			deliveryID, webhookID).Scan(&eventID, &eventType)
		if errors.Is(err, sql.ErrNoRows) {
			return app.NotFound("delivery")
		} else if err != nil {
			return err
		}
		id, err = newDelivery(ctx, tx, w, eventID, eventType, db.Now().UnixMilli())
		return err
	})
	if err != nil {
		return nil, err
	}
	return db.Delivery(ctx, id)
}

// readSnapshot runs fn in one read transaction, so that a delivery and its
// attempts are read from the same commit (the writer may record an attempt
// between two separate queries).
func (db *DB) readSnapshot(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := db.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	return fn(tx)
}

// Delivery returns one delivery with its attempts.
func (db *DB) Delivery(ctx context.Context, id string) (*app.Delivery, error) {
	var d *app.Delivery
	err := db.readSnapshot(ctx, func(tx *sql.Tx) error {
		var err error
		d, err = scanDelivery(tx.QueryRowContext(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries WHERE id = ?`, id))
		if errors.Is(err, sql.ErrNoRows) {
			return app.NotFound("delivery")
		} else if err != nil {
			return err
		}
		return attachAttempts(ctx, tx, []*app.Delivery{d})
	})
	if err != nil {
		return nil, err
	}
	return d, nil
}

// Deliveries lists a webhook's deliveries newest first, with their attempts.
func (db *DB) Deliveries(ctx context.Context, f app.DeliveryFilter) ([]*app.Delivery, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	q, args := `SELECT `+deliveryColumns+` FROM webhook_deliveries WHERE webhook_id = ?`, []any{f.WebhookID}
	if f.BeforeID != "" {
		q, args = q+" AND id < ?", append(args, f.BeforeID)
	}
	var out []*app.Delivery
	err := db.readSnapshot(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, q+" ORDER BY id DESC LIMIT ?", append(args, f.Limit)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			d, err := scanDelivery(rows)
			if err != nil {
				return err
			}
			out = append(out, d)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows.Close()
		return attachAttempts(ctx, tx, out)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func attachAttempts(ctx context.Context, tx *sql.Tx, ds []*app.Delivery) error {
	if len(ds) == 0 {
		return nil
	}
	byID := make(map[string]*app.Delivery, len(ds))
	ids := make([]string, len(ds))
	for i, d := range ds {
		byID[d.ID], ids[i] = d, d.ID
		d.Attempts = []*app.DeliveryAttempt{}
	}
	list, _ := json.Marshal(ids)
	rows, err := tx.QueryContext(ctx, `SELECT delivery_id, number, at, status_code, duration_ms, error, response_excerpt
		FROM webhook_attempts WHERE delivery_id IN (SELECT value FROM json_each(?)) ORDER BY delivery_id, number`, string(list))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var a app.DeliveryAttempt
		var at int64
		var status sql.NullInt64
		if err := rows.Scan(&id, &a.Number, &at, &status, &a.DurationMs, &a.Error, &a.ResponseExcerpt); err != nil {
			return err
		}
		a.At = app.At(msTime(at))
		if status.Valid {
			a.StatusCode = app.Ptr(int(status.Int64))
		}
		byID[id].Attempts = append(byID[id].Attempts, &a)
	}
	return rows.Err()
}

func scanDelivery(s scanner) (*app.Delivery, error) {
	var d app.Delivery
	var created int64
	var finished, next sql.NullInt64
	if err := s.Scan(&d.ID, &d.WebhookID, &d.TenantID, &d.EventID, &d.Event, &d.State, &created, &finished, &next); err != nil {
		return nil, err
	}
	d.CreatedAt, d.FinishedAt, d.NextAttemptAt = app.At(msTime(created)), fromMsA(finished), fromMsA(next)
	return &d, nil
}

// DueDeliveries returns pending deliveries of enabled webhooks due at now.
func (db *DB) DueDeliveries(ctx context.Context, now time.Time, skipDeliveries, skipWebhooks []string, limit int) ([]*app.DueDelivery, error) {
	skipD, _ := json.Marshal(nonNil(skipDeliveries))
	skipW, _ := json.Marshal(nonNil(skipWebhooks))
	rows, err := db.read.QueryContext(ctx, `SELECT d.id, d.webhook_id, w.url, d.event_id, d.event_type, e.body, d.attempts,
			w.secret, w.previous_secret, w.previous_until
		FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id JOIN events e ON e.id = d.event_id
		WHERE d.state = 'pending' AND d.next_attempt_at <= ? AND w.enabled = 1
		  AND d.id NOT IN (SELECT value FROM json_each(?))
		  AND d.webhook_id NOT IN (SELECT value FROM json_each(?))
		ORDER BY d.next_attempt_at, d.id LIMIT ?`, now.UnixMilli(), string(skipD), string(skipW), limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*app.DueDelivery
	for rows.Next() {
		var d app.DueDelivery
		var body string
		var until sql.NullInt64
		if err := rows.Scan(&d.ID, &d.WebhookID, &d.URL, &d.EventID, &d.EventType, &body, &d.Attempt,
			&d.SealedSecret, &d.SealedPrevious, &until); err != nil {
			return nil, err
		}
		d.Attempt++
		d.Body, d.PreviousUntil = []byte(body), fromMs(until)
		out = append(out, &d)
	}
	return out, rows.Err()
}

// NextDueAt returns the earliest next attempt of a pending delivery. It
// reads the partial index alone; deliveries of disabled webhooks count too,
// which at worst wakes the dispatcher early.
func (db *DB) NextDueAt(ctx context.Context) (*time.Time, error) {
	var next sql.NullInt64
	err := db.read.QueryRowContext(ctx, `SELECT min(next_attempt_at) FROM webhook_deliveries WHERE state = 'pending'`).Scan(&next)
	return fromMs(next), err
}

// RecordAttempts logs each attempt and moves its delivery on. The delivery
// row is updated first: when it is gone (webhook deleted meanwhile) or no
// longer pending, the outcome is dropped instead of failing the batch.
func (db *DB) RecordAttempts(ctx context.Context, outcomes []*app.AttemptOutcome) error {
	return db.WriteTx(ctx, func(tx *sql.Tx) error {
		// Prepared once per batch: parsing dominates these small statements.
		update, err := tx.PrepareContext(ctx, `UPDATE webhook_deliveries SET attempts = ?, state = ?, finished_at = ?, next_attempt_at = ?
			WHERE id = ? AND state = 'pending'`)
		if err != nil {
			return err
		}
		defer update.Close()
		insert, err := tx.PrepareContext(ctx, `INSERT INTO webhook_attempts (delivery_id, number, at, status_code, duration_ms, error, response_excerpt)
			VALUES (?,?,?,?,?,?,?)`)
		if err != nil {
			return err
		}
		defer insert.Close()
		for _, o := range outcomes {
			res, err := update.ExecContext(ctx, o.Attempt.Number, o.State, ms(o.FinishedAt), ms(o.NextAttemptAt), o.DeliveryID)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				continue
			}
			var status any
			if o.Attempt.StatusCode != nil {
				status = *o.Attempt.StatusCode
			}
			_, err = insert.ExecContext(ctx, o.DeliveryID, o.Attempt.Number, o.Attempt.At.UnixMilli(), status, o.Attempt.DurationMs,
				o.Attempt.Error, o.Attempt.ResponseExcerpt)
			if err != nil {
				return convertError(err)
			}
		}
		return nil
	})
}

// PurgeDeliveries deletes deliveries finished before the time (attempts
// cascade) and then the dispatched events left without any delivery that
// were raised more than app.EventRetention ago: the event feed serves them
// that long, however soon their deliveries end.
func (db *DB) PurgeDeliveries(ctx context.Context, finishedBefore time.Time) (int, error) {
	var n int64
	err := db.WriteTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "DELETE FROM webhook_deliveries WHERE finished_at < ?", finishedBefore.UnixMilli())
		if err != nil {
			return err
		}
		n, _ = res.RowsAffected()
		_, err = tx.ExecContext(ctx, `DELETE FROM events WHERE dispatched_at IS NOT NULL AND created_at < ?
			AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = events.id)`,
			db.Now().Add(-app.EventRetention).UnixMilli())
		return err
	})
	return int(n), err
}
