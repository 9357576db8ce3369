package main

import (
	"backstop/app/archive"
	"context"
	"log/slog"
	"path/filepath"

	"backstop/agentapi"
	"backstop/agentapi/resticrepo"
	"backstop/app"
	"backstop/app/jobs"
	"backstop/app/retention"
	"backstop/store"
)

// mountRetention registers retention runs with the runner (CONTRACT §11):
// snapshots is the blob store's catalogue, nil until the blob store is
// wired (that phase of a run is then skipped); endpoint repositories are
// pruned with restic (tools.restic) run locally against the repository
// directory with the appliance's copy of its password, like verify, with
// temporary directories under data_dir/tmp. After a prune the repository
// server recounts that repository's quota. It removes what a crashed run
// left behind. Schedules are synced by syncRetentionSchedules once the
// server is up. archive, when not nil, purges each tenant's expired
// archive messages in the same run (CONTRACT §14).
func mountRetention(runner *jobs.Runner, db *store.DB, cfg app.Config, repos *resticrepo.Handler,
	snapshots retention.Snapshots, archive retention.ArchivePurger, logger *slog.Logger) error {
	r := retention.New(retention.Config{
		Restic: cfg.Tools.Restic, TempDir: filepath.Join(cfg.DataDir, "tmp"),
		Locate: func(id string) (string, string) {
			return agentapi.RepositoryDir(cfg.DataDir, id), agentapi.RepositoryPasswordFile(cfg.DataDir, id)
		},
		Tenants: db, Endpoints: db, Policies: db, Snapshots: snapshots, Jobs: db, Pruned: repos.Rescan, Archive: archive,
		Logger: logger.With("component", "retention"),
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

// archivePurger is svc as the retention job's archive step, or nil (a nil
// interface, not a nil pointer in one) when the appliance has no archive.
func archivePurger(svc *archive.Service) retention.ArchivePurger {
	if svc == nil {
		return nil
	}
	return svc
}
