package main

import (
	"context"
	"log/slog"
	"time"

	"backstop/app"
	"backstop/app/blobstore"
	"backstop/app/graph"
	"backstop/app/imapbackup"
	"backstop/app/jobs"
	"backstop/app/m365"
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

	// The Microsoft 365 engine (app/m365) and the Graph client's
	// constructor, likewise.
	m365Engine = protect.M365Engine{Check: m365.Check, ConsentURL: m365.ConsentURL, SyncDirectory: m365.SyncDirectory,
		BackupMailbox: m365.BackupMailbox, BackupDrive: m365.BackupDrive, RestoreMail: m365.RestoreMail,
		RestoreFiles: m365.RestoreFiles, NewClient: graph.New}
)

// m365BackupWorkers is the pool size of the mailbox_backup and
// drive_backup queues: many mailboxes back up in parallel, and
// graph.max_concurrency bounds the requests they make together.
const m365BackupWorkers = 32

// mountProtect builds the protected-object layer: IMAP and Microsoft 365
// sources (passwords and client secrets sealed with the data directory's
// secrets key, like webhook and S3 secrets; one Graph budget of
// graph.max_concurrency requests for every tenant), the backup kind
// (queues imap_backup, mailbox_backup, drive_backup), the protected-object
// verify and restore kinds and the directory_sync kind on the runner, and
// snapshot browsing over the blob store. Schedules are synced
// by syncProtectSchedules: after every change of sources or protection,
// and every 10 minutes from serve's cron.
func mountProtect(runner *jobs.Runner, db *store.DB, box *webhooks.SecretBox, blobs *blobstore.Store, cfg app.Config, logger *slog.Logger) *protect.Manager {
	sync := func() { syncProtectSchedules(runner, db, logger) }
	m := protect.New(protect.Config{Sources: db, Objects: db, Box: box, Blobs: blobs, Catalog: db,
		Engine:           protect.Engine{Check: imapCheck, Backup: imapBackup, Restore: imapRestore},
		M365:             m365Engine,
		Directory:        db,
		Jobs:             runner,
		GraphLimits:      graph.NewLimits(cfg.Graph.MaxConcurrency),
		SchedulesChanged: sync, Logger: logger.With("component", "protect")})
	runner.Register(m.BackupKind())
	runner.Register(m.SyncKind())
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

// syncM365Directories queues a directory sync of every enabled Microsoft
// 365 source (hourly from serve's cron); a source whose sync is still
// queued or running is skipped.
func syncM365Directories(m *protect.Manager, db *store.DB, logger *slog.Logger) {
	ctx := context.Background()
	srcs, err := db.Sources(ctx, app.SourceFilter{})
	if err != nil {
		logger.Error("listing sources for the directory sync failed", slog.Any("error", err))
		return
	}
	for _, src := range srcs {
		if src.Kind != app.SourceM365 || src.Disabled {
			continue
		}
		if _, err := db.ActiveJobFor(ctx, app.ActionSync, app.TargetSource, src.ID); err == nil {
			continue
		}
		if _, err := m.SubmitSync(ctx, src, app.TriggerSchedule); err != nil {
			logger.Error("queueing a directory sync failed", slog.String("source_id", src.ID), slog.Any("error", err))
		}
	}
}

// recordDailyCounts stores today's (UTC) billing counts of every tenant:
// at 00:00 UTC from serve's cron, and at start-up when today has no row
// yet (an appliance that was off at midnight). Recording twice replaces.
func recordDailyCounts(db *store.DB, now time.Time, onlyIfMissing bool, logger *slog.Logger) {
	ctx := context.Background()
	day := now.UTC().Format(time.DateOnly)
	if onlyIfMissing {
		if has, err := db.HasDailyCounts(ctx, day); err != nil || has {
			if err != nil {
				logger.Error("reading the daily directory counts failed", slog.Any("error", err))
			}
			return
		}
	}
	if err := db.RecordDailyCounts(ctx, day); err != nil {
		logger.Error("recording the daily directory counts failed", slog.String("date", day), slog.Any("error", err))
	}
}
