package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
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

// startSchedules loads the stored schedules into a cron in UTC.
func (r *Runner) startSchedules(ctx context.Context) error {
	if r.cfg.Schedules == nil {
		return nil
	}
	list, err := r.cfg.Schedules.JobSchedules(ctx)
	if err != nil {
		return fmt.Errorf("jobs: schedules: %w", err)
	}
	c := cron.New(cron.WithLocation(time.UTC), cron.WithParser(cronParser))
	// An appliance has a schedule per endpoint (verify) and per protected
	// source: 10,000 and more, held for as long as it runs. They share few
	// specs, so the cron holds one entry per spec, which fires its
	// schedules one after the other; and the strings that repeat (tenant,
	// action, target type, params) are kept once.
	strs := map[string]string{}
	intern := func(v string) string {
		if w, ok := strs[v]; ok {
			return w
		}
		strs[v] = v
		return v
	}
	params := map[string]json.RawMessage{} // shared, never modified
	bySpec := map[string][]*app.JobSchedule{}
	var specs []string
	for _, s := range list {
		if !s.Enabled {
			continue
		}
		s.TenantID, s.Action, s.TargetType = intern(s.TenantID), intern(s.Action), intern(s.TargetType)
		if p, ok := params[string(s.Params)]; ok {
			s.Params = p
		} else {
			params[string(s.Params)] = s.Params
		}
		if _, ok := bySpec[s.Spec]; !ok {
			specs = append(specs, s.Spec)
		}
		bySpec[s.Spec] = append(bySpec[s.Spec], s)
	}
	for _, spec := range specs {
		group := slices.Clip(bySpec[spec])
		if _, err := c.AddFunc(spec, func() {
			for _, s := range group {
				r.Fire(r.ctx, s)
			}
		}); err != nil {
			for _, s := range group {
				r.log.Error("schedule ignored: bad cron expression", slog.String("schedule_id", s.ID), slog.Any("error", err))
			}
		}
	}
	r.cron = c
	c.Start()
	return nil
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
