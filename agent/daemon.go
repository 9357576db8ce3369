package agent

import (
	"context"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"time"

	"backstop/agentapi/wire"

	"github.com/robfig/cron/v3"
)

// Run is the agent daemon (`backstop agent run`). It sends spooled reports,
// heartbeats every HeartbeatSeconds, follows config changes, runs scheduled
// backups and the backups and restores the appliance asks for, one run at a
// time. It returns when ctx ends; a run in progress is then interrupted
// (restic gets SIGINT and removes its lock) and reported as interrupted.
//
// At start and every UpdateEvery, between runs, it asks for a new agent
// build (SelfUpdate); once it has replaced its executable it returns
// ErrRestart.
func (a *Agent) Run(ctx context.Context) error {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	if _, err := a.Spool.Flush(ctx); err != nil {
		a.Logger.Warn("spooled run reports not sent yet", slog.Any("error", err))
	}
	if _, err := a.RefreshConfig(ctx); err != nil {
		a.Logger.Warn("config fetch failed; using the cached config", slog.Any("error", err))
	}

	work := make(chan wire.Command, 32)
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted := map[string]bool{} // command ids taken, so a repeat delivery is ignored
	running := false

	wg.Add(1)
	go func() { // the one worker: runs never overlap
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case cmd := <-work:
				mu.Lock()
				running = true
				mu.Unlock()
				a.runCommand(ctx, cmd)
				mu.Lock()
				running = false
				delete(accepted, cmd.ID)
				mu.Unlock()
			}
		}
	}()

	var knownConfig string
	heartbeat := func() (configChanged bool) {
		mu.Lock()
		var ids []string
		for id := range accepted {
			if id != "" {
				ids = append(ids, id)
			}
		}
		mu.Unlock()
		hctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		hb, err := a.Client.Heartbeat(hctx, a.heartbeatRequest(hctx, ids))
		if err != nil {
			if IsUnauthorized(err) {
				a.Logger.Error("the appliance refuses this endpoint's secret (revoked?)", slog.Any("error", err))
			} else {
				a.Logger.Warn("heartbeat failed", slog.Any("error", err))
			}
			return false
		}
		if hb.ConfigVersion != knownConfig {
			if _, err := a.RefreshConfig(hctx); err == nil {
				knownConfig, configChanged = hb.ConfigVersion, true
			}
		}
		if pending, _ := a.Spool.Pending(); len(pending) > 0 {
			a.Spool.Flush(hctx)
		}
		for _, c := range hb.Commands {
			mu.Lock()
			dup := accepted[c.ID]
			accepted[c.ID] = true
			mu.Unlock()
			if !dup {
				select {
				case work <- c:
				default:
					a.Logger.Warn("command queue full; the command will be offered again", slog.String("command_id", c.ID))
					mu.Lock()
					delete(accepted, c.ID)
					mu.Unlock()
				}
			}
		}
		return configChanged
	}

	heartbeat()
	hbTimer := time.NewTimer(a.heartbeatEvery())
	defer hbTimer.Stop()
	schedTimer := time.NewTimer(a.untilNextScheduled())
	defer schedTimer.Stop()
	var updateC <-chan time.Time // nil: self-update off
	updateTimer := time.NewTimer(0)
	defer updateTimer.Stop()
	if a.updateEvery() > 0 {
		updateC = updateTimer.C
	}
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return nil
		case <-updateC:
			mu.Lock()
			busy := running || len(work) > 0
			mu.Unlock()
			switch {
			case busy: // never replace the binary under a run; look again soon
				updateTimer.Reset(a.heartbeatEvery())
			case a.tryUpdate(ctx):
				stop()
				wg.Wait()
				return ErrRestart
			default:
				updateTimer.Reset(a.updateEvery())
			}
		case <-hbTimer.C:
			if heartbeat() { // the schedule may have changed
				if !schedTimer.Stop() {
					select {
					case <-schedTimer.C:
					default:
					}
				}
				schedTimer.Reset(a.untilNextScheduled())
			}
			hbTimer.Reset(a.heartbeatEvery())
		case <-schedTimer.C:
			mu.Lock()
			busy := running || len(work) > 0
			mu.Unlock()
			if busy {
				a.Logger.Info("scheduled backup skipped: a run is in progress")
			} else {
				work <- wire.Command{Kind: wire.KindBackup}
			}
			schedTimer.Reset(a.untilNextScheduled())
		}
	}
}

// runCommand executes one command; an empty ID is a scheduled backup.
func (a *Agent) runCommand(ctx context.Context, c wire.Command) {
	trigger := wire.TriggerCommand
	if c.ID == "" {
		trigger = wire.TriggerSchedule
	}
	var err error
	switch c.Kind {
	case wire.KindBackup:
		_, err = a.Backup(ctx, trigger, c.ID)
	case wire.KindRestore:
		_, err = a.Restore(ctx, c)
	default:
		a.Logger.Warn("unknown command kind ignored (newer appliance?)", slog.String("kind", c.Kind))
	}
	if err != nil {
		a.Logger.Error("run report could not be kept", slog.Any("error", err))
	}
}

func (a *Agent) heartbeatEvery() time.Duration {
	return time.Duration(a.Config().HeartbeatSeconds) * time.Second
}

// untilNextScheduled is the wait before the next scheduled backup; with no
// valid schedule it re-reads the config after a heartbeat interval.
func (a *Agent) untilNextScheduled() time.Duration {
	next, ok := NextScheduled(a.Config().Schedule, a.Now())
	if !ok {
		return a.heartbeatEvery()
	}
	return max(next.Sub(a.Now()), time.Second)
}

// NextScheduled returns the next time a cron schedule fires after now.
func NextScheduled(schedule string, now time.Time) (time.Time, bool) {
	if schedule == "" {
		return time.Time{}, false
	}
	s, err := cron.ParseStandard(schedule)
	if err != nil {
		return time.Time{}, false
	}
	return s.Next(now), true
}

func (a *Agent) heartbeatRequest(ctx context.Context, running []string) wire.HeartbeatRequest {
	host, _ := os.Hostname()
	req := wire.HeartbeatRequest{Hostname: host, OS: runtime.GOOS, Arch: runtime.GOARCH, AgentVersion: Version, RunningCommandIDs: running}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.resticVersion == "" {
		if r, err := a.restic(); err == nil {
			a.resticVersion = r.Version(ctx)
		}
	}
	req.ResticVersion = a.resticVersion
	return req
}
