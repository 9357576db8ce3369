package retention

import (
	"context"

	"backstop/app"
)

// Retention schedules. Every tenant gets one job schedule (action
// retention, target the tenant) that fires nightly, run by the job
// runner's cron like any schedule: the runner skips a firing while the
// tenant's previous retention job is still queued or running, a stored
// schedule can be changed or disabled per tenant, and its jobs are
// ordinary jobs (trigger schedule) with progress, failures and webhooks.
// One schedule per tenant rather than one cron entry looping over tenants
// because the runner already gives a schedule exactly those properties;
// the price is keeping the rows in sync with the tenants (SyncSchedules,
// at start-up and every few minutes).

// DefaultSchedule is the nightly retention run: 02:30 UTC, after the
// default 01:00 endpoint backups and before the 05:xx verifies.
const DefaultSchedule = "30 2 * * *"

// SyncSchedules gives every tenant without one its nightly retention
// schedule. A stored schedule's spec is kept as it is. It reports whether
// it changed anything, so the caller reloads the runner's schedules only
// then. (Tenants are never deleted, and job_schedules refers to them, so
// there is nothing to remove.)
func SyncSchedules(ctx context.Context, tenants app.TenantService, schedules app.JobScheduleService) (bool, error) {
	list, err := schedules.JobSchedules(ctx)
	if err != nil {
		return false, err
	}
	have := map[string]bool{}
	for _, s := range list {
		if s.Action == app.ActionRetention && s.TargetType == app.TargetTenant {
			have[s.TargetID] = true
		}
	}
	ts, err := tenants.Tenants(ctx, app.TenantFilter{})
	if err != nil {
		return false, err
	}
	changed := false
	for _, t := range ts {
		if have[t.ID] {
			continue
		}
		if err := schedules.SaveJobSchedule(ctx, &app.JobSchedule{TenantID: t.ID, Action: app.ActionRetention,
			TargetType: app.TargetTenant, TargetID: t.ID, Spec: DefaultSchedule, Enabled: true}); err != nil {
			return changed, err
		}
		changed = true
	}
	return changed, nil
}
