package main

import (
	"context"
	"log/slog"

	"backstop/app"
	"backstop/app/blobstore"
	"backstop/app/imapbackup"
	"backstop/app/jobs"
	"backstop/app/protect"
	"backstop/app/webhooks"
	"backstop/store"
)

// The IMAP engine's entry points (app/imapbackup), as variables so tests
// of the root package can set fakes.
var (
	imapCheck   = imapbackup.Check
	imapBackup  = imapbackup.Backup
	imapRestore = imapbackup.Restore
)

// mountProtect builds the protected-object layer: IMAP sources (passwords
// sealed with the data directory's secrets key, like webhook and S3
// secrets), the imap_backup and protected-object verify kinds on the
// runner, and snapshot browsing over the blob store. Schedules are synced
// by syncProtectSchedules: after every change of sources or protection,
// and every 10 minutes from serve's cron.
func mountProtect(runner *jobs.Runner, db *store.DB, box *webhooks.SecretBox, blobs *blobstore.Store, logger *slog.Logger) *protect.Manager {
	sync := func() { syncProtectSchedules(runner, db, logger) }
	m := protect.New(protect.Config{Sources: db, Objects: db, Box: box, Blobs: blobs, Catalog: db,
		Engine:           protect.Engine{Check: imapCheck, Backup: imapBackup, Restore: imapRestore},
		SchedulesChanged: sync, Logger: logger.With("component", "protect")})
	runner.Register(m.BackupKind())
	runner.Register(m.VerifyKind())
	runner.Register(m.RestoreKind())
	return m
}

// syncProtectSchedules gives every protected object its backup and verify
// schedules and drops those of objects that no longer qualify, reloading
// the runner's schedules only when something changed.
func syncProtectSchedules(runner *jobs.Runner, db *store.DB, logger *slog.Logger) {
	ctx := context.Background()
	changed, err := protect.SyncSchedules(ctx, db, db)
	if err == nil && changed {
		err = runner.ReloadSchedules(ctx)
	}
	if err != nil && app.ErrorCode(err) != app.ENOTFOUND {
		logger.Error("syncing protected-object schedules failed", slog.Any("error", err))
	}
}
