// Package store implements the app service interfaces on SQLite through
// modernc.org/sqlite (no cgo).
//
// One file, two handles: a writer with a single connection and
// _txlock=immediate, so writers queue in Go instead of failing with
// SQLITE_BUSY, and a reader pool opened with _query_only. Every connection
// gets its pragmas from the DSN (busy_timeout, WAL, synchronous NORMAL,
// foreign keys). In WAL mode with synchronous NORMAL a committed transaction
// survives a process crash (kill -9); only an OS crash or power loss can take
// the last commits back. Times are stored as INTEGER Unix milliseconds.
//
// Migrations are numbered .sql files embedded in the binary, applied in
// order, each in its own transaction, and recorded in schema_migrations.
// A landed migration is never edited; a change is a new file.
package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"backstop/app"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// DB is the appliance's database.
type DB struct {
	Path string
	Now  app.Clock
	// ExternalCheckpoints is set when another component owns WAL
	// checkpoints: the catalogue replica (Litestream), which holds a read
	// transaction open and checkpoints after copying the WAL. Maintain then
	// skips its TRUNCATE checkpoint. Set it before Maintain can run.
	ExternalCheckpoints bool

	write  *sql.DB
	read   *sql.DB
	audit  *auditWriter
	cancel context.CancelFunc
	wg     sync.WaitGroup

	stmts sync.Map // SQL text -> *sql.Stmt prepared on the read pool (stmtcache.go)

	endpointCache endpointCache // every endpoint, kept exact through a change log (endpoint_cache.go)
	keyCache      keyCache      // every API key, kept exact through a version counter (read_cache.go)
	marks         markGate      // shared reads of how far those have gone (read_cache.go)

	touchMu sync.Mutex
	touched map[string]time.Time // key id -> last lastUsedAt written

	eventsCommitted atomic.Pointer[func()] // OnEventsCommitted's hook
	txEvents        sync.Map               // *sql.Tx -> struct{}: the write transaction added an event
}

// OnEventsCommitted sets fn to be called after each write transaction that
// added events to the outbox has committed: whatever the producer (a job's
// end, an agent's run, a replay), the webhook dispatcher hears of it at
// once, without polling. fn must not block.
func (db *DB) OnEventsCommitted(fn func()) { db.eventsCommitted.Store(&fn) }

// Open opens (creating if needed) the database file at path, checks that WAL
// is in effect, applies pending migrations and starts the audit writer.
func Open(ctx context.Context, path string) (*DB, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	pragmas := url.Values{}
	for _, p := range []string{"busy_timeout(10000)", "journal_mode(WAL)", "synchronous(NORMAL)", "foreign_keys(ON)"} {
		pragmas.Add("_pragma", p)
	}
	base := "file:" + (&url.URL{Path: abs}).EscapedPath() + "?"
	write, err := sql.Open("sqlite", base+pragmas.Encode()+"&_txlock=immediate")
	if err != nil {
		return nil, err
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)

	db := &DB{Path: abs, Now: app.SystemClock, write: write, touched: map[string]time.Time{}}
	var mode string
	if err := write.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		write.Close()
		return nil, fmt.Errorf("open database %s: %w", abs, err)
	}
	if mode != "wal" {
		write.Close()
		return nil, fmt.Errorf("open database %s: journal_mode is %q, want wal", abs, mode)
	}
	if err := db.migrate(ctx); err != nil {
		write.Close()
		return nil, err
	}
	pragmas.Add("_pragma", "query_only(1)")
	read, err := sql.Open("sqlite", base+pragmas.Encode())
	if err != nil {
		write.Close()
		return nil, err
	}
	n := max(4, runtime.NumCPU()*2)
	read.SetMaxOpenConns(n)
	read.SetMaxIdleConns(n)
	db.read = read

	wctx, cancel := context.WithCancel(context.Background())
	db.cancel = cancel
	db.audit = newAuditWriter(db)
	db.wg.Add(1)
	go func() { defer db.wg.Done(); db.audit.run(wctx) }()
	db.wg.Add(1)
	go func() { defer db.wg.Done(); db.pruneEndpointChangesEvery(wctx, time.Minute) }()
	return db, nil
}

// Close stops the audit writer (flushing what it holds) and closes both
// handles. The WAL is checkpointed by SQLite when the last connection closes.
func (db *DB) Close() error {
	if db.audit != nil {
		db.audit.mu.Lock()
		db.audit.closed = true
		db.audit.mu.Unlock()
	}
	if db.cancel != nil {
		db.cancel()
	}
	db.wg.Wait()
	var errs []error
	if db.read != nil {
		errs = append(errs, db.read.Close())
	}
	errs = append(errs, db.write.Close())
	return errors.Join(errs...)
}

// Ping checks that the database answers a read and a write transaction.
func (db *DB) Ping(ctx context.Context) error {
	if err := db.read.PingContext(ctx); err != nil {
		return err
	}
	var one int
	return db.write.QueryRowContext(ctx, "SELECT 1").Scan(&one)
}

// Maintain runs the nightly housekeeping: PRAGMA optimize, a truncating WAL
// checkpoint, and removal of expired sessions.
//
// With ExternalCheckpoints the checkpoint is left to its owner. Litestream's
// read transaction would make TRUNCATE wait, holding the write lock, for the
// whole busy timeout (10 s of stalled writes) and then give up; and a WAL
// reset that slips in while Litestream swaps its locks forces it to upload a
// fresh snapshot. Litestream keeps the WAL small itself (PASSIVE checkpoints
// every minute, TRUNCATE past ~500 MB).
func (db *DB) Maintain(ctx context.Context) error {
	if _, err := db.write.ExecContext(ctx, "DELETE FROM sessions WHERE expires_at < ?", db.Now().UnixMilli()); err != nil {
		return err
	}
	if _, err := db.write.ExecContext(ctx, "PRAGMA optimize"); err != nil {
		return err
	}
	if db.ExternalCheckpoints {
		return nil
	}
	_, err := db.write.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)")
	return err
}

// WriteTx runs fn in a write transaction (BEGIN IMMEDIATE), committing when
// fn returns nil.
func (db *DB) WriteTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	defer db.txEvents.Delete(tx)
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	if _, added := db.txEvents.Load(tx); added {
		if fn := db.eventsCommitted.Load(); fn != nil {
			(*fn)()
		}
	}
	return nil
}

// Reader returns the read-only pool, for packages that extend the store.
func (db *DB) Reader() *sql.DB { return db.read }

func (db *DB) migrate(ctx context.Context) error {
	if _, err := db.write.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, name := range names {
		base := filepath.Base(name)
		version, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
		if err != nil {
			return fmt.Errorf("migrate: %s: name must start with a number", base)
		}
		err = db.WriteTx(ctx, func(tx *sql.Tx) error {
			var n int
			if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM schema_migrations WHERE version = ?", version).Scan(&n); err != nil || n > 0 {
				return err
			}
			body, err := migrationFS.ReadFile(name)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, string(body)); err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
				version, base, time.Now().UnixMilli())
			return err
		})
		if err != nil {
			return fmt.Errorf("migrate %s: %w", base, err)
		}
	}
	return nil
}

// querier is a *sql.DB or a *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// queryRows runs q and returns every row converted by scan.
func queryRows[T any](ctx context.Context, qr querier, scan func(scanner) (T, error), q string, args ...any) ([]T, error) {
	rows, err := qr.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// convertError turns driver errors into app errors by SQLite result code.
func convertError(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return &app.Error{Code: app.ECONFLICT, Message: "already exists"}
		case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
			return &app.Error{Code: app.EINVALID, Message: "refers to something that does not exist"}
		}
	}
	return err
}

// ms converts a time to stored milliseconds; nil and zero times become NULL.
func ms(t *time.Time) any {
	if t == nil || t.IsZero() {
		return nil
	}
	return t.UnixMilli()
}

// fromMs converts stored milliseconds back to a UTC time.
func fromMs(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := time.UnixMilli(v.Int64).UTC()
	return &t
}

func msTime(v int64) time.Time { return time.UnixMilli(v).UTC() }

// msA and fromMsA are ms and fromMs for the API's app.Time.
func msA(t *app.Time) any {
	if t == nil {
		return nil
	}
	return ms(&t.Time)
}

func fromMsA(v sql.NullInt64) *app.Time { return app.AtPtr(fromMs(v)) }
