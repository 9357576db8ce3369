package store

import (
	"context"
	"time"
)

// ReleaseMemory gives back what an idle appliance need not hold: the
// endpoint cache, the read pool's idle connections (each with a page cache
// of up to 2 MB that SQLite fills and keeps), and the writer's page cache
// (PRAGMA shrink_memory). Everything is rebuilt on demand: the next listing
// reloads the endpoints, the pool opens connections again (re-preparing
// cached statements on them). Connections in use are not touched.
func (db *DB) ReleaseMemory(ctx context.Context) error {
	db.ReleaseEndpointCache()
	n := db.read.Stats().MaxOpenConnections
	db.read.SetMaxIdleConns(0) // closes the idle connections now
	db.read.SetMaxIdleConns(n)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second) // never queue long behind a writer
	defer cancel()
	_, err := db.write.ExecContext(ctx, "PRAGMA shrink_memory")
	return err
}
