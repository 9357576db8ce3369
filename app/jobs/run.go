package jobs

import (
	"context"
	"log/slog"
	"time"

	"backstop/app"
)

// Run is the handle an in-process job reports through. It is used by the
// one goroutine running the job.
type Run struct {
	// Job is the job as claimed; Progress and ItemsFailed follow the reports.
	Job *app.Job

	r         *Runner
	lastSaved time.Time
}

// Progress reports how far the job got. Streams see every report at once;
// the store keeps at most one per ProgressEvery (and the last at the end).
func (x *Run) Progress(ctx context.Context, p app.JobProgress) {
	p.Percent = min(max(p.Percent, 0), 100)
	x.Job.Progress = p
	x.r.broker.Publish(x.Job)
	now := x.r.cfg.Now()
	if now.Sub(x.lastSaved) < x.r.cfg.ProgressEvery {
		return
	}
	x.lastSaved = now
	if err := x.r.store.SaveJobProgress(ctx, x.Job.ID, p); err != nil && ctx.Err() == nil {
		x.r.log.Warn("storing job progress failed", slog.String("job_id", x.Job.ID), slog.Any("error", err))
	}
}

// ItemFailed records an item that could not be processed; the job goes on
// and ends partial unless it fails as a whole. err's cause code (an
// *app.FailureError) classifies the item.
func (x *Run) ItemFailed(ctx context.Context, ref, name string, err error) error {
	it := &app.JobItem{Ref: ref, Name: name, Failure: app.FailureFrom(err, "item", x.r.cfg.Now())}
	j, serr := x.r.store.AddJobItem(ctx, x.Job.ID, it)
	if serr != nil {
		return serr
	}
	x.Job.ItemsFailed = j.ItemsFailed
	x.r.broker.Publish(x.Job)
	return nil
}

// The external-executor API: the agent (through agentapi) runs jobs of
// kinds without Run and reports through these.

// Start moves a queued external job to running (the executor took it).
func (r *Runner) Start(ctx context.Context, jobID string) (*app.Job, error) {
	j, err := r.store.StartJob(ctx, jobID, r.cfg.Now())
	if err != nil {
		return nil, err
	}
	r.broker.Publish(j)
	return j, nil
}

// StartNow queues and starts a job in one go, for work an external executor
// began on its own (an agent's scheduled backup).
func (r *Runner) StartNow(ctx context.Context, req app.JobRequest) (*app.Job, error) {
	j, err := r.Submit(ctx, req)
	if err != nil {
		return nil, err
	}
	return r.Start(ctx, j.ID)
}

// Progress stores and publishes the progress of a running job.
func (r *Runner) Progress(ctx context.Context, jobID string, p app.JobProgress) error {
	p.Percent = min(max(p.Percent, 0), 100)
	if err := r.store.SaveJobProgress(ctx, jobID, p); err != nil {
		return err
	}
	j, err := r.store.Job(ctx, jobID)
	if err != nil {
		return err
	}
	if j.State != app.JobRunning {
		return app.Errorf(app.ECONFLICT, "job %s is %s, not running", jobID, j.State)
	}
	r.broker.Publish(j)
	return nil
}

// Item records a failed item of a running job.
func (r *Runner) Item(ctx context.Context, jobID string, it *app.JobItem) error {
	if it.Failure == nil {
		it.Failure = app.NewFailure(app.CodeUnknown, nil, "", "item", r.cfg.Now())
	}
	j, err := r.store.AddJobItem(ctx, jobID, it)
	if err != nil {
		return err
	}
	if cur, ok := r.broker.Current(jobID); ok {
		cur.ItemsFailed = j.ItemsFailed
		j = cur
	}
	r.broker.Publish(j)
	return nil
}

// Finish ends a running job as out says and returns it as stored: the
// webhook event and any retry or re-run commit with the end. Finishing a
// job that is not running is a conflict.
func (r *Runner) Finish(ctx context.Context, jobID string, out *Outcome) (*app.Job, error) {
	return r.finish(ctx, jobID, out, out.Err)
}
