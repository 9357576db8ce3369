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

// Every authenticated API request reads its key, and most read one
// endpoint: two SQLite row reads a request, each in its own read
// transaction, whose pages the audit commits of other requests keep
// invalidating. Both tables change rarely compared with how often they are
// read, so single reads are answered from memory when the in-memory copy is
// provably current:
//
//   - A mark read (readMarks) looks, in one read transaction, at how far the
//     endpoint change log has gone (sqlite_sequence of endpoint_changes, see
//     endpoint_cache.go), at the api_keys version counter (migration 0017)
//     and at the schema version. Both are kept by triggers in the writers'
//     own transactions, whichever process writes.
//   - A cached copy taken at the same marks is exact: every write committed
//     before the mark read is in it.
//   - Concurrent callers share mark reads (markGate): a caller waits for the
//     first read that begins after it arrived, never for one already under
//     way, so the answer still holds every write committed before the call,
//     exactly as a direct query would. Under load one read serves every
//     request that arrived while the previous one ran.
//
// Endpoint(id) uses the endpoint cache when it is current; otherwise it
// loads or refreshes it at most ten times a second and reads the row
// meanwhile, so heartbeat traffic, which moves the change log every few
// milliseconds, costs about what it cost before. Key(id) reloads the whole key table when its version
// moved: there are few keys, and each changes at most once a minute
// (TouchKey) unless an administrator edits it.

// changeMarks is what one read transaction saw.
type changeMarks struct {
	endpoints int64 // sqlite_sequence of endpoint_changes
	keys      int64 // table_versions of api_keys
	schema    int64 // PRAGMA schema_version
}

const marksQuery = `SELECT
	(SELECT coalesce(max(seq), 0) FROM sqlite_sequence WHERE name = 'endpoint_changes'),
	(SELECT coalesce(max(version), -1) FROM table_versions WHERE name = 'api_keys'),
	(SELECT schema_version FROM pragma_schema_version)`

// markGate shares mark reads between concurrent callers.
type markGate struct {
	mu      sync.Mutex
	running bool       // a read is under way
	next    *markRound // the read that starts after it: callers that arrived meanwhile
	reads   atomic.Int64
}

type markRound struct {
	done  chan struct{}
	marks changeMarks
	err   error
}

// currentMarks returns marks read by a read transaction that began after
// the call.
func (db *DB) currentMarks(ctx context.Context) (changeMarks, error) {
	g := &db.marks
	g.mu.Lock()
	if g.next == nil {
		g.next = &markRound{done: make(chan struct{})}
	}
	r := g.next
	if !g.running {
		g.running, g.next = true, nil
		go db.runMarks(r)
	}
	g.mu.Unlock()
	select {
	case <-r.done:
		return r.marks, r.err
	case <-ctx.Done():
		return changeMarks{}, ctx.Err()
	}
}

// runMarks performs r and then every round that gathered while it ran.
func (db *DB) runMarks(r *markRound) {
	g := &db.marks
	for r != nil {
		// Shared by many callers, so bounded by its own deadline rather
		// than any one caller's context.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		r.err = db.queryRowCached(ctx, marksQuery).Scan(&r.marks.endpoints, &r.marks.keys, &r.marks.schema)
		cancel()
		g.reads.Add(1)
		close(r.done)
		g.mu.Lock()
		r, g.next = g.next, nil
		if r == nil {
			g.running = false
		}
		g.mu.Unlock()
	}
}

// endpointRefreshEvery bounds how often single reads bring the endpoint
// cache up to date: a refresh copies the snapshot's row pointers (80 KB for
// 10,000 endpoints), and under heartbeat traffic the change log moves every
// few milliseconds, so more often would cost more than the row reads it
// saves.
const endpointRefreshEvery = 100 * time.Millisecond

// cachedEndpoint returns a copy of the endpoint from the endpoint cache if
// the cache is current, loading or refreshing it at most every
// endpointRefreshEvery; ok is false when the caller must read the row.
func (db *DB) cachedEndpoint(ctx context.Context, id string) (e *app.Endpoint, ok bool, err error) {
	c := &db.endpointCache
	if c.uncacheable.Load() {
		return nil, false, nil
	}
	m, err := db.currentMarks(ctx)
	if err != nil {
		return nil, false, nil
	}
	snap := c.snap.Load()
	if snap == nil || m.endpoints != snap.seq || m.schema != snap.schema {
		now, last := time.Now().UnixNano(), c.refreshed.Load()
		if now-last < int64(endpointRefreshEvery) || !c.refreshed.CompareAndSwap(last, now) {
			return nil, false, nil
		}
		// Exact as of a read transaction after the marks, so after the call.
		if snap, err = db.endpointSnapshot(ctx); err != nil {
			return nil, false, nil
		}
	}
	i, found := slices.BinarySearchFunc(snap.rows, id, func(e *app.Endpoint, id string) int { return strings.Compare(e.ID, id) })
	if !found {
		return nil, true, app.NotFound("endpoint")
	}
	return copyEndpoints(snap.rows[i : i+1])[0], true, nil
}

// keyCache is every API key, as of snap's marks.
type keyCache struct {
	mu   sync.Mutex // one reload at a time
	snap atomic.Pointer[keySnapshot]
}

type keySnapshot struct {
	version, schema int64
	byID            map[string]*app.APIKey // never modified once published
}

// keyCacheMax is the number of keys beyond which they are not cached: a
// reload reads them all.
const keyCacheMax = 5000

var keyVersionTriggers = []string{"api_keys_version_insert", "api_keys_version_update", "api_keys_version_delete"}

// cachedKey returns a copy of the key from the key cache, reloading it when
// its version moved; ok is false when the caller must read the row (no
// triggers, too many keys, or a failure).
func (db *DB) cachedKey(ctx context.Context, id string) (k *app.APIKey, ok bool, err error) {
	m, err := db.currentMarks(ctx)
	if err != nil || m.keys < 0 {
		return nil, false, nil
	}
	snap := db.keyCache.snap.Load()
	if snap == nil || snap.version != m.keys || snap.schema != m.schema {
		if snap, err = db.reloadKeys(ctx); err != nil || snap == nil {
			return nil, false, nil
		}
	}
	k, found := snap.byID[id]
	if !found {
		return nil, true, app.NotFound("API key")
	}
	return copyKey(k), true, nil
}

// reloadKeys reads every key with the version and schema in one read
// transaction (later than the marks the caller saw) and publishes them. It
// returns nil when the keys must not be cached.
func (db *DB) reloadKeys(ctx context.Context) (*keySnapshot, error) {
	c := &db.keyCache
	c.mu.Lock()
	defer c.mu.Unlock()
	tx, err := db.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	var m changeMarks
	var triggers, count int
	if err := tx.QueryRowContext(ctx, marksQuery).Scan(&m.endpoints, &m.keys, &m.schema); err != nil {
		return nil, err
	}
	if old := c.snap.Load(); old != nil && old.version == m.keys && old.schema == m.schema {
		return old, nil // another caller reloaded meanwhile
	}
	if err := tx.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'api_keys' AND name IN (?, ?, ?)),
		(SELECT count(*) FROM api_keys)`, keyVersionTriggers[0], keyVersionTriggers[1], keyVersionTriggers[2]).Scan(&triggers, &count); err != nil {
		return nil, err
	}
	if triggers != len(keyVersionTriggers) || count > keyCacheMax || m.keys < 0 {
		c.snap.Store(nil)
		return nil, nil
	}
	keys, err := queryRows(ctx, tx, scanKey, `SELECT `+keyColumns+` FROM api_keys`)
	if err != nil {
		return nil, err
	}
	next := &keySnapshot{version: m.keys, schema: m.schema, byID: make(map[string]*app.APIKey, len(keys))}
	for _, k := range keys {
		next.byID[k.ID] = k
	}
	c.snap.Store(next)
	return next, nil
}

// copyKey returns a copy of a cached key that the caller owns.
func copyKey(k *app.APIKey) *app.APIKey {
	c := *k
	c.Scopes = slices.Clone(k.Scopes)
	for _, t := range []**app.Time{&c.ExpiresAt, &c.RevokedAt, &c.LastUsedAt} {
		if *t != nil {
			v := **t
			*t = &v
		}
	}
	return &c
}
