package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"backstop/app"
	"backstop/app/archive"
)

// The archive intake's tables (migration 0015): channels, intake counts,
// messages, captures, the search index, checkpoints and the chain state.

var _ archive.IntakeStore = (*DB)(nil)

const channelCols = `c.id, c.tenant_id, c.kind, c.display_name, coalesce(c.address,''), coalesce(c.source_id,''), c.state, c.last_error,
	c.last_message_at, c.messages_total, c.cursor, c.created_at,
	coalesce((SELECT sum(accepted) FROM archive_intake i WHERE i.channel_id = c.id AND i.hour > ?), 0),
	coalesce((SELECT sum(rejected) FROM archive_intake i WHERE i.channel_id = c.id AND i.hour > ?), 0)`

func scanChannel(s scanner) (*archive.Channel, error) {
	var c archive.Channel
	var last sql.NullInt64
	var created int64
	err := s.Scan(&c.ID, &c.TenantID, &c.Kind, &c.DisplayName, &c.Address, &c.SourceID, &c.State, &c.LastError,
		&last, &c.MessagesTotal, &c.Cursor, &created, &c.Messages24h, &c.Rejected24h)
	c.LastMessageAt = fromMs(last)
	c.CreatedAt = msTime(created)
	return &c, err
}

// hour24 is the hour number before which intake counts are older than 24 h.
func (db *DB) hour24() int64 { return db.Now().Add(-24*time.Hour).UnixMilli() / 3600000 }

// CreateArchiveChannel implements archive.IntakeStore.
func (db *DB) CreateArchiveChannel(ctx context.Context, c *archive.Channel) error {
	return db.WriteTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO archive_channels (id, tenant_id, kind, display_name, address, source_id, state, cursor, created_at)
			VALUES (?,?,?,?,?,?,?,?,?)`, c.ID, c.TenantID, c.Kind, c.DisplayName, nullStr(strings.ToLower(c.Address)), nullStr(c.SourceID),
			c.State, c.Cursor, c.CreatedAt.UnixMilli())
		return convertError(err)
	})
}

func nullStr(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// ArchiveChannel implements archive.IntakeStore.
func (db *DB) ArchiveChannel(ctx context.Context, id string) (*archive.Channel, error) {
	h := db.hour24()
	c, err := scanChannel(db.read.QueryRowContext(ctx, `SELECT `+channelCols+` FROM archive_channels c WHERE c.id = ? AND c.deleted_at IS NULL`, h, h, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, app.NotFound("channel")
	}
	return c, err
}

// ArchiveChannelByAddress implements archive.IntakeStore.
func (db *DB) ArchiveChannelByAddress(ctx context.Context, address string) (*archive.Channel, error) {
	h := db.hour24()
	c, err := scanChannel(db.read.QueryRowContext(ctx, `SELECT `+channelCols+` FROM archive_channels c
		WHERE c.address = ? AND c.deleted_at IS NULL AND c.kind = ?`, h, h, strings.ToLower(address), archive.KindSMTPJournal))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, app.NotFound("channel")
	}
	return c, err
}

// ArchiveChannels implements archive.IntakeStore.
func (db *DB) ArchiveChannels(ctx context.Context, tenantID string) ([]*archive.Channel, error) {
	h := db.hour24()
	return queryRows(ctx, db.read, scanChannel, `SELECT `+channelCols+` FROM archive_channels c
		WHERE c.deleted_at IS NULL AND (? = '' OR c.tenant_id = ?) ORDER BY c.tenant_id, c.id`, h, h, tenantID, tenantID)
}

// DeleteArchiveChannel implements archive.IntakeStore.
func (db *DB) DeleteArchiveChannel(ctx context.Context, id string, at time.Time) error {
	return db.WriteTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE archive_channels SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL`, at.UnixMilli(), id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return app.NotFound("channel")
		}
		return nil
	})
}

// AddArchiveRejected implements archive.IntakeStore.
func (db *DB) AddArchiveRejected(ctx context.Context, channelID string, at time.Time) error {
	return db.WriteTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO archive_intake (channel_id, hour, rejected) VALUES (?,?,1)
			ON CONFLICT (channel_id, hour) DO UPDATE SET rejected = rejected + 1`, channelID, at.UnixMilli()/3600000)
		return err
	})
}

const messageCols = `id, tenant_id, sha256, size, content, record_index, captured_at, channel_id, subject, from_addr, to_addrs,
	date, message_id, custodians, journal, purged_at, coalesce(spool_segment,''), coalesce(spool_offset,0), coalesce(spool_length,0)`

func scanMessage(s scanner) (*archive.StoredMessage, error) {
	var m archive.StoredMessage
	var captured int64
	var to, cust string
	var date, purged sql.NullInt64
	err := s.Scan(&m.ID, &m.TenantID, &m.SHA256, &m.Size, &m.Content, &m.RecordIndex, &captured, &m.ChannelID, &m.Subject,
		&m.From, &to, &date, &m.MessageID, &cust, &m.Journal, &purged, &m.Spool.Segment, &m.Spool.Offset, &m.Spool.Length)
	m.CapturedAt = msTime(captured)
	m.To = strings.Fields(to)
	m.Custodians = strings.Fields(cust)
	m.Date = fromMs(date)
	m.PurgedAt = fromMs(purged)
	return &m, err
}

// ArchiveMessageBySHA implements archive.IntakeStore.
func (db *DB) ArchiveMessageBySHA(ctx context.Context, tenantID, sha string) (*archive.StoredMessage, error) {
	m, err := scanMessage(db.read.QueryRowContext(ctx, `SELECT `+messageCols+` FROM archive_messages WHERE tenant_id = ? AND sha256 = ?`, tenantID, sha))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, app.NotFound("archived message")
	}
	return m, err
}

// ArchiveMessage implements archive.IntakeStore.
func (db *DB) ArchiveMessage(ctx context.Context, tenantID, id string) (*archive.StoredMessage, error) {
	m, err := scanMessage(db.read.QueryRowContext(ctx, `SELECT `+messageCols+` FROM archive_messages WHERE tenant_id = ? AND id = ?`, tenantID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, app.NotFound("archived message")
	}
	return m, err
}

// ArchiveMessagesAll implements archive.IntakeStore.
func (db *DB) ArchiveMessagesAll(ctx context.Context, tenantID string, fn func(*archive.StoredMessage) error) error {
	rows, err := db.read.QueryContext(ctx, `SELECT `+messageCols+` FROM archive_messages WHERE tenant_id = ? ORDER BY record_index`, tenantID)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return err
		}
		if err := fn(m); err != nil {
			return err
		}
	}
	return rows.Err()
}

// ArchiveSpooled implements archive.IntakeStore.
func (db *DB) ArchiveSpooled(ctx context.Context, tenantID string, limit int) ([]*archive.StoredMessage, error) {
	return queryRows(ctx, db.read, scanMessage, `SELECT `+messageCols+` FROM archive_messages
		WHERE tenant_id = ? AND content = '' AND purged_at IS NULL ORDER BY record_index LIMIT ?`, tenantID, limit)
}

// SetArchiveContent implements archive.IntakeStore.
func (db *DB) SetArchiveContent(ctx context.Context, tenantID string, content map[string]string) error {
	return db.WriteTx(ctx, func(tx *sql.Tx) error {
		for id, c := range content {
			if _, err := tx.ExecContext(ctx, `UPDATE archive_messages SET content = ? WHERE tenant_id = ? AND id = ? AND content = '' AND purged_at IS NULL`,
				c, tenantID, id); err != nil {
				return err
			}
		}
		return nil
	})
}

// ArchiveLiveSegments implements archive.IntakeStore.
func (db *DB) ArchiveLiveSegments(ctx context.Context, tenantID string) (map[string]bool, error) {
	segs, err := queryRows(ctx, db.read, func(s scanner) (string, error) {
		var seg string
		return seg, s.Scan(&seg)
	}, `SELECT DISTINCT spool_segment FROM archive_messages INDEXED BY archive_messages_segment
		WHERE tenant_id = ? AND spool_segment IS NOT NULL AND content = '' AND purged_at IS NULL`, tenantID)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(segs))
	for _, seg := range segs {
		out[seg] = true
	}
	return out, nil
}

// ArchivePurgedInSegments implements archive.IntakeStore.
func (db *DB) ArchivePurgedInSegments(ctx context.Context, tenantID string) ([]*archive.StoredMessage, error) {
	return queryRows(ctx, db.read, scanMessage, `SELECT `+messageCols+` FROM archive_messages INDEXED BY archive_messages_segment
		WHERE tenant_id = ? AND spool_segment IS NOT NULL AND purged_at IS NOT NULL`, tenantID)
}

// ClearArchiveSpool implements archive.IntakeStore.
func (db *DB) ClearArchiveSpool(ctx context.Context, tenantID string, segments, ids []string) error {
	if len(segments) == 0 && len(ids) == 0 {
		return nil
	}
	return db.WriteTx(ctx, func(tx *sql.Tx) error {
		for _, seg := range segments {
			if _, err := tx.ExecContext(ctx, `UPDATE archive_messages SET spool_segment = NULL, spool_offset = NULL, spool_length = NULL
				WHERE tenant_id = ? AND spool_segment = ?`, tenantID, seg); err != nil {
				return err
			}
		}
		for _, id := range ids {
			if _, err := tx.ExecContext(ctx, `UPDATE archive_messages SET spool_segment = NULL, spool_offset = NULL, spool_length = NULL
				WHERE tenant_id = ? AND id = ? AND purged_at IS NOT NULL`, tenantID, id); err != nil {
				return err
			}
		}
		return nil
	})
}

// spoolArgs is a capture's spool location as column values (NULL for
// none).
func spoolArgs(sl archive.SpoolSlice) (seg, off, length any) {
	if sl.Segment == "" {
		return nil, nil, nil
	}
	return sl.Segment, sl.Offset, sl.Length
}

// CommitCapturesTx implements archive.IntakeStore.
func (db *DB) CommitCapturesTx(ctx context.Context, tx *sql.Tx, caps []*archive.Capture) error {
	for _, c := range caps {
		m := c.Message
		switch {
		case c.New:
			cust := ""
			if len(m.Custodians) > 0 {
				cust = " " + strings.Join(m.Custodians, " ") + " "
			}
			seg, off, length := spoolArgs(c.Spool)
			res, err := tx.ExecContext(ctx, `INSERT INTO archive_messages (id, tenant_id, sha256, size, record_index, captured_at, channel_id,
				subject, from_addr, to_addrs, date, message_id, custodians, journal, spool_segment, spool_offset, spool_length)
				VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
				m.ID, m.TenantID, m.SHA256, m.Size, c.Index, m.CapturedAt.UnixMilli(), m.ChannelID, m.Subject, m.From,
				strings.Join(m.To, " "), ms(m.Date), m.MessageID, cust, m.Journal, seg, off, length)
			if err != nil {
				return convertError(err)
			}
			rowid, err := res.LastInsertId()
			if err != nil {
				return err
			}
			addrs := strings.Join(append([]string{m.From}, m.Custodians...), " ")
			if _, err := tx.ExecContext(ctx, `INSERT INTO archive_fts (rowid, subject, addresses, body) VALUES (?,?,?,?)`,
				rowid, m.Subject, addrs, c.Body); err != nil {
				return err
			}
		case c.Revive:
			seg, off, length := spoolArgs(c.Spool)
			if _, err := tx.ExecContext(ctx, `UPDATE archive_messages SET content = '', purged_at = NULL,
				spool_segment = ?, spool_offset = ?, spool_length = ? WHERE tenant_id = ? AND id = ?`,
				seg, off, length, m.TenantID, m.ID); err != nil {
				return err
			}
		}
		at := c.At.UnixMilli()
		if _, err := tx.ExecContext(ctx, `INSERT INTO archive_captures (message_id, tenant_id, channel_id, record_index, at, envelope) VALUES (?,?,?,?,?,?)`,
			m.ID, m.TenantID, m.ChannelID, c.Index, at, c.Envelope); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO archive_intake (channel_id, hour, accepted) VALUES (?,?,1)
			ON CONFLICT (channel_id, hour) DO UPDATE SET accepted = accepted + 1`, m.ChannelID, at/3600000); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE archive_channels SET messages_total = messages_total + 1,
			last_message_at = max(coalesce(last_message_at, 0), ?), state = 'ok', last_error = '' WHERE id = ?`, at, m.ChannelID); err != nil {
			return err
		}
	}
	return nil
}

// ArchiveStats implements archive.IntakeStore.
func (db *DB) ArchiveStats(ctx context.Context, tenantID string) (messages, bytes int64, err error) {
	err = db.read.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(size),0) FROM archive_messages
		WHERE purged_at IS NULL AND (? = '' OR tenant_id = ?)`, tenantID, tenantID).Scan(&messages, &bytes)
	return
}

// ArchiveTenants implements archive.IntakeStore.
func (db *DB) ArchiveTenants(ctx context.Context) ([]string, error) {
	return queryRows(ctx, db.read, func(s scanner) (string, error) {
		var id string
		return id, s.Scan(&id)
	}, `SELECT DISTINCT tenant_id FROM archive_records`)
}

const checkpointCols = `tenant_id, size, root, note, at, tsr, tsa_time`

func scanCheckpoint(s scanner) (*archive.StoredCheckpoint, error) {
	var c archive.StoredCheckpoint
	var at int64
	var tsa sql.NullInt64
	err := s.Scan(&c.TenantID, &c.Size, &c.Root, &c.Note, &at, &c.TSR, &tsa)
	c.At = msTime(at)
	c.TSATime = fromMs(tsa)
	return &c, err
}

// InsertArchiveCheckpoint implements archive.IntakeStore.
func (db *DB) InsertArchiveCheckpoint(ctx context.Context, c *archive.StoredCheckpoint) error {
	return db.WriteTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO archive_checkpoints (tenant_id, size, root, note, at, tsr, tsa_time) VALUES (?,?,?,?,?,?,?)`,
			c.TenantID, c.Size, c.Root, c.Note, c.At.UnixMilli(), c.TSR, ms(c.TSATime))
		return convertError(err)
	})
}

// LatestArchiveCheckpoint implements archive.IntakeStore.
func (db *DB) LatestArchiveCheckpoint(ctx context.Context, tenantID string) (*archive.StoredCheckpoint, error) {
	c, err := scanCheckpoint(db.read.QueryRowContext(ctx, `SELECT `+checkpointCols+` FROM archive_checkpoints WHERE tenant_id = ? ORDER BY size DESC LIMIT 1`, tenantID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, app.NotFound("checkpoint")
	}
	return c, err
}

// ArchiveCheckpoint implements archive.IntakeStore.
func (db *DB) ArchiveCheckpoint(ctx context.Context, tenantID string, size int64) (*archive.StoredCheckpoint, error) {
	c, err := scanCheckpoint(db.read.QueryRowContext(ctx, `SELECT `+checkpointCols+` FROM archive_checkpoints WHERE tenant_id = ? AND size = ?`, tenantID, size))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, app.NotFound("checkpoint")
	}
	return c, err
}

// ArchiveCheckpoints implements archive.IntakeStore.
func (db *DB) ArchiveCheckpoints(ctx context.Context, tenantID string) ([]*archive.StoredCheckpoint, error) {
	return queryRows(ctx, db.read, scanCheckpoint, `SELECT `+checkpointCols+` FROM archive_checkpoints WHERE tenant_id = ? ORDER BY size`, tenantID)
}

// UnstampedArchiveCheckpoints implements archive.IntakeStore.
func (db *DB) UnstampedArchiveCheckpoints(ctx context.Context, tenantID string) ([]*archive.StoredCheckpoint, error) {
	return queryRows(ctx, db.read, scanCheckpoint, `SELECT `+checkpointCols+` FROM archive_checkpoints WHERE tenant_id = ? AND tsr IS NULL ORDER BY size`, tenantID)
}

// SetArchiveCheckpointStamp implements archive.IntakeStore.
func (db *DB) SetArchiveCheckpointStamp(ctx context.Context, tenantID string, size int64, tsr []byte, genTime time.Time) error {
	return db.WriteTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE archive_checkpoints SET tsr = ?, tsa_time = ? WHERE tenant_id = ? AND size = ?`,
			tsr, genTime.UnixMilli(), tenantID, size)
		return err
	})
}

// ArchiveState implements archive.IntakeStore.
func (db *DB) ArchiveState(ctx context.Context, tenantID string) (*archive.ChainState, error) {
	st := archive.ChainState{TenantID: tenantID, State: archive.ChainOK}
	var last sql.NullInt64
	err := db.read.QueryRowContext(ctx, `SELECT chain_state, last_verified_at, last_verify_job, broken_reason FROM archive_state WHERE tenant_id = ?`,
		tenantID).Scan(&st.State, &last, &st.LastVerifyJob, &st.BrokenReason)
	if errors.Is(err, sql.ErrNoRows) {
		return &st, nil
	}
	st.LastVerifiedAt = fromMs(last)
	return &st, err
}

// SetArchiveState implements archive.IntakeStore.
func (db *DB) SetArchiveState(ctx context.Context, st *archive.ChainState) error {
	return db.WriteTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO archive_state (tenant_id, chain_state, last_verified_at, last_verify_job, broken_reason)
			VALUES (?,?,?,?,?) ON CONFLICT (tenant_id) DO UPDATE SET chain_state = excluded.chain_state,
			last_verified_at = excluded.last_verified_at, last_verify_job = excluded.last_verify_job, broken_reason = excluded.broken_reason`,
			st.TenantID, st.State, ms(st.LastVerifiedAt), st.LastVerifyJob, st.BrokenReason)
		return err
	})
}

// ArchiveBlobRoots calls fn for every blob of the tenant's archived
// messages that are in the blob store and not purged (the blob store's
// Config.ExtraRoots).
func (db *DB) ArchiveBlobRoots(ctx context.Context, tenantID string, fn func(app.BlobID)) error {
	rows, err := db.read.QueryContext(ctx, `SELECT content FROM archive_messages WHERE tenant_id = ? AND content != '' AND purged_at IS NULL`, tenantID)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return err
		}
		var v struct {
			Blobs []app.BlobID `json:"blobs"`
		}
		if err := json.Unmarshal([]byte(c), &v); err != nil {
			return fmt.Errorf("archive message content: %w", err)
		}
		for _, id := range v.Blobs {
			fn(id)
		}
	}
	return rows.Err()
}
