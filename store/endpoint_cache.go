package store

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"backstop/app"
)

// Listing endpoints reads every row of the endpoints table: for 10,000
// endpoints modernc.org/sqlite spent ~90 ms fetching 24 columns a row, each
// fetch through the connection's mutex. The table changes slowly compared
// with that (an appliance with 10,000 agents receives ~170 heartbeats a
// second), so the store keeps a copy of every endpoint in memory and, before
// each listing, re-reads only the rows changed since it last looked.
//
// Exactness rests on migration 0007: triggers on the endpoints table append
// the id of every inserted, updated or deleted row to endpoint_changes, in
// the writer's own transaction, whichever process writes. A refresh runs in
// one read transaction (one WAL snapshot): it reads how far the change log
// has gone (sqlite_sequence), the ids logged since the cached position, and
// those rows. A listing therefore reflects every write committed before it
// started, like a direct query. The cache reloads everything when it cannot
// be sure: on its first use, when the schema changed (PRAGMA
// schema_version), when the rows it needs were pruned from the log, and
// when more rows changed than a full read costs. Without the triggers
// (a later migration rebuilt the table and forgot them) every listing reads
// the table directly.

// endpointCache is the cached copy; DB.endpointCache holds it.
type endpointCache struct {
	mu   sync.Mutex // one refresh at a time
	snap atomic.Pointer[endpointSnapshot]

	uncacheable atomic.Bool  // the change-log triggers are missing: never cache
	refreshed   atomic.Int64 // Unix nanoseconds of the latest refresh started by a single read (read_cache.go)
}

// endpointSnapshot is the endpoints table at one point of the change log.
// A published snapshot and the endpoints it points to are never modified.
type endpointSnapshot struct {
	seq    int64           // the change log's sqlite_sequence when read
	schema int64           // PRAGMA schema_version when read
	rows   []*app.Endpoint // every endpoint, ORDER BY id
}

// endpointReloadAt is the number of changed rows beyond which a refresh
// reads the whole table instead: re-reading single rows by id costs more
// per row than one scan.
const endpointReloadAt = 2000

var endpointChangeTriggers = []string{"endpoints_log_insert", "endpoints_log_update", "endpoints_log_delete"}

// endpointSnapshot returns the endpoints as of a read transaction that
// began after the call: every write committed before the call is in it.
func (db *DB) endpointSnapshot(ctx context.Context) (*endpointSnapshot, error) {
	c := &db.endpointCache
	c.mu.Lock()
	defer c.mu.Unlock()
	tx, err := db.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	var seq, schema int64
	if err := tx.QueryRowContext(ctx, `SELECT
		(SELECT coalesce(max(seq), 0) FROM sqlite_sequence WHERE name = 'endpoint_changes'),
		(SELECT schema_version FROM pragma_schema_version)`).Scan(&seq, &schema); err != nil {
		return nil, err
	}
	old := c.snap.Load()
	switch {
	case old != nil && old.seq == seq && old.schema == schema:
		return old, nil
	case old != nil && old.schema == schema && seq-old.seq <= endpointReloadAt:
		next, ok, err := refreshEndpoints(ctx, tx, old, seq)
		if err != nil {
			return nil, err
		}
		if ok {
			c.snap.Store(next)
			return next, nil
		}
	}
	next, cacheable, err := loadEndpoints(ctx, tx, seq, schema)
	if err != nil {
		return nil, err
	}
	if cacheable {
		c.snap.Store(next)
	} else {
		c.snap.Store(nil)
	}
	c.uncacheable.Store(!cacheable)
	return next, nil
}

// loadEndpoints reads the whole table. It reports whether the change-log
// triggers are installed, without which the result must not be cached.
func loadEndpoints(ctx context.Context, tx *sql.Tx, seq, schema int64) (*endpointSnapshot, bool, error) {
	var triggers int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'trigger'
		AND tbl_name = 'endpoints' AND name IN (?, ?, ?)`,
		endpointChangeTriggers[0], endpointChangeTriggers[1], endpointChangeTriggers[2]).Scan(&triggers); err != nil {
		return nil, false, err
	}
	rows, err := tx.QueryContext(ctx, `SELECT `+endpointColumns+` FROM endpoints ORDER BY id`)
	if err != nil {
		return nil, false, err
	}
	all, err := scanEndpoints(rows)
	if err != nil {
		return nil, false, err
	}
	return &endpointSnapshot{seq: seq, schema: schema, rows: all}, triggers == len(endpointChangeTriggers), nil
}

// refreshEndpoints applies the changes logged after old.seq up to seq to a
// copy of old. It reports false when the log no longer holds all of them
// (pruned by another reader), so the caller reloads.
func refreshEndpoints(ctx context.Context, tx *sql.Tx, old *endpointSnapshot, seq int64) (*endpointSnapshot, bool, error) {
	var oldest sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT min(seq) FROM endpoint_changes`).Scan(&oldest); err != nil {
		return nil, false, err
	}
	if !oldest.Valid || oldest.Int64 > old.seq+1 {
		return nil, false, nil
	}
	idRows, err := tx.QueryContext(ctx, `SELECT DISTINCT endpoint_id FROM endpoint_changes WHERE seq > ? AND seq <= ?`,
		old.seq, seq)
	if err != nil {
		return nil, false, err
	}
	// changed maps every logged id to its row now, nil when deleted.
	changed := map[string]*app.Endpoint{}
	for idRows.Next() {
		var id string
		if err := idRows.Scan(&id); err != nil {
			idRows.Close()
			return nil, false, err
		}
		changed[id] = nil
	}
	if err := idRows.Close(); err != nil {
		return nil, false, err
	}
	rows, err := tx.QueryContext(ctx, `SELECT `+endpointColumns+` FROM endpoints WHERE id IN
		(SELECT endpoint_id FROM endpoint_changes WHERE seq > ? AND seq <= ?)`, old.seq, seq)
	if err != nil {
		return nil, false, err
	}
	fresh, err := scanEndpoints(rows)
	if err != nil {
		return nil, false, err
	}
	for _, e := range fresh {
		changed[e.ID] = e
	}

	next := make([]*app.Endpoint, 0, len(old.rows)+len(fresh))
	for _, e := range old.rows {
		ne, ok := changed[e.ID]
		if !ok {
			next = append(next, e)
			continue
		}
		delete(changed, e.ID)
		if ne != nil {
			next = append(next, ne)
		}
	}
	added := false
	for _, e := range changed { // ids the snapshot did not hold: new rows, or gone again
		if e != nil {
			next, added = append(next, e), true
		}
	}
	if added {
		slices.SortFunc(next, func(a, b *app.Endpoint) int { return strings.Compare(a.ID, b.ID) })
	}
	return &endpointSnapshot{seq: seq, schema: old.schema, rows: next}, true, nil
}

func scanEndpoints(rows *sql.Rows) ([]*app.Endpoint, error) {
	defer rows.Close()
	var out []*app.Endpoint
	for rows.Next() {
		e, err := scanEndpoint(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// pruneEndpointChanges deletes the change-log rows the cache has consumed.
// When nothing is cached, or the cache is so far behind that its next
// refresh reloads anyway, it deletes every row (sqlite_sequence still tells
// how far the log went). It returns the number of rows deleted.
func (db *DB) pruneEndpointChanges(ctx context.Context) (int64, error) {
	var n int64
	err := db.WriteTx(ctx, func(tx *sql.Tx) error {
		var top int64
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) FROM endpoint_changes`).Scan(&top); err != nil {
			return err
		}
		keep := top + 1
		if s := db.endpointCache.snap.Load(); s != nil && s.seq < top && top-s.seq <= endpointReloadAt {
			keep = s.seq + 1
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM endpoint_changes WHERE seq < ?`, keep)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}

// pruneEndpointChangesEvery prunes the change log at each interval until
// ctx ends. At 170 heartbeats a second the log grows by ~10,000 rows a
// minute whether or not anyone lists endpoints.
func (db *DB) pruneEndpointChangesEvery(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			// A failure (say, SQLITE_BUSY from another process) is retried
			// at the next tick; the log only grows meanwhile.
			_, _ = db.pruneEndpointChanges(ctx)
		}
	}
}

// copyEndpoints returns deep copies of src that the caller owns: the cached
// endpoints must never be modified. The copies share four allocations.
func copyEndpoints(src []*app.Endpoint) []*app.Endpoint {
	var nTimes, nStrings int
	for _, e := range src {
		for _, t := range [...]*time.Time{e.RevokedAt, e.LastSeenAt, e.LastBackupAt, e.LastSuccessAt, e.VerifyCheckedAt} {
			if t != nil {
				nTimes++
			}
		}
		nStrings += len(e.Paths) + len(e.Excludes)
	}
	block := make([]app.Endpoint, len(src))
	out := make([]*app.Endpoint, len(src))
	times := make([]time.Time, 0, nTimes)
	strs := make([]string, 0, nStrings)
	cloneTime := func(t *time.Time) *time.Time {
		if t == nil {
			return nil
		}
		times = append(times, *t)
		return &times[len(times)-1]
	}
	cloneList := func(s []string) []string {
		if s == nil {
			return nil
		}
		start := len(strs)
		strs = append(strs, s...)
		return strs[start:len(strs):len(strs)] // capped: an append by the caller reallocates
	}
	for i, e := range src {
		c := &block[i]
		*c = *e
		c.RevokedAt, c.LastSeenAt, c.LastBackupAt = cloneTime(e.RevokedAt), cloneTime(e.LastSeenAt), cloneTime(e.LastBackupAt)
		c.LastSuccessAt, c.VerifyCheckedAt = cloneTime(e.LastSuccessAt), cloneTime(e.VerifyCheckedAt)
		c.Paths, c.Excludes = cloneList(e.Paths), cloneList(e.Excludes)
		out[i] = c
	}
	return out
}

// ReleaseEndpointCache drops the cached endpoints (about 1 KB each) so an
// idle appliance can return the memory; the next listing reads the whole
// table again. Safe at any time, concurrently with listings.
func (db *DB) ReleaseEndpointCache() {
	c := &db.endpointCache
	c.mu.Lock()
	c.snap.Store(nil)
	c.mu.Unlock()
}

// EndpointViews returns the API views, computed at now, of the endpoints
// Endpoints(ctx, f) would return, in the same order; never nil. Unlike
// Endpoints it does not copy the cached endpoints: a listing needs only
// their views.
func (db *DB) EndpointViews(ctx context.Context, f app.EndpointFilter, now time.Time, rules app.EndpointRules) ([]app.EndpointView, error) {
	snap, err := db.endpointSnapshot(ctx)
	if err != nil {
		return nil, err
	}
	match := func(e *app.Endpoint) bool {
		return (f.TenantID == "" || e.TenantID == f.TenantID) && (f.Profile == "" || e.Profile == f.Profile)
	}
	n := 0
	for _, e := range snap.rows {
		if match(e) {
			n++
		}
	}
	out := make([]app.EndpointView, 0, n)
	for _, e := range snap.rows {
		if match(e) {
			out = append(out, e.View(now, rules))
		}
	}
	return out, nil
}
