package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"backstop/agentapi/wire"
)

// Agent runs backups and restores for one enrolled endpoint and reports them.
type Agent struct {
	StateDir string
	State    *State
	Client   *Client
	Spool    *Spool
	Logger   *slog.Logger
	Now      func() time.Time
	// Terminal, if set, receives a progress bar (a human at a terminal).
	Terminal io.Writer
	// ReportTimeout bounds the final report after an interruption, when the
	// process is about to exit (the spool keeps what does not make it).
	ReportTimeout time.Duration
	// Executable is the file self-update replaces; "" is os.Executable().
	Executable string
	// UpdateEvery is the pause between self-update checks (one runs at
	// start); 0 is DefaultUpdateEvery, negative turns self-update off.
	UpdateEvery time.Duration

	mu            sync.Mutex
	config        wire.Config
	resticVersion string // cached for heartbeats
}

// Open loads the state directory of an enrolled agent.
func Open(stateDir string, logger *slog.Logger) (*Agent, error) {
	st, err := LoadState(stateDir)
	if err != nil {
		return nil, err
	}
	cfg, err := loadConfig(stateDir)
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.Default()
	}
	c := newClient(st)
	return &Agent{
		StateDir: stateDir, State: st, Client: c, Logger: logger, Now: time.Now, ReportTimeout: 5 * time.Second,
		Spool:  &Spool{Dir: filepath.Join(stateDir, "spool"), Client: c, Logger: logger},
		config: cfg,
	}, nil
}

// Config returns the configuration in effect.
func (a *Agent) Config() wire.Config {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.config
}

// RefreshConfig fetches the configuration and caches it on disk; on error
// the cached one stays in effect.
func (a *Agent) RefreshConfig(ctx context.Context) (wire.Config, error) {
	cfg, err := a.Client.Config(ctx)
	if err != nil {
		return a.Config(), err
	}
	cfg = withConfigDefaults(cfg)
	a.mu.Lock()
	a.config = cfg
	a.mu.Unlock()
	return cfg, saveConfig(a.StateDir, cfg)
}

func (a *Agent) restic() (*Restic, error) {
	path, err := FindRestic(a.State.Restic, a.StateDir)
	if err != nil {
		return nil, err
	}
	r := &Restic{Path: path, Repository: a.State.Repository, User: a.State.EndpointID, Secret: a.State.Secret}
	return r, nil
}

// newRunID returns run_ + 12 hex digits of milliseconds + 20 random hex
// digits, so spooled reports sort by start.
func newRunID(now time.Time) string {
	var b [10]byte
	rand.Read(b[:])
	return fmt.Sprintf("run_%012x%s", now.UnixMilli(), hex.EncodeToString(b[:]))
}

// Backup runs one backup of the configured paths and reports it. The
// returned report is what was spooled; its State says how it went. The
// error is non-nil only when the report could not even be spooled.
func (a *Agent) Backup(ctx context.Context, trigger, commandID string) (wire.Finish, error) {
	return a.execute(ctx, wire.KindBackup, trigger, commandID, func(ctx context.Context, f *wire.Finish, progress func(wire.Progress)) error {
		cfg := a.Config()
		if len(cfg.Paths) == 0 {
			return &RunError{Failure: wire.Failure{Code: "agent.no_paths", Step: "prepare",
				Message: "no backup paths are configured for this endpoint"}}
		}
		r, err := a.restic()
		if err != nil {
			return err
		}
		if !a.State.RepositoryReady {
			progress(wire.Progress{Phase: "preparing"})
			if err := r.EnsureRepository(ctx); err != nil {
				return err
			}
			a.State.RepositoryReady = true
			if err := SaveState(a.StateDir, a.State); err != nil {
				a.Logger.Warn("saving state failed", slog.Any("error", err))
			}
		}
		progress(wire.Progress{Phase: "scanning"})
		cands := sampleCandidates(cfg.Paths, cfg.Excludes, cfg.SampleFiles)
		res, err := r.Backup(ctx, cfg.Paths, cfg.Excludes, progress)
		if err != nil {
			return err
		}
		progress(wire.Progress{Phase: "finalizing", Percent: 100})
		f.SnapshotID, f.Stats = res.SnapshotID, &res.Stats
		f.Sampled = sampleFiles(cands, cfg.SampleFiles)
		if res.Partial {
			f.State = wire.StatePartial
		}
		return nil
	})
}

// Restore runs a restore command and reports it.
func (a *Agent) Restore(ctx context.Context, cmd wire.Command) (wire.Finish, error) {
	return a.execute(ctx, wire.KindRestore, wire.TriggerCommand, cmd.ID, func(ctx context.Context, f *wire.Finish, progress func(wire.Progress)) error {
		r, err := a.restic()
		if err != nil {
			return err
		}
		snap := cmd.SnapshotID
		if snap == "" {
			snap = "latest"
		}
		if f.SnapshotID, err = r.ResolveSnapshot(ctx, snap); err != nil {
			return err
		}
		return r.Restore(ctx, f.SnapshotID, cmd.Target, cmd.Include, progress)
	})
}

type runBody func(ctx context.Context, f *wire.Finish, progress func(wire.Progress)) error

// execute registers a run, reports its progress at least every
// ProgressSeconds while body works, then spools and sends the report.
func (a *Agent) execute(ctx context.Context, kind, trigger, commandID string, body runBody) (wire.Finish, error) {
	start := wire.RunStart{RunID: newRunID(a.Now()), Kind: kind, Trigger: trigger, CommandID: commandID, StartedAt: a.Now().UTC()}
	log := a.Logger.With(slog.String("run_id", start.RunID), slog.String("kind", kind))
	log.Info("run started", slog.String("trigger", trigger))

	registered := false
	if ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		_, err := a.Client.StartRun(rctx, start)
		cancel()
		registered = err == nil
		if err != nil {
			log.Warn("appliance did not take the run start; the report will be spooled", slog.Any("error", err))
		}
	}

	rep := newReporter(a, start.RunID, registered, log)
	stop := rep.start(ctx, time.Duration(a.Config().ProgressSeconds)*time.Second)
	f := wire.Finish{Run: start, State: wire.StateSucceeded}
	err := body(ctx, &f, rep.update)
	stop()
	if a.Terminal != nil {
		fmt.Fprintln(a.Terminal)
	}

	f.FinishedAt = a.Now().UTC()
	var re *RunError
	switch {
	case err == nil:
	case errors.As(err, &re) && re.Interrupted:
		f.State, f.Stats, f.Sampled = wire.StateInterrupted, nil, nil
	case errors.As(err, &re):
		f.State, f.Failure = wire.StateFailed, &re.Failure
	default:
		f.State, f.Failure = wire.StateFailed, &wire.Failure{Code: "unknown", Message: err.Error(), Step: kind}
	}
	log.Info("run finished", slog.String("state", f.State), slog.String("snapshot_id", f.SnapshotID))
	if f.Failure != nil {
		log.Warn("run failed", slog.String("code", f.Failure.Code), slog.String("message", f.Failure.Message))
	}

	if err := a.Spool.Put(f); err != nil {
		return f, fmt.Errorf("spooling the run report: %w", err)
	}
	// Send now. After an interruption the process is stopping: use a fresh,
	// short context; what does not make it is sent after the restart.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.ReportTimeout)
	if ctx.Err() == nil {
		sctx, cancel = context.WithTimeout(ctx, 30*time.Second)
	}
	defer cancel()
	if _, err := a.Spool.Flush(sctx); err != nil {
		log.Warn("run report spooled; it will be sent when the appliance is reachable", slog.Any("error", err))
	}
	return f, nil
}

// reporter sends the newest progress of a run at a fixed interval, so the
// appliance hears from a run at least that often even when restic is quiet.
type reporter struct {
	a          *Agent
	runID      string
	registered bool
	log        *slog.Logger
	mu         sync.Mutex
	latest     wire.Progress
	bar        *progressBar
}

func newReporter(a *Agent, runID string, registered bool, log *slog.Logger) *reporter {
	r := &reporter{a: a, runID: runID, registered: registered, log: log}
	if a.Terminal != nil {
		r.bar = &progressBar{w: a.Terminal}
	}
	return r
}

func (r *reporter) update(p wire.Progress) {
	r.mu.Lock()
	if p.Percent == 0 && p.Phase == r.latest.Phase && r.latest.Percent > 0 {
		p.Percent = r.latest.Percent
	}
	r.latest = p
	r.mu.Unlock()
	if r.bar != nil {
		r.bar.draw(p)
	}
}

func (r *reporter) start(ctx context.Context, every time.Duration) (stop func()) {
	if !r.registered {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				r.mu.Lock()
				p := r.latest
				r.mu.Unlock()
				pctx, pcancel := context.WithTimeout(ctx, every*2)
				if err := r.a.Client.Progress(pctx, r.runID, p); err != nil && ctx.Err() == nil {
					r.log.Debug("progress report failed", slog.Any("error", err))
				}
				pcancel()
			}
		}
	}()
	return func() { cancel(); <-done }
}
