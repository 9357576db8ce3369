package store

import (
	"context"
	"database/sql"

	"backstop/app"
	"backstop/app/archive"
)

// The archive capture pollers' SQL: the polling channels and their cursors
// (archive_channels.cursor, JSON the pollers own) and states.

var _ archive.CaptureStore = (*DB)(nil)

// ArchivePollingChannels implements archive.CaptureStore.
func (db *DB) ArchivePollingChannels(ctx context.Context) ([]*archive.Channel, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT id, tenant_id, kind, display_name, coalesce(source_id,''), state, last_error,
		last_message_at, messages_total, cursor, created_at
		FROM archive_channels WHERE kind IN (?, ?) AND deleted_at IS NULL ORDER BY id`, archive.KindIMAP, archive.KindM365)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*archive.Channel
	for rows.Next() {
		var c archive.Channel
		var last sql.NullInt64
		var created int64
		if err := rows.Scan(&c.ID, &c.TenantID, &c.Kind, &c.DisplayName, &c.SourceID, &c.State, &c.LastError,
			&last, &c.MessagesTotal, &c.Cursor, &created); err != nil {
			return nil, err
		}
		c.LastMessageAt = fromMs(last)
		c.CreatedAt = msTime(created)
		out = append(out, &c)
	}
	return out, rows.Err()
}

// SetArchiveChannelCursor implements archive.CaptureStore.
func (db *DB) SetArchiveChannelCursor(ctx context.Context, channelID, cursor string) error {
	return db.updateChannel(ctx, `UPDATE archive_channels SET cursor = ? WHERE id = ?`, cursor, channelID)
}

// SetArchiveChannelState implements archive.CaptureStore.
func (db *DB) SetArchiveChannelState(ctx context.Context, channelID, state, lastError string) error {
	return db.updateChannel(ctx, `UPDATE archive_channels SET state = ?, last_error = ? WHERE id = ?`, state, lastError, channelID)
}

func (db *DB) updateChannel(ctx context.Context, query string, args ...any) error {
	return db.WriteTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, query, args...)
		if err != nil {
			return convertError(err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return app.NotFound("channel")
		}
		return nil
	})
}
