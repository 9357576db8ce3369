package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"backstop/app"

	"github.com/robfig/cron/v3"
)

// cronParser accepts the standard five fields and descriptors (@daily,
// @every 30m).
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ValidateSchedule reports whether spec is a cron expression the runner accepts.
func ValidateSchedule(spec string) error {
	if _, err := cronParser.Parse(spec); err != nil {
		return app.FieldError("schedule", "not a cron expression: %v", err)
	}
	return nil
}

// startSchedules starts a cron in UTC with an entry per distinct cron
// expression of the enabled schedules. An appliance has a schedule per
// endpoint (verify) and per protected source, 10,000 and more, that share
// a few dozen expressions: the cron holds only those, and an entry reads
// its schedules from the store when it fires and starts them one after the
// other. So a schedule saved, disabled or deleted since the last reload is
// fired as it is now, and the schedules cost no memory between firings.
func (r *Runner) startSchedules(ctx context.Context) error {
	if r.cfg.Schedules == nil {
		return nil
	}
	specs, err := r.cfg.Schedules.JobScheduleSpecs(ctx)
	if err != nil {
		return fmt.Errorf("jobs: schedules: %w", err)
	}
	c := cron.New(cron.WithLocation(time.UTC), cron.WithParser(cronParser))
	for _, spec := range specs {
		if _, err := c.AddFunc(spec, func() { r.fireSpec(spec) }); err != nil {
			list, _ := r.cfg.Schedules.EnabledJobSchedules(ctx, spec)
			for _, s := range list {
				r.log.Error("schedule ignored: bad cron expression", slog.String("schedule_id", s.ID), slog.Any("error", err))
			}
		}
	}
	r.cron = c
	c.Start()
	return nil
}

// fireSpec fires the enabled schedules whose cron expression is spec.
func (r *Runner) fireSpec(spec string) {
	list, err := r.cfg.Schedules.EnabledJobSchedules(r.ctx, spec)
	if err != nil {
		if r.ctx.Err() == nil {
			r.log.Error("scheduled jobs not started: reading the schedules failed", slog.String("spec", spec), slog.Any("error", err))
		}
		return
	}
	for _, s := range list {
		r.Fire(r.ctx, s)
	}
}

// ReloadSchedules replaces the running schedules with the stored ones
// (after a schedule was saved or deleted).
func (r *Runner) ReloadSchedules(ctx context.Context) error {
	if r.cron != nil {
		<-r.cron.Stop().Done()
	}
	return r.startSchedules(ctx)
}

// Fire submits the scheduled job unless the previous one on the target is
// still queued or running. It returns the job, or nil when skipped.
func (r *Runner) Fire(ctx context.Context, s *app.JobSchedule) *app.Job {
	_, err := r.store.ActiveJobFor(ctx, s.Action, s.TargetType, s.TargetID)
	if err == nil {
		r.log.Info("scheduled job skipped: the previous one is still active", slog.String("schedule_id", s.ID))
		return nil
	} else if app.ErrorCode(err) != app.ENOTFOUND {
		r.log.Error("scheduled job skipped", slog.String("schedule_id", s.ID), slog.Any("error", err))
		return nil
	}
	j, err := r.Submit(ctx, app.JobRequest{TenantID: s.TenantID, Action: s.Action, TargetType: s.TargetType,
		TargetID: s.TargetID, Trigger: app.TriggerSchedule, Params: s.Params})
	if err != nil {
		r.log.Error("scheduled job not started", slog.String("schedule_id", s.ID), slog.Any("error", err))
		return nil
	}
	return j
}
