package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"

	"backstop/app"
)

var _ app.EventService = (*DB)(nil)

// insertEvent adds e to the outbox inside tx, assigning id and time when
// unset, and applies a job end's event to the open incidents (incidents.go).
// Callers that change state and raise an event do both in one tx. Ids are
// assigned here, inside the single writer's transaction, so id order is the
// order events were committed in: the feed pages by id without skipping one.
func (db *DB) insertEvent(ctx context.Context, tx *sql.Tx, e *app.Event) error {
	if e.ID == "" {
		e.ID = app.NewID(app.PrefixEvent)
	}
	if e.CreatedAt.IsZero() {
		e.CreatedAt = app.At(db.Now())
	}
	if err := db.attachIncident(ctx, tx, e); err != nil {
		return err
	}
	body, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if _, err = tx.ExecContext(ctx, "INSERT INTO events (id, type, tenant_id, created_at, body) VALUES (?,?,?,?,?)",
		e.ID, e.Type, e.TenantID, e.CreatedAt.UnixMilli(), string(body)); err != nil {
		return convertError(err)
	}
	db.txEvents.Store(tx, struct{}{}) // WriteTx calls OnEventsCommitted's hook after the commit
	return nil
}

// PublishEvent stores an event on its own.
func (db *DB) PublishEvent(ctx context.Context, e *app.Event) error {
	return db.WriteTx(ctx, func(tx *sql.Tx) error { return db.insertEvent(ctx, tx, e) })
}

// UndispatchedEvents returns events not yet fanned out, oldest first.
func (db *DB) UndispatchedEvents(ctx context.Context, limit int) ([]*app.StoredEvent, error) {
	return queryRows(ctx, db.read, scanStoredEvent,
		"SELECT id, type, tenant_id, body FROM events WHERE dispatched_at IS NULL ORDER BY id LIMIT ?", limit)
}

func scanStoredEvent(s scanner) (*app.StoredEvent, error) {
	var e app.StoredEvent
	var body string
	err := s.Scan(&e.ID, &e.Type, &e.TenantID, &body)
	e.Body = []byte(body)
	return &e, err
}

// EventFeed implements app.EventService.
func (db *DB) EventFeed(ctx context.Context, f app.EventFilter) ([]*app.StoredEvent, error) {
	if f.After != "" {
		var one int
		err := db.read.QueryRowContext(ctx, `SELECT 1 FROM events WHERE id = ?1 AND (?2 = '' OR tenant_id = ?2)`,
			f.After, f.TenantID).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, app.NotFound("event")
		} else if err != nil {
			return nil, err
		}
	}
	return queryRows(ctx, db.read, scanStoredEvent, `SELECT id, type, tenant_id, body FROM events
		WHERE id > ?1 AND (?2 = '' OR tenant_id = ?2) AND type != ?3 ORDER BY id LIMIT ?4`,
		f.After, f.TenantID, app.EventWebhookTest, f.Limit)
}
