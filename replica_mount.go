package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"backstop/app"
	"backstop/app/replica"
	"backstop/store"
)

// mountReplica starts continuous replication of the catalogue when
// backup.replica_url is set, and returns the function that stops it (a
// no-op when it is not set). serve calls it right after the database is
// open and must call stop only after db.Close: Litestream must outlive the
// store's connections (see replica.Replicator.Close).
func mountReplica(ctx context.Context, db *store.DB, cfg app.Config, logger *slog.Logger) (stop func(), err error) {
	if cfg.Backup.ReplicaURL == "" {
		return func() {}, nil
	}
	r, err := replica.New(replica.Config{URL: cfg.Backup.ReplicaURL, DBPath: db.Path, Logger: logger.With("component", "replica")})
	if err != nil {
		return nil, fmt.Errorf("config: backup.replica_url: %w", err)
	}
	if err := r.Open(ctx); err != nil {
		return nil, err
	}
	db.ExternalCheckpoints = true // Litestream checkpoints; see store.DB.Maintain
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		r.Close(sctx) // logs an incomplete final upload itself
	}, nil
}
