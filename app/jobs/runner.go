// Package jobs is the job runner: a durable queue in the store, bounded
// worker pools per queue, cron-driven schedules, automatic retries of
// transient failures, and the in-process fan-out of progress to streams.
//
// Work is described by kinds. A Kind serves one action (backup, restore,
// verify) for one target type: it names its queue, resolves and authorizes
// the target for a tenant, and either runs the job in process (Run) or
// leaves it to an external executor (the agent), which claims it with Start
// and reports with Progress, Item and Finish.
//
// Durability: a job is a row before anyone is told about it. A local job
// that was running when the process died is found at Open, ended as
// interrupted (no webhook: an interruption is not a failure) and queued
// again as a new job with trigger "retry", so no work is silently lost.
package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"backstop/app"

	"github.com/robfig/cron/v3"
)

// Kind is one kind of work.
type Kind struct {
	Action     string // app.ActionBackup, ActionRestore, ActionVerify
	TargetType string // the body.targetType it serves; for restores, the snapshot owner's type
	Queue      string
	// QueueFor, if set, picks the queue of a job from its resolved target
	// (e.g. mailbox objects to mailbox_backup, drives to drive_backup);
	// "" falls back to Queue. Every queue it can answer must be listed in
	// Queues so the runner's pools claim from it.
	QueueFor func(ctx context.Context, t app.JobTarget) string
	Queues   []string
	// Resolve checks that the target exists and belongs to the tenant and
	// returns it with its display name. Another tenant's target must be
	// app.NotFound, exactly like a missing one.
	Resolve func(ctx context.Context, tenantID, targetID string, params json.RawMessage) (app.JobTarget, error)
	// Run executes a job in process. It reports through r and returns the
	// outcome, or an error (an *app.FailureError names the cause). It must
	// return promptly when ctx ends. Nil means an external executor.
	Run func(ctx context.Context, r *Run) (*Outcome, error)
	// MaxAttempts bounds automatic retries of transient failures (default 3).
	MaxAttempts int
	// EventData, if set, adds fields to the data of the job's webhook events
	// (e.g. "endpoint" for endpoint runs). It is called before the end is
	// committed.
	EventData func(ctx context.Context, j *app.Job) (map[string]any, error)
}

// Outcome is how a job ended.
type Outcome struct {
	// State is succeeded, partial, failed or interrupted; empty means
	// succeeded, or partial when items failed.
	State        string
	SnapshotID   string
	Failure      *app.Failure     // for failed: the cause, as built by an external reporter
	Err          error            // for failed: the cause as an error (an *app.FailureError names it)
	ErrorMessage string           // for failed: overrides the one-line message
	Result       any              // verify runs: data.result of verify.completed
	EventData    map[string]any   // extra data for the webhook events
	Progress     *app.JobProgress // final progress, when the reporter has it
	Step         string           // the step the run was in when it failed
}

// Config configures a Runner.
type Config struct {
	Store     app.JobService
	Schedules app.JobScheduleService // optional
	Broker    *Broker                // optional; one is made
	Now       app.Clock
	Logger    *slog.Logger
	// Workers is the pool size per queue (default 2 for queues not named).
	Workers map[string]int
	// Backoff is the delay before retry n (the last entry repeats).
	Backoff []time.Duration
	// ProgressEvery bounds how often a local run's progress is stored; every
	// report is still published to streams at once.
	ProgressEvery time.Duration
	// MaxIdle is the longest the dispatcher sleeps without a wake-up.
	MaxIdle time.Duration
	// Ended, if set, is called once with each job this runner ended, after
	// its final state committed (metrics observe durations here). It must
	// not block.
	Ended func(*app.Job)
}

// DefaultBackoff is the delay before the first, second and later automatic retries.
var DefaultBackoff = []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute}

// Runner runs jobs. Open starts it; Close stops it and waits.
type Runner struct {
	cfg    Config
	store  app.JobService
	broker *Broker
	log    *slog.Logger

	kindsMu sync.RWMutex
	kinds   map[string]*Kind // action + "/" + target type

	mu   sync.Mutex
	busy map[string]int // running local jobs per queue

	wake   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	cron   *cron.Cron
}

var _ app.JobSubmitter = (*Runner)(nil)

// New returns a runner; register kinds, then Open it.
func New(cfg Config) *Runner {
	if cfg.Now == nil {
		cfg.Now = app.SystemClock
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Broker == nil {
		cfg.Broker = NewBroker(cfg.Now, 64, 2*time.Minute)
	}
	if len(cfg.Backoff) == 0 {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.ProgressEvery == 0 {
		cfg.ProgressEvery = time.Second
	}
	if cfg.MaxIdle == 0 {
		cfg.MaxIdle = time.Minute
	}
	return &Runner{cfg: cfg, store: cfg.Store, broker: cfg.Broker, log: cfg.Logger, kinds: map[string]*Kind{},
		busy: map[string]int{}, wake: make(chan struct{}, 1)}
}

// Broker is the runner's progress fan-out (the API streams from it).
func (r *Runner) Broker() *Broker { return r.broker }

// Register adds a kind. A second kind for the same action and target type
// replaces the first.
func (r *Runner) Register(k Kind) {
	if k.MaxAttempts == 0 {
		k.MaxAttempts = 3
	}
	r.kindsMu.Lock()
	defer r.kindsMu.Unlock()
	r.kinds[k.Action+"/"+k.TargetType] = &k
}

func (r *Runner) kind(action, targetType string) *Kind {
	r.kindsMu.RLock()
	defer r.kindsMu.RUnlock()
	return r.kinds[action+"/"+targetType]
}

// Open recovers jobs the last process left running, loads the schedules and
// starts the dispatcher. The runner stops when Close is called (not when
// ctx ends; ctx bounds the start-up work only).
func (r *Runner) Open(ctx context.Context) error {
	if err := r.recoverInterrupted(ctx); err != nil {
		return fmt.Errorf("jobs: recover: %w", err)
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	if err := r.startSchedules(ctx); err != nil {
		r.cancel()
		return err
	}
	r.wg.Add(1)
	go func() { defer r.wg.Done(); r.dispatch(r.ctx) }()
	return nil
}

// Close stops the dispatcher and schedules, cancels running local jobs and
// waits for them. A job whose run gives up because of Close is ended as
// interrupted and queued again, exactly as after a crash.
func (r *Runner) Close() error {
	if r.cancel == nil {
		return nil
	}
	if r.cron != nil {
		<-r.cron.Stop().Done()
	}
	r.cancel()
	r.wg.Wait()
	return nil
}

// Poke makes the dispatcher look for due jobs now (tests that move the
// clock use it; enqueueing does it by itself).
func (r *Runner) Poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// recoverInterrupted ends every local job left running as interrupted and
// queues its re-run.
func (r *Runner) recoverInterrupted(ctx context.Context) error {
	running, err := r.store.RunningJobs(ctx, app.ExecutorLocal)
	if err != nil {
		return err
	}
	for _, j := range running {
		r.log.Warn("job was running when the process stopped; re-queueing", slog.String("job_id", j.ID))
		if _, err := r.finish(ctx, j.ID, &Outcome{State: app.JobInterrupted}, nil); err != nil {
			return err
		}
	}
	return nil
}

// Submit validates a request against the registered kinds, resolves the
// target for the tenant and queues the job.
func (r *Runner) Submit(ctx context.Context, req app.JobRequest) (*app.Job, error) {
	k, target, err := r.resolve(ctx, req)
	if err != nil {
		return nil, err
	}
	queue := k.Queue
	if k.QueueFor != nil {
		if q := k.QueueFor(ctx, target); q != "" {
			queue = q
		}
	}
	j := &app.Job{
		TenantID: req.TenantID, Queue: queue, State: app.JobQueued, Target: target, Trigger: req.Trigger,
		Progress: app.JobProgress{Phase: "queued"}, Action: k.Action, Params: req.Params,
		Attempt: 1, MaxAttempts: k.MaxAttempts, Executor: app.ExecutorLocal, ItemCauses: []app.ItemCause{},
	}
	if k.Run == nil {
		j.Executor = app.ExecutorExternal
	}
	if err := r.store.CreateJob(ctx, j); err != nil {
		return nil, err
	}
	r.Poke()
	return j, nil
}

func (r *Runner) resolve(ctx context.Context, req app.JobRequest) (*Kind, app.JobTarget, error) {
	if req.Action == app.ActionRestore && req.TargetType == "" {
		// A restore names a snapshot; whichever kind knows it serves it.
		r.kindsMu.RLock()
		var cands []*Kind
		for _, k := range r.kinds {
			if k.Action == app.ActionRestore {
				cands = append(cands, k)
			}
		}
		r.kindsMu.RUnlock()
		if len(cands) == 0 {
			return nil, app.JobTarget{}, app.FieldError("body.snapshotId", "this version cannot restore any kind of snapshot yet")
		}
		for _, k := range cands {
			t, err := k.Resolve(ctx, req.TenantID, req.TargetID, req.Params)
			if app.ErrorCode(err) == app.ENOTFOUND {
				continue
			}
			return k, t, err
		}
		return nil, app.JobTarget{}, app.NotFound("snapshot")
	}
	k := r.kind(req.Action, req.TargetType)
	if k == nil {
		return nil, app.JobTarget{}, app.FieldError("body.targetType", "no %s job exists for target type %q in this version", req.Action, req.TargetType)
	}
	t, err := k.Resolve(ctx, req.TenantID, req.TargetID, req.Params)
	return k, t, err
}

// dispatch claims due jobs into free pool slots whenever woken, and sleeps
// until the next retry is due (at most MaxIdle) otherwise.
func (r *Runner) dispatch(ctx context.Context) {
	for {
		r.claim(ctx)
		wait := r.cfg.MaxIdle
		now := r.cfg.Now()
		if next, err := r.store.NextJobDueAt(ctx, now); err == nil && next != nil {
			wait = min(wait, max(next.Sub(now), 10*time.Millisecond))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-r.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

func (r *Runner) localQueues() map[string]bool {
	r.kindsMu.RLock()
	defer r.kindsMu.RUnlock()
	qs := map[string]bool{}
	for _, k := range r.kinds {
		if k.Run != nil {
			qs[k.Queue] = true
			for _, q := range k.Queues {
				qs[q] = true
			}
		}
	}
	return qs
}

// Workers is the pool size of a queue.
func (r *Runner) Workers(queue string) int {
	if n, ok := r.cfg.Workers[queue]; ok && n > 0 {
		return n
	}
	return 2
}

func (r *Runner) claim(ctx context.Context) {
	for q := range r.localQueues() {
		r.mu.Lock()
		free := r.Workers(q) - r.busy[q]
		r.mu.Unlock()
		if free <= 0 {
			continue
		}
		claimed, err := r.store.ClaimJobs(ctx, q, free, r.cfg.Now())
		if err != nil {
			if ctx.Err() == nil {
				r.log.Error("claiming jobs failed", slog.String("queue", q), slog.Any("error", err))
			}
			continue
		}
		for _, j := range claimed {
			r.mu.Lock()
			r.busy[q]++
			r.mu.Unlock()
			r.broker.Publish(j)
			r.wg.Add(1)
			go func() {
				defer r.wg.Done()
				r.execute(ctx, j)
				r.mu.Lock()
				r.busy[q]--
				r.mu.Unlock()
				r.Poke()
			}()
		}
	}
}

// Busy is the number of local jobs of a queue running now.
func (r *Runner) Busy(queue string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.busy[queue]
}

func (r *Runner) execute(ctx context.Context, j *app.Job) {
	k := r.kind(j.Action, j.Target.Type)
	var out *Outcome
	var err error
	if k == nil || k.Run == nil {
		err = fmt.Errorf("no in-process job kind for %s of %s", j.Action, j.Target.Type)
	} else {
		run := &Run{Job: cloneJob(j), r: r}
		out, err = safeRun(ctx, k, run)
		if out == nil {
			out = &Outcome{}
		}
		if out.Progress == nil {
			out.Progress = &run.Job.Progress
		}
	}
	if out == nil {
		out = &Outcome{}
	}
	if err != nil && ctx.Err() != nil {
		// The runner is closing: not a failure of the job.
		out = &Outcome{State: app.JobInterrupted, Progress: out.Progress}
		err = nil
	}
	if _, ferr := r.finish(context.WithoutCancel(ctx), j.ID, out, err); ferr != nil {
		r.log.Error("recording the end of a job failed", slog.String("job_id", j.ID), slog.Any("error", ferr))
	}
}

// safeRun runs a kind, turning a panic into a failure of the job.
func safeRun(ctx context.Context, k *Kind, run *Run) (out *Outcome, err error) {
	defer func() {
		if v := recover(); v != nil {
			out, err = nil, fmt.Errorf("job panicked: %v", v)
		}
	}()
	return k.Run(ctx, run)
}
