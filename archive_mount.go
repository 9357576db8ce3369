package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"backstop/app"
	"backstop/app/archive"
	"backstop/app/archive/chain"
	"backstop/app/blobstore"
	"backstop/app/jobs"
	"backstop/store"
)

// mountArchive makes the email archive (CONTRACT §14): the checkpoint
// signer key data_dir/archive.key (named after the public host, created on
// first use), the Service on the catalogue and the blob store, and the
// archive_verify job kind. serve starts it with startArchive after the
// runner is open.
func mountArchive(runner *jobs.Runner, db *store.DB, blobs *blobstore.Store, cfg app.Config, logger *slog.Logger) (*archive.Service, error) {
	host := publicHost(cfg)
	signer, err := chain.LoadOrCreateSigner(filepath.Join(cfg.DataDir, "archive.key"), host)
	if err != nil {
		return nil, err
	}
	domain := cfg.Archive.SMTPDomain
	if domain == "" && cfg.PublicURL != "" {
		domain = host
	}
	svc, err := archive.New(archive.Config{
		Store: db, Blobs: blobs, DataDir: cfg.DataDir, Signer: signer,
		Origin:     func(tenantID string) string { return host + "/archive/" + tenantID },
		TSAURL:     cfg.Archive.TSAURL,
		HTTP:       &http.Client{Timeout: 30 * time.Second},
		SMTPDomain: domain, MaxBytes: cfg.Archive.SMTPMaxBytes,
		Now: db.Now, Logger: logger.With("component", "archive"),
	})
	if err != nil {
		return nil, err
	}
	runner.Register(archiveVerifyKind(svc, db))
	return svc, nil
}

// publicHost is the host of public_url, else the machine's host name.
func publicHost(cfg app.Config) string {
	if u, err := url.Parse(cfg.PublicURL); err == nil && u.Hostname() != "" {
		return u.Hostname()
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "backstop"
}

// archiveVerifyKind is the archive_verify job: target type archive, target
// id the tenant id.
func archiveVerifyKind(svc *archive.Service, db *store.DB) jobs.Kind {
	return jobs.Kind{
		Action: app.ActionVerify, TargetType: archive.TargetArchive, Queue: app.QueueArchiveVerify, MaxAttempts: 1,
		Resolve: func(ctx context.Context, tenantID, targetID string, _ json.RawMessage) (app.JobTarget, error) {
			if tenantID != "" && targetID != tenantID {
				return app.JobTarget{}, app.NotFound("archive")
			}
			t, err := db.Tenant(ctx, targetID)
			if err != nil {
				return app.JobTarget{}, err
			}
			return app.JobTarget{Type: archive.TargetArchive, ID: t.ID, DisplayName: "Archive of " + t.Name}, nil
		},
		Run: func(ctx context.Context, r *jobs.Run) (*jobs.Outcome, error) {
			r.Progress(ctx, app.JobProgress{Phase: "verifying"})
			_, err := svc.VerifyChain(ctx, r.Job.Target.ID, r.Job.ID, func(done, total int64) {
				pct := 100
				if total > 0 {
					pct = int(done * 100 / total)
				}
				r.Progress(ctx, app.JobProgress{Phase: "verifying", Percent: pct, BytesDone: done, BytesTotal: total})
			})
			if err != nil {
				return nil, err
			}
			return &jobs.Outcome{}, nil
		},
	}
}

// startArchive runs the archive's background work and, when
// archive.smtp_listen is set, the SMTP journal listener (STARTTLS with
// tlsConfig when TLS is on). The returned stop closes the listener
// (letting sessions in progress finish for up to 30 s), then the
// background work; serve calls it before the runner and the database close.
func startArchive(svc *archive.Service, cfg app.Config, tlsConfig *tls.Config, logger *slog.Logger) (stop func(), err error) {
	var smtpSrv *archive.SMTPServer
	if cfg.Archive.SMTPListen != "" {
		if smtpSrv, err = svc.ListenSMTP(cfg.Archive.SMTPListen, tlsConfig); err != nil {
			return nil, err
		}
		logger.Info("archive SMTP journal intake listening", slog.String("addr", smtpSrv.Addr().String()),
			slog.Bool("starttls", tlsConfig != nil))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); svc.Run(ctx) }()
	return func() {
		if smtpSrv != nil {
			sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
			if err := smtpSrv.Close(sctx); err != nil {
				logger.Warn("archive SMTP shutdown incomplete", slog.Any("error", err))
			}
			scancel()
		}
		cancel()
		<-done
	}, nil
}

// scheduleArchiveVerify queues the daily archive_verify job of every tenant
// with records (serve's cron).
func scheduleArchiveVerify(runner *jobs.Runner, db *store.DB, logger *slog.Logger) {
	ctx := context.Background()
	tenants, err := db.ArchiveTenants(ctx)
	if err != nil {
		logger.Error("listing archive tenants failed", slog.Any("error", err))
		return
	}
	for _, t := range tenants {
		if _, err := db.ActiveJobFor(ctx, app.ActionVerify, archive.TargetArchive, t); err == nil {
			continue
		}
		if _, err := runner.Submit(ctx, app.JobRequest{TenantID: t, Action: app.ActionVerify, TargetType: archive.TargetArchive,
			TargetID: t, Trigger: app.TriggerSchedule}); err != nil {
			logger.Error("queueing the archive verification failed", slog.String("tenantId", t), slog.Any("error", err))
		}
	}
}
