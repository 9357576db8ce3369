package store

import (
	"context"
	"database/sql"
)

// The hottest reads (the API key of every request, one endpoint) are
// prepared once and reused: modernc.org/sqlite compiles the SQL text anew
// for every un-prepared query, which was a fifth of the CPU time of an
// authenticated read. database/sql prepares a cached *sql.Stmt lazily on
// each pooled connection that runs it and closes it with the pool.

// queryRowCached is db.read.QueryRowContext through a statement prepared
// once per DB (db.stmts). Only constant SQL may be passed: the cache never
// evicts.
func (db *DB) queryRowCached(ctx context.Context, query string, args ...any) *sql.Row {
	stmts := &db.stmts
	if s, ok := stmts.Load(query); ok {
		return s.(*sql.Stmt).QueryRowContext(ctx, args...)
	}
	s, err := db.read.PrepareContext(ctx, query)
	if err != nil {
		// Let QueryRowContext report the error the usual way.
		return db.read.QueryRowContext(ctx, query, args...)
	}
	if prev, loaded := stmts.LoadOrStore(query, s); loaded {
		s.Close()
		s = prev.(*sql.Stmt)
	}
	return s.QueryRowContext(ctx, args...)
}
