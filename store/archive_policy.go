package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"backstop/app"
	"backstop/app/archive"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// The archive's policy SQL (CONTRACT §14): retention rules, legal holds,
// the purge's candidates and marks, search, and what the evidence report
// reads. Records are appended by the core (AppendArchiveRecords); the
// holds' and tombstones' rows are written inside its transaction through
// the *Tx methods here.

var _ archive.PolicyStore = (*DB)(nil)

// ArchiveRetention returns the tenant's retention rules, if it saved any.
func (db *DB) ArchiveRetention(ctx context.Context, tenantID string) (archive.Retention, bool, error) {
	var r archive.Retention
	var rules string
	err := db.read.QueryRowContext(ctx, "SELECT default_days, rules FROM archive_retention WHERE tenant_id = ?", tenantID).
		Scan(&r.DefaultDays, &rules)
	if errors.Is(err, sql.ErrNoRows) {
		return archive.Retention{}, false, nil
	} else if err != nil {
		return archive.Retention{}, false, err
	}
	if err := json.Unmarshal([]byte(rules), &r.Rules); err != nil {
		return archive.Retention{}, false, fmt.Errorf("archive retention rules of %s: %w", tenantID, err)
	}
	return r, true, nil
}

// SetArchiveRetention stores the tenant's retention rules, replacing any.
func (db *DB) SetArchiveRetention(ctx context.Context, tenantID string, r archive.Retention) error {
	rules := r.Rules
	if rules == nil {
		rules = []archive.RetentionRule{}
	}
	b, err := json.Marshal(rules)
	if err != nil {
		return err
	}
	_, err = db.write.ExecContext(ctx, `INSERT INTO archive_retention (tenant_id, default_days, rules, updated_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (tenant_id) DO UPDATE SET default_days = excluded.default_days, rules = excluded.rules, updated_at = excluded.updated_at`,
		tenantID, r.DefaultDays, string(b), db.Now().UnixMilli())
	return convertError(err)
}

// InsertArchiveHoldTx writes a new hold's row inside the transaction that
// appends its hold record.
func (db *DB) InsertArchiveHoldTx(ctx context.Context, tx *sql.Tx, h *archive.Hold) error {
	cust := h.Custodians
	if cust == nil {
		cust = []string{}
	}
	b, err := json.Marshal(cust)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO archive_holds (id, tenant_id, name, matter, custodians, from_at, to_at, query,
		created_at, created_by, record_index) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		h.ID, h.TenantID, h.Name, h.Matter, string(b), ms(h.From), ms(h.To), h.Query,
		h.CreatedAt.UnixMilli(), h.CreatedBy, h.RecordIndex)
	return convertError(err)
}

// ReleaseArchiveHoldTx marks the hold released inside the transaction that
// appends its release record. A hold released already is a conflict (the
// transaction, and so the record, is then rolled back).
func (db *DB) ReleaseArchiveHoldTx(ctx context.Context, tx *sql.Tx, h *archive.Hold) error {
	res, err := tx.ExecContext(ctx, `UPDATE archive_holds SET released_at = ?, release_reason = ?, released_by = ?,
		release_record_index = ? WHERE tenant_id = ? AND id = ? AND released_at IS NULL`,
		ms(h.ReleasedAt), h.ReleaseReason, h.ReleasedBy, h.ReleaseRecordIndex, h.TenantID, h.ID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return app.Errorf(app.ECONFLICT, "the hold was released already")
	}
	return nil
}

const holdColumns = `id, tenant_id, name, matter, custodians, from_at, to_at, query, created_at, created_by, record_index,
	released_at, release_reason, released_by, release_record_index`

func scanHold(sc scanner) (*archive.Hold, error) {
	var h archive.Hold
	var cust string
	var from, to, released, releaseIdx sql.NullInt64
	var created int64
	if err := sc.Scan(&h.ID, &h.TenantID, &h.Name, &h.Matter, &cust, &from, &to, &h.Query, &created, &h.CreatedBy,
		&h.RecordIndex, &released, &h.ReleaseReason, &h.ReleasedBy, &releaseIdx); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(cust), &h.Custodians); err != nil {
		return nil, fmt.Errorf("custodians of hold %s: %w", h.ID, err)
	}
	h.From, h.To, h.ReleasedAt = fromMs(from), fromMs(to), fromMs(released)
	h.CreatedAt = msTime(created)
	if releaseIdx.Valid {
		h.ReleaseRecordIndex = &releaseIdx.Int64
	}
	return &h, nil
}

// ArchiveHold returns one of the tenant's holds (tenantID "": any tenant's).
func (db *DB) ArchiveHold(ctx context.Context, tenantID, id string) (*archive.Hold, error) {
	h, err := scanHold(db.read.QueryRowContext(ctx, "SELECT "+holdColumns+
		" FROM archive_holds WHERE id = ? AND (? = '' OR tenant_id = ?)", id, tenantID, tenantID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, app.NotFound("hold")
	}
	return h, err
}

// ArchiveHolds lists holds newest first: the tenant's (tenantID "": every
// tenant's), those with ids before beforeID when set, at most limit (0: all).
func (db *DB) ArchiveHolds(ctx context.Context, tenantID, beforeID string, limit int) ([]*archive.Hold, error) {
	if limit <= 0 {
		limit = -1
	}
	return queryRows(ctx, db.read, scanHold, "SELECT "+holdColumns+` FROM archive_holds
		WHERE (? = '' OR tenant_id = ?) AND (? = '' OR id < ?) ORDER BY id DESC LIMIT ?`,
		tenantID, tenantID, beforeID, beforeID, limit)
}

const messageColumns = `m.rowid, m.id, m.tenant_id, m.sha256, m.size, m.content, m.record_index, m.captured_at, m.channel_id,
	m.subject, m.from_addr, m.to_addrs, m.date, m.message_id, m.custodians, m.journal, m.purged_at,
	coalesce(m.spool_segment,''), coalesce(m.spool_offset,0), coalesce(m.spool_length,0)`

func scanMessageRow(sc scanner) (*archive.MessageRow, error) {
	var r archive.MessageRow
	m := &r.Message
	var content, to, cust string
	var captured int64
	var date, purged sql.NullInt64
	if err := sc.Scan(&r.RowID, &m.ID, &m.TenantID, &m.SHA256, &m.Size, &content, &m.RecordIndex, &captured, &m.ChannelID,
		&m.Subject, &m.From, &to, &date, &m.MessageID, &cust, &m.Journal, &purged,
		&r.Spool.Segment, &r.Spool.Offset, &r.Spool.Length); err != nil {
		return nil, err
	}
	r.Spooled = content == ""
	m.CapturedAt, m.Date, m.PurgedAt = msTime(captured), fromMs(date), fromMs(purged)
	m.To, m.Custodians = addressList(to), strings.Fields(cust)
	return &r, nil
}

// addressList reads to_addrs: a JSON array, or addresses separated by
// spaces or commas.
func addressList(s string) []string {
	s = strings.TrimSpace(s)
	if s == "" {
		return []string{}
	}
	if strings.HasPrefix(s, "[") {
		var l []string
		if json.Unmarshal([]byte(s), &l) == nil {
			return l
		}
	}
	return strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' })
}

// ArchiveMessageRow returns one of the tenant's messages (tenantID "": any
// tenant's), purged or not.
func (db *DB) ArchiveMessageRow(ctx context.Context, tenantID, id string) (*archive.MessageRow, error) {
	r, err := scanMessageRow(db.read.QueryRowContext(ctx, "SELECT "+messageColumns+
		" FROM archive_messages m WHERE m.id = ? AND (? = '' OR m.tenant_id = ?)", id, tenantID, tenantID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, app.NotFound("message")
	}
	return r, err
}

// ArchiveRetentionCandidates returns up to limit of the tenant's messages
// not purged, captured at or before capturedBy, with rowid after afterRow,
// in rowid order: the purge's pages.
func (db *DB) ArchiveRetentionCandidates(ctx context.Context, tenantID string, capturedBy time.Time, afterRow int64, limit int) ([]*archive.MessageRow, error) {
	return queryRows(ctx, db.read, scanMessageRow, "SELECT "+messageColumns+` FROM archive_messages m
		WHERE m.tenant_id = ? AND m.rowid > ? AND m.captured_at <= ? AND m.purged_at IS NULL ORDER BY m.rowid LIMIT ?`,
		tenantID, afterRow, capturedBy.UnixMilli(), limit)
}

// ArchiveFTSMatches returns which of rows the FTS5 expression matches.
func (db *DB) ArchiveFTSMatches(ctx context.Context, expr string, rows []int64) (map[int64]bool, error) {
	out := map[int64]bool{}
	if len(rows) == 0 || expr == "" {
		return out, nil
	}
	args := []any{expr}
	for _, r := range rows {
		args = append(args, r)
	}
	q := "SELECT rowid FROM archive_fts WHERE archive_fts MATCH ? AND rowid IN (?" + strings.Repeat(", ?", len(rows)-1) + ")"
	ids, err := queryRows(ctx, db.read, func(sc scanner) (int64, error) {
		var id int64
		return id, sc.Scan(&id)
	}, q, args...)
	if err != nil {
		return nil, ftsError(err)
	}
	for _, id := range ids {
		out[id] = true
	}
	return out, nil
}

// ftsError turns SQLite's generic error (an FTS5 expression it cannot
// parse) into a validation error. archive.FTSQuery quotes user text, so
// this is a guard, not a path users take.
func ftsError(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code() == sqlite3.SQLITE_ERROR {
		return app.FieldError("query.q", "the search text cannot be used")
	}
	return err
}

// MarkArchivePurgedTx sets purged_at and drops the content reference and
// the search row of each message, inside the transaction that appends
// their tombstones.
func (db *DB) MarkArchivePurgedTx(ctx context.Context, tx *sql.Tx, tenantID string, rows []int64, at time.Time) error {
	for _, r := range rows {
		res, err := tx.ExecContext(ctx, `UPDATE archive_messages SET purged_at = ?, content = '' WHERE rowid = ? AND tenant_id = ?
			AND purged_at IS NULL`, at.UnixMilli(), r, tenantID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return app.Errorf(app.ECONFLICT, "message row %d was purged or changed meanwhile", r)
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM archive_fts WHERE rowid = ?", r); err != nil {
			return err
		}
	}
	return nil
}

// ArchivePurgedSHA256 returns which of the content hashes belong to the
// tenant's purged messages (a spool file left by a crash between the
// tombstone's commit and the file's removal).
func (db *DB) ArchivePurgedSHA256(ctx context.Context, tenantID string, shas []string) (map[string]bool, error) {
	out := map[string]bool{}
	for len(shas) > 0 {
		n := min(len(shas), 500)
		args := []any{tenantID}
		for _, s := range shas[:n] {
			args = append(args, s)
		}
		got, err := queryRows(ctx, db.read, func(sc scanner) (string, error) {
			var s string
			return s, sc.Scan(&s)
		}, "SELECT sha256 FROM archive_messages WHERE tenant_id = ? AND purged_at IS NOT NULL AND sha256 IN (?"+
			strings.Repeat(", ?", n-1)+")", args...)
		if err != nil {
			return nil, err
		}
		for _, s := range got {
			out[s] = true
		}
		shas = shas[n:]
	}
	return out, nil
}

// SearchArchiveMessages runs a search: fts is the FTS5 expression made from
// the user's text ("" for none). Results are newest first; purged
// messages are not found; the cursor is opaque to callers.
//
// With text, the index drives (CROSS JOIN keeps SQLite from looking up the
// index once per candidate row) in rowid order, newest first, and stops
// at the page's end. Without, the (tenant_id, captured_at) index does, in
// capture order. Capture order and rowid order agree (rows are inserted
// as they are captured).
func (db *DB) SearchArchiveMessages(ctx context.Context, q archive.SearchQuery, fts string) ([]*archive.MessageRow, string, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	var where []string
	var args []any
	from, order := "archive_messages m", "m.captured_at DESC, m.rowid DESC"
	if fts != "" {
		from, order = "archive_fts f CROSS JOIN archive_messages m ON m.rowid = f.rowid", "f.rowid DESC"
		where = append(where, "archive_fts MATCH ?")
		args = append(args, fts)
	}
	if q.TenantID != "" {
		where = append(where, "m.tenant_id = ?")
		args = append(args, q.TenantID)
	}
	where = append(where, "m.purged_at IS NULL")
	if fts != "" && q.TenantID != "" && (q.From != nil || q.To != nil) {
		// The period's rows are a contiguous run of the time index: their
		// rowid bounds let the text index skip to them instead of walking
		// every newer match.
		lo, hi, err := db.archiveRowBounds(ctx, q.TenantID, q.From, q.To)
		if err != nil {
			return nil, "", err
		}
		where = append(where, "f.rowid >= ? AND f.rowid <= ?")
		args = append(args, lo, hi)
	}
	if q.From != nil {
		where = append(where, "m.captured_at >= ?")
		args = append(args, q.From.UnixMilli())
	}
	if q.To != nil {
		where = append(where, "m.captured_at <= ?")
		args = append(args, q.To.UnixMilli())
	}
	if q.ChannelID != "" {
		where = append(where, "m.channel_id = ?")
		args = append(args, q.ChannelID)
	}
	if c := strings.ToLower(strings.TrimSpace(q.Custodian)); c != "" {
		pat := "% " + likeEscape(c) + " %"
		if strings.HasPrefix(c, "@") {
			pat = "%" + likeEscape(c) + " %"
		}
		where = append(where, `m.custodians LIKE ? ESCAPE '\'`)
		args = append(args, pat)
	}
	if q.Cursor != "" {
		at, row, err := parseSearchCursor(q.Cursor)
		if err != nil {
			return nil, "", err
		}
		if fts != "" {
			where = append(where, "f.rowid < ?")
			args = append(args, row)
		} else {
			where = append(where, "(m.captured_at < ? OR m.captured_at = ? AND m.rowid < ?)")
			args = append(args, at, at, row)
		}
	}
	args = append(args, limit+1)
	rows, err := queryRows(ctx, db.read, scanMessageRow, "SELECT "+messageColumns+" FROM "+from+" WHERE "+
		strings.Join(where, " AND ")+" ORDER BY "+order+" LIMIT ?", args...)
	if err != nil {
		return nil, "", ftsError(err)
	}
	next := ""
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[limit-1]
		next = "c" + strconv.FormatInt(last.CapturedAt.UnixMilli(), 10) + "." + strconv.FormatInt(last.RowID, 10)
	}
	return rows, next, nil
}

// archiveRowBounds returns the least and greatest rowid of the tenant's
// messages captured in [from, to] (either open), read from the time
// index alone; (1, 0) when there is none.
func (db *DB) archiveRowBounds(ctx context.Context, tenantID string, from, to *time.Time) (lo, hi int64, err error) {
	f, t := int64(math.MinInt64), int64(math.MaxInt64)
	if from != nil {
		f = from.UnixMilli()
	}
	if to != nil {
		t = to.UnixMilli()
	}
	var l, h sql.NullInt64
	err = db.read.QueryRowContext(ctx, `SELECT min(rowid), max(rowid) FROM archive_messages INDEXED BY archive_messages_tenant_time
		WHERE tenant_id = ? AND captured_at >= ? AND captured_at <= ?`, tenantID, f, t).Scan(&l, &h)
	if err != nil || !l.Valid {
		return 1, 0, err
	}
	return l.Int64, h.Int64, nil
}

func parseSearchCursor(c string) (at, row int64, err error) {
	a, r, ok := strings.Cut(strings.TrimPrefix(c, "c"), ".")
	at, err1 := strconv.ParseInt(a, 10, 64)
	row, err2 := strconv.ParseInt(r, 10, 64)
	if !strings.HasPrefix(c, "c") || !ok || err1 != nil || err2 != nil {
		return 0, 0, app.FieldError("query.cursor", "cursor is not one this server gave out")
	}
	return at, row, nil
}

func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// ArchiveRecordSpan returns the first and last index of the tenant's
// records whose time is in [from, to], among the first size records; ok
// is false when there is none.
func (db *DB) ArchiveRecordSpan(ctx context.Context, tenantID string, from, to time.Time, size int64) (first, last int64, ok bool, err error) {
	var f, l sql.NullInt64
	err = db.read.QueryRowContext(ctx, `SELECT min(idx), max(idx) FROM archive_records
		WHERE tenant_id = ? AND at >= ? AND at <= ? AND idx < ?`, tenantID, from.UnixMilli(), to.UnixMilli(), size).Scan(&f, &l)
	if err != nil || !f.Valid {
		return 0, 0, false, err
	}
	return f.Int64, l.Int64, true, nil
}

// ArchiveRecordBefore returns the greatest index, among the first size
// records, of a record whose time is before t; ok is false when none is.
func (db *DB) ArchiveRecordBefore(ctx context.Context, tenantID string, t time.Time, size int64) (index int64, ok bool, err error) {
	var v sql.NullInt64
	err = db.read.QueryRowContext(ctx, `SELECT max(idx) FROM archive_records WHERE tenant_id = ? AND at < ? AND idx < ?`,
		tenantID, t.UnixMilli(), size).Scan(&v)
	return v.Int64, v.Valid, err
}

// ArchiveRecordRows calls fn for the tenant's records [from, to] in index
// order with their type, time and text.
func (db *DB) ArchiveRecordRows(ctx context.Context, tenantID string, from, to int64,
	fn func(index int64, typ string, at time.Time, text []byte) error) error {
	rows, err := db.read.QueryContext(ctx, `SELECT idx, type, at, record FROM archive_records
		WHERE tenant_id = ? AND idx >= ? AND idx <= ? ORDER BY idx`, tenantID, from, to)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var idx, at int64
		var typ string
		var text []byte
		if err := rows.Scan(&idx, &typ, &at, &text); err != nil {
			return err
		}
		if err := fn(idx, typ, msTime(at), text); err != nil {
			return err
		}
	}
	return rows.Err()
}

// ArchiveCheckpointAtMost returns the tenant's newest stored checkpoint of
// at most size records (size < 0: the newest of all); not found when none.
func (db *DB) ArchiveCheckpointAtMost(ctx context.Context, tenantID string, size int64) (*archive.StoredCheckpoint, error) {
	var c archive.StoredCheckpoint
	var at int64
	err := db.read.QueryRowContext(ctx, `SELECT size, note, at, tsr FROM archive_checkpoints
		WHERE tenant_id = ? AND (? < 0 OR size <= ?) ORDER BY size DESC LIMIT 1`, tenantID, size, size).
		Scan(&c.Size, &c.Note, &at, &c.TSR)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, app.NotFound("checkpoint")
	} else if err != nil {
		return nil, err
	}
	c.TenantID, c.At = tenantID, msTime(at)
	return &c, nil
}
