package jobs

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"backstop/app"
)

// finish ends a running job with out (or runErr, which makes it failed) and
// commits, in one transaction with the final state: the webhook events it
// raises and the job that re-runs it (an automatic retry of a transient
// failure, or the re-run of an interrupted job). Then it publishes the end.
func (r *Runner) finish(ctx context.Context, id string, out *Outcome, runErr error) (*app.Job, error) {
	if out == nil {
		out = &Outcome{}
	}
	groups, err := r.store.FailureGroups(ctx, id)
	if err != nil {
		return nil, err
	}
	var extra map[string]any
	if pre, err := r.store.Job(ctx, id); err == nil {
		if out.State == app.JobInterrupted {
			if n := r.interruptionsBefore(ctx, pre); n+1 >= maxInterruptions {
				r.log.Error("job interrupted again; not re-queueing it", slog.String("job_id", id), slog.Int("interruptions", n+1))
				out = &Outcome{Failure: app.FailureFrom(app.Fail(app.CodeInterruptedRepeatedly,
					map[string]any{"interruptions": n + 1}, nil), out.Step, r.cfg.Now()), Progress: out.Progress, Step: out.Step}
			}
		}
		if k := r.kind(pre.Action, pre.Target.Type); k != nil && k.EventData != nil && out.State != app.JobInterrupted {
			if extra, err = k.EventData(ctx, pre); err != nil {
				return nil, err
			}
		}
	}
	now := r.cfg.Now()
	j, err := r.store.FinishJob(ctx, id, func(j *app.Job) (*app.JobFollowUp, error) {
		return r.decideEnd(j, out, runErr, groups, extra, now), nil
	})
	if err != nil {
		return nil, err
	}
	r.broker.Publish(j)
	if r.cfg.Ended != nil {
		r.cfg.Ended(j)
	}
	if j.State == app.JobInterrupted || (j.Failure != nil && j.Failure.Retry.State == app.RetryScheduled) {
		r.Poke() // a re-run was queued
	}
	return j, nil
}

// maxInterruptions is how many runs in a row the process stopping may cut
// off before the job fails with job.interrupted_repeatedly instead of being
// queued again: a job that crashes the appliance must not do so for ever.
const maxInterruptions = 3

// interruptionsBefore counts the interrupted runs j directly re-runs.
func (r *Runner) interruptionsBefore(ctx context.Context, j *app.Job) int {
	n := 0
	for prev := j.RetryOf; prev != "" && n < maxInterruptions; n++ {
		p, err := r.store.Job(ctx, prev)
		if err != nil || p.State != app.JobInterrupted {
			break
		}
		prev = p.RetryOf
	}
	return n
}

// decideEnd sets the final fields of j and returns the follow-up to commit
// with them.
func (r *Runner) decideEnd(j *app.Job, out *Outcome, runErr error, groups []app.FailureGroup, extra map[string]any, now time.Time) *app.JobFollowUp {
	follow := &app.JobFollowUp{}
	j.FinishedAt = app.Ptr(app.At(now))
	if j.StartedAt != nil {
		j.DurationMs = app.Ptr(j.FinishedAt.Sub(j.StartedAt.Time).Milliseconds())
	}
	if out.Progress != nil {
		j.Progress = *out.Progress
	}
	if out.SnapshotID != "" {
		j.SnapshotID = app.Ptr(out.SnapshotID)
	}
	j.ItemCauses = app.TopItemCauses(groups)

	state := out.State
	if runErr != nil || out.Failure != nil {
		state = app.JobFailed
	}
	if state == "" || state == app.JobSucceeded {
		state = app.JobSucceeded
		if j.ItemsFailed > 0 {
			state = app.JobPartial
		}
	}
	j.State = state
	j.Progress.Phase = "done"

	switch state {
	case app.JobInterrupted:
		// Not a failure (SPEC rule 3): no webhook, and the work is queued again.
		follow.Next = rerun(j, j.Attempt, nil)
		return follow
	case app.JobFailed:
		f := out.Failure
		if f == nil {
			err := runErr
			if err == nil {
				err = app.Fail(app.CodeUnknown, nil, nil)
			}
			f = app.FailureFrom(err, out.Step, now)
		}
		f.Retry = app.FailureRetry{State: app.RetryNone, Attempt: j.Attempt, MaxAttempts: j.MaxAttempts}
		if f.Transient {
			if j.Attempt < j.MaxAttempts {
				next := now.Add(r.backoff(j.Attempt, f))
				f.Retry.State, f.Retry.NextAt = app.RetryScheduled, app.Ptr(app.At(next))
				follow.Next = rerun(j, j.Attempt+1, &next)
			} else {
				f.Retry.State = app.RetryExhausted
			}
		}
		j.Failure = f
		msg := out.ErrorMessage
		if msg == "" {
			msg = errorMessage(f)
		}
		j.ErrorMessage = app.Ptr(app.RedactText(msg))
	default:
		j.Progress.Percent = 100
		j.Failure, j.ErrorMessage = nil, nil
	}
	follow.Events = r.endEvents(j, out, extra, now)
	return follow
}

// endEvents are the webhook events of a job's end (CONTRACT §5): job.failed
// or job.completed, and verify.completed for verify runs.
func (r *Runner) endEvents(j *app.Job, out *Outcome, extra map[string]any, now time.Time) []*app.Event {
	data := func() map[string]any {
		d := map[string]any{}
		for k, v := range extra {
			d[k] = v
		}
		for k, v := range out.EventData {
			d[k] = v
		}
		d["job"] = cloneJob(j)
		return d
	}
	typ := app.EventJobCompleted
	if j.State == app.JobFailed {
		typ = app.EventJobFailed
	}
	events := []*app.Event{{Type: typ, TenantID: j.TenantID, CreatedAt: app.At(now), Data: data()}}
	if j.Queue == app.QueueVerify {
		d := data()
		d["result"] = out.Result
		events = append(events, &app.Event{Type: app.EventVerifyCompleted, TenantID: j.TenantID, CreatedAt: app.At(now), Data: d})
	}
	return events
}

// rerun is the job that does j's work again.
func rerun(j *app.Job, attempt int, notBefore *time.Time) *app.Job {
	return &app.Job{
		TenantID: j.TenantID, Queue: j.Queue, State: app.JobQueued, Target: j.Target, Trigger: app.TriggerRetry,
		Progress: app.JobProgress{Phase: "queued"}, Action: j.Action, Executor: j.Executor, Params: j.Params,
		Attempt: attempt, MaxAttempts: j.MaxAttempts, NotBefore: notBefore, RetryOf: j.ID, ItemCauses: []app.ItemCause{},
	}
}

// backoff is the wait before the retry after the attempt-th failure; a
// cause that says how long to wait (retryAfterSeconds) is honoured.
func (r *Runner) backoff(attempt int, f *app.Failure) time.Duration {
	d := r.cfg.Backoff[min(attempt-1, len(r.cfg.Backoff)-1)]
	if v, ok := f.Params["retryAfterSeconds"]; ok {
		var secs float64
		switch x := v.(type) {
		case int:
			secs = float64(x)
		case int64:
			secs = float64(x)
		case float64:
			secs = x
		}
		if w := time.Duration(secs * float64(time.Second)); w > d && w <= 24*time.Hour {
			d = w
		}
	}
	return d
}

// errorMessage is the one line for people: the cause's title and the first
// line of the redacted details.
func errorMessage(f *app.Failure) string {
	c, _ := app.LookupFailureCode(f.Code)
	first, _, _ := strings.Cut(f.Details, "\n")
	if first == "" {
		return c.Title
	}
	if len(first) > 200 {
		first = first[:200] + "…"
	}
	return c.Title + ": " + first
}
