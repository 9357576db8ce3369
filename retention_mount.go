package main

import (
	"context"
	"log/slog"
	"path/filepath"

	"backstop/agentapi"
	"backstop/agentapi/resticrepo"
	"backstop/app"
	"backstop/app/archive"
	"backstop/app/jobs"
	"backstop/app/resticcmd"
	"backstop/app/retention"
	"backstop/store"
)

// mountRetention registers retention runs with the runner (CONTRACT §11):
// snapshots is the blob store's catalogue, nil until the blob store is
// wired (that phase of a run is then skipped); endpoint repositories are
// pruned with restic (tools.restic) run locally against the repository
// directory with the appliance's copy of its password, like verify, with
// temporary directories under data_dir/tmp, under the endpoint's lease
// shared with verify runs (a prune and a verify never overlap). After a prune the repository
// server recounts that repository's quota. The archive, when set, purges
// its expired messages first (CONTRACT §14). It removes what a crashed run
// left behind. Schedules are synced by syncRetentionSchedules once the
// server is up.
func mountRetention(runner *jobs.Runner, db *store.DB, cfg app.Config, repos *resticrepo.Handler, leases *resticcmd.Leases,
	snapshots retention.Snapshots, arch *archive.Service, logger *slog.Logger) error {
	var purger retention.ArchivePurger
	if arch != nil {
		purger = arch
	}
	r := retention.New(retention.Config{
		Restic: cfg.Tools.Restic, TempDir: filepath.Join(cfg.DataDir, "tmp"),
		Locate: func(id string) (string, string) {
			return agentapi.RepositoryDir(cfg.DataDir, id), agentapi.RepositoryPasswordFile(cfg.DataDir, id)
		},
		Tenants: db, Endpoints: db, Policies: db, Snapshots: snapshots, Leases: leases, Pruned: repos.Rescan,
		Archive: purger,
		Logger:  logger.With("component", "retention"),
	})
	runner.Register(r.Kind())
	return r.RemoveStale()
}

// syncRetentionSchedules gives tenants created since the last call their
// nightly retention schedule (02:30 UTC), reloading the runner's schedules
// only when something changed. serve runs it at start-up and every few
// minutes, next to the verify schedules.
func syncRetentionSchedules(runner *jobs.Runner, db *store.DB, logger *slog.Logger) {
	ctx := context.Background()
	changed, err := retention.SyncSchedules(ctx, db, db)
	if err == nil && changed {
		err = runner.ReloadSchedules(ctx)
	}
	if err != nil {
		logger.Error("syncing retention schedules failed", slog.Any("error", err))
	}
}
