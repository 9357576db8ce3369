package main

import (
	"context"
	"log/slog"
	"path/filepath"

	"backstop/agentapi"
	"backstop/app"
	"backstop/app/jobs"
	"backstop/app/resticcmd"
	"backstop/app/verify"
	"backstop/store"
)

// mountVerify registers verify runs of endpoints with the runner: restic
// (tools.restic) run locally against the endpoint's repository directory
// with the appliance's copy of its password, temporary restores under
// data_dir/tmp. It removes what a crashed run left there. Schedules are
// synced by syncVerifySchedules once the server is up, so a large appliance
// does not wait for them before it answers.
func mountVerify(runner *jobs.Runner, db *store.DB, cfg app.Config, leases *resticcmd.Leases, logger *slog.Logger) error {
	v := verify.New(verify.Config{
		Restic: cfg.Tools.Restic, TempDir: filepath.Join(cfg.DataDir, "tmp"),
		Locate: func(id string) (string, string) {
			return agentapi.RepositoryDir(cfg.DataDir, id), agentapi.RepositoryPasswordFile(cfg.DataDir, id)
		},
		Endpoints: db, Samples: db, Reports: db, Leases: leases, Logger: logger.With("component", "verify"),
	})
	runner.Register(v.Kind())
	return v.RemoveStale()
}

// syncVerifySchedules gives endpoints backed up since the last call their
// verify schedule (and drops revoked ones'), reloading the runner's
// schedules only when something changed. serve runs it every few minutes.
func syncVerifySchedules(runner *jobs.Runner, db *store.DB, logger *slog.Logger) {
	ctx := context.Background()
	changed, err := verify.SyncSchedules(ctx, db, db)
	if err == nil && changed {
		err = runner.ReloadSchedules(ctx)
	}
	if err != nil {
		logger.Error("syncing verify schedules failed", slog.Any("error", err))
	}
}
