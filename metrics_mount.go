package main

import (
	"log/slog"

	"backstop/app/metrics"
	"backstop/app/targets"
	"backstop/store"
)

// newMetrics builds the metrics registry: jobs waiting and running and the
// storage targets are read from the catalogue at scrape time (the targets'
// last checked state: a scrape never waits on a target); job ends, webhook
// attempts and HTTP requests are fed to it by the runner, the dispatcher,
// the agent API hook and restapi. restapi decides who may scrape
// (metrics.token, metrics.allow).
func newMetrics(db *store.DB, storage *targets.Manager, logger *slog.Logger) *metrics.Metrics {
	return metrics.New(metrics.Sources{Jobs: db, Storage: storage, Logger: logger.With("component", "metrics")})
}
