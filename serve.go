package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"backstop/agentapi"
	"backstop/agentapi/resticrepo"
	"backstop/app"
	"backstop/app/jobs"
	"backstop/app/resticcmd"
	"backstop/app/update"
	"backstop/app/webhooks"
	"backstop/assets"
	"backstop/restapi"
	"backstop/store"

	"github.com/robfig/cron/v3"
	"golang.org/x/crypto/acme/autocert"
)

func version() string { return app.Version }

// serve runs the appliance until ctx ends (SIGINT/SIGTERM), then shuts down
// in order: stop accepting and finish requests, stop background work, close
// the database.
func serve(ctx context.Context, args []string, e env) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	file, dataDir := configFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig(*file, *dataDir, e.getenv)
	if err != nil {
		return err
	}
	logger := newLogger(cfg, e)
	started := time.Now()
	if limit := app.ApplyMemoryLimit(cfg.Memory.SoftLimitMiB); limit != math.MaxInt64 {
		logger.Info("memory soft limit", "mib", limit>>20)
	}

	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	db, err := store.Open(ctx, filepath.Join(cfg.DataDir, "backstop.db"))
	if err != nil {
		return err
	}
	stopReplica, err := mountReplica(ctx, db, cfg, logger)
	if err != nil {
		db.Close()
		return err
	}
	defer stopReplica() // deferred first, so it runs after db.Close (Litestream's rule)
	defer db.Close()
	if err := seedSettings(ctx, db, cfg); err != nil {
		return err
	}

	setupToken, err := setupLink(ctx, db, cfg, e, logger)
	if err != nil {
		return err
	}
	var proxies []netip.Prefix
	for _, p := range cfg.API.TrustedProxies {
		prefix, _ := app.ParsePrefix(p)
		proxies = append(proxies, prefix)
	}
	// Webhooks: secrets sealed with a key in the data directory, one guarded
	// HTTP client. The store wakes the dispatcher after every commit that
	// added events, whoever raised them.
	secretBox, err := webhooks.OpenSecretBox(cfg.DataDir)
	if err != nil {
		return err
	}
	guard := webhooks.NewGuard(cfg.Webhook.AllowPrivate)
	storage, blobs, err := mountStorage(db, secretBox, cfg, logger) // storage_mount.go
	if err != nil {
		return err
	}
	// Metrics (metrics_mount.go): always counted, served only when
	// metrics.token or metrics.allow is set.
	stats := newMetrics(db, storage, logger)
	deliveries := &webhooks.Dispatcher{Store: db, Events: db, Box: secretBox, Client: guard.Client(),
		Logger: logger.With("component", "webhooks"), Attempted: stats.WebhookAttempted}
	db.OnEventsCommitted(deliveries.Notify)
	// Jobs: kinds register with the runner; the API submits and streams
	// through it. It starts (recovering interrupted jobs) after the listener.
	runner := jobs.New(jobs.Config{Store: db, Schedules: db, Logger: logger.With("component", "jobs"),
		Ended:   stats.JobEnded,
		Workers: map[string]int{app.QueueMailboxBackup: m365BackupWorkers, app.QueueDriveBackup: m365BackupWorkers}})
	for _, k := range agentapi.JobKinds(db, db) {
		runner.Register(k)
	}
	for _, k := range e.jobKinds { // tests replace kinds through this hook
		runner.Register(k)
	}
	// Agents report runs over /agent/v1 and end them in their own store
	// transaction: tell the live streams.
	agentJobChanged := runner.Broker().Publish
	// Verify runs and retention prunes of one endpoint's repository never
	// overlap: they share these leases.
	repoLeases := &resticcmd.Leases{}
	if err := mountVerify(runner, db, cfg, repoLeases, logger); err != nil {
		return err
	}
	protected := mountProtect(runner, db, secretBox, blobs, cfg, logger)                              // protect_mount.go
	archiveSvc, err := mountArchive(runner, db, blobs, newCaptureSources(protected, db), cfg, logger) // archive_mount.go
	if err != nil {
		return err
	}
	ui, err := assets.New()
	if err != nil {
		return err
	}
	api := restapi.New(restapi.Services{
		Tenants: db, Keys: db, Users: db, Audit: db, Endpoints: db, Enrollment: db, Settings: db, Versions: db, Jobs: db,
		Webhooks: &webhooks.Service{Store: db, Guard: guard, Box: secretBox, Notify: deliveries.Notify},
		Ping:     db.Ping,
		JobStore: db, JobRunner: runner, JobFeed: runner.Broker(), Events: db, VerifyReports: db, Retention: db, Maintenance: db,
		Storage: storage, ApplianceKey: readApplianceKey(cfg), ApplianceKeys: db,
		Sources: protected, Protected: db, Snapshots: protected, Directory: db, Protection: protected,
		ProtectionChanged: func() { syncProtectSchedules(runner, db, logger) },
		Archive:           archiveSvc,
	}, restapi.Options{
		Edition: cfg.Edition, PublicURL: cfg.PublicURL, DataDir: cfg.DataDir,
		RateLimit: cfg.API.RateLimit, RateWindow: cfg.API.RateWindow, TrustedProxies: proxies,
		SecureCookies: cfg.TLS.Mode != "off" || strings.HasPrefix(cfg.PublicURL, "https://"),
		Rules:         cfg.EndpointRules(), Logger: logger.With("component", "restapi"), SetupToken: setupToken,
		NotReady: testNotReady != "",
		UI:       ui, Metrics: stats.Handler(), MetricsToken: cfg.Metrics.Token, MetricsAllow: cfg.MetricsAllow(),
		ObserveRequest: stats.ObserveRequest,
	})

	front := http.NewServeMux()
	mountAgent(front, db, cfg, logger, agentJobChanged, stats.JobEnded)
	front.Handle("/", api)
	// The endpoints' restic repositories sit in front of the mux, which
	// would redirect unclean paths instead of refusing them.
	repos, err := resticrepo.New(resticrepo.Options{
		Dir: filepath.Join(cfg.DataDir, "agent", "restic"), Auth: resticrepo.EndpointAuthenticator{Endpoints: db},
		QuotaBytes: cfg.Endpoints.RepositoryQuotaBytes, Logger: logger.With("component", "resticrepo"),
	})
	if err != nil {
		return err
	}
	// Retention: the blob store's snapshots and the endpoint repositories.
	if err := mountRetention(runner, db, cfg, repos, repoLeases, blobSnapshots{blobs}, archiveSvc, logger); err != nil {
		return err
	}
	// Memory goes back to the OS after 30 s without a request (idle_trim.go).
	trimmer := newIdleTrimmer(30*time.Second, func() {
		if err := db.ReleaseMemory(context.Background()); err != nil {
			logger.Warn("releasing database memory failed", slog.Any("error", err))
		}
	}, api.ReleaseMemory)
	srv := &http.Server{
		Handler:           trimmer.Track(repos.Route(front)),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       5 * time.Minute, // agent uploads of pack files can be large
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.With("component", "http").Handler(), slog.LevelWarn),
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	ln, err = withTLS(ln, srv, cfg)
	if err != nil {
		return err
	}

	// Background work, started after the listener is open. Storage first:
	// a fresh install gets its default target before any job can run.
	if err := storage.Open(ctx); err != nil {
		ln.Close()
		return err
	}
	defer storage.Close() // after the runner's Close, before db.Close
	crons := cron.New(cron.WithLocation(time.UTC))
	crons.AddFunc("30 3 * * *", func() {
		if err := db.Maintain(context.Background()); err != nil {
			logger.Error("nightly database maintenance failed", slog.Any("error", err))
		}
	})
	crons.AddFunc("45 3 * * *", func() {
		if n, err := deliveries.Purge(context.Background()); err != nil {
			logger.Error("purging old webhook deliveries failed", slog.Any("error", err))
		} else if n > 0 {
			logger.Info("purged old webhook deliveries", slog.Int("deliveries", n))
		}
	})
	crons.Start()
	if err := runner.Open(ctx); err != nil {
		ln.Close()
		<-crons.Stop().Done()
		return err
	}
	defer runner.Close() // after the HTTP shutdown, before db.Close
	// Added once the runner is open: a reload before Open would start its cron twice.
	crons.AddFunc("*/10 * * * *", func() {
		syncVerifySchedules(runner, db, logger)
		syncRetentionSchedules(runner, db, logger)
		syncProtectSchedules(runner, db, logger)
		trimmer.Settle()
	})
	crons.AddFunc("7 * * * *", func() { syncM365Directories(protected, db, logger) })
	crons.AddFunc("0 0 * * *", func() { recordDailyCounts(db, db.Now(), false, logger) })
	crons.AddFunc("15 4 * * *", func() { scheduleArchiveVerify(runner, db, logger) })
	srv.RegisterOnShutdown(api.CloseStreams)
	// The archive: its SMTP listener and background work, stopped before
	// the runner and the database.
	stopArchive, err := startArchive(archiveSvc, cfg, srv.TLSConfig, logger)
	if err != nil {
		ln.Close()
		<-crons.Stop().Done()
		return err
	}
	defer stopArchive()

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	// The update checker makes no request while settings.updateCheck is off.
	checker := update.New(db, db, update.Options{APIURL: cfg.Update.APIURL, Repository: cfg.Update.Repository,
		Logger: logger})
	if err := checker.Open(); err != nil {
		srv.Close()
		<-crons.Stop().Done()
		return err
	}
	defer checker.Close() // deferred after db.Close, so it runs first
	restart := make(chan struct{})
	updater, err := startUpdater(cfg, db, api, ln.Addr().String(), logger, restart)
	if err != nil {
		srv.Close()
		<-crons.Stop().Done()
		return err
	}
	defer updater.Close()
	deliveries.Open()
	defer deliveries.Close() // before db.Close: in-flight attempts stay pending
	trimmer.Open()
	defer trimmer.Close()
	logger.Info("backstop serving", slog.String("addr", ln.Addr().String()), slog.String("version", app.Version),
		slog.String("edition", cfg.Edition), slog.String("data_dir", cfg.DataDir),
		slog.Duration("startup", time.Since(started)))
	if e.listening != nil {
		e.listening(ln.Addr().String())
	}
	syncVerifySchedules(runner, db, logger) // then every 10 minutes from cron
	syncRetentionSchedules(runner, db, logger)
	syncProtectSchedules(runner, db, logger)
	recordDailyCounts(db, db.Now(), true, logger) // then at 00:00 UTC from cron

	var exitErr error
	select {
	case err := <-errc:
		<-crons.Stop().Done()
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	case <-restart:
		exitErr = errRestart
	}
	logger.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		logger.Warn("http shutdown incomplete", slog.Any("error", err))
	}
	<-crons.Stop().Done()
	return exitErr
}

func newLogger(cfg app.Config, e env) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.Log.Level))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(e.stderr, opts))
	}
	return slog.New(slog.NewTextHandler(e.stderr, opts))
}

// seedSettings applies update.check/update.channel from the file: setting
// update.check true in YAML is the operator turning the check on.
func seedSettings(ctx context.Context, db *store.DB, cfg app.Config) error {
	_, err := db.UpdateSettings(ctx, func(s *app.Settings) error {
		if cfg.Update.Check && !s.UpdateCheck {
			s.UpdateCheck, s.UpdateCheckEnabledAt = true, app.Ptr(db.Now())
		}
		if cfg.Update.Channel != "stable" {
			s.UpdateChannel = cfg.Update.Channel
		}
		return nil
	})
	return err
}

// setupLink prints a one-time link for the first administrator while none
// exists. The token lives only in memory: each start prints a new one.
func setupLink(ctx context.Context, db *store.DB, cfg app.Config, e env, logger *slog.Logger) (string, error) {
	n, err := db.CountUsers(ctx)
	if err != nil || n > 0 {
		return "", err
	}
	token := app.RandomToken(32)
	base := strings.TrimRight(cfg.PublicURL, "/")
	if base == "" {
		host, port, _ := net.SplitHostPort(cfg.Listen)
		if host == "" || host == "0.0.0.0" || host == "::" {
			host = "localhost"
		}
		scheme := "http"
		if cfg.TLS.Mode != "off" {
			scheme = "https"
		}
		base = scheme + "://" + net.JoinHostPort(host, port)
	}
	fmt.Fprintf(e.stderr, "\nNo administrator exists yet. Open this one-time link to create the first one:\n\n    %s/setup#token=%s\n\n"+
		"(or run: backstop admin create-user --email you@example.com)\n\n", base, token)
	logger.Info("first-run setup link printed")
	return token, nil
}

// withTLS wraps the listener according to tls.mode.
func withTLS(ln net.Listener, srv *http.Server, cfg app.Config) (net.Listener, error) {
	switch cfg.TLS.Mode {
	case "files":
		cert, err := tls.LoadX509KeyPair(cfg.TLS.CertFile, cfg.TLS.KeyFile)
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("tls: %w", err)
		}
		srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	case "auto":
		m := &autocert.Manager{
			Prompt:     autocert.AcceptTOS,
			HostPolicy: autocert.HostWhitelist(cfg.TLS.Hosts...),
			Cache:      autocert.DirCache(filepath.Join(cfg.DataDir, "autocert")),
			Email:      cfg.TLS.Email,
		}
		srv.TLSConfig = m.TLSConfig() // answers TLS-ALPN-01 challenges on this port
		srv.TLSConfig.MinVersion = tls.VersionTLS12
	default:
		return ln, nil
	}
	return tls.NewListener(ln, srv.TLSConfig), nil
}
