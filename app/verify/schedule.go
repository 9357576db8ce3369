package verify

import (
	"context"
	"fmt"
	"hash/fnv"

	"backstop/app"
)

// Verify schedules. Every active endpoint that has a snapshot gets a daily
// verify as a job schedule (action verify, target the endpoint), run by the
// job runner's cron like any schedule; a schedule never piles up behind a
// verify still queued or running. Endpoints without a snapshot get none:
// a daily verify.no_snapshot failure would only be noise in a PSA until the
// first backup, and an API request still gets that answer. A stored
// schedule's spec is kept as it is, so it can be changed per endpoint.

// DefaultSchedule is an endpoint's daily verify: 05:MM UTC, after the
// default 01:00 backup, with the minute derived from the endpoint id so
// that an appliance's verifies spread over the hour instead of all
// starting at once.
func DefaultSchedule(endpointID string) string {
	h := fnv.New32a()
	h.Write([]byte(endpointID))
	return fmt.Sprintf("%d 5 * * *", h.Sum32()%60)
}

// EndpointStates lists every endpoint with at least ID, TenantID, Status
// and LastSnapshotID set (store.DB.EndpointStates).
type EndpointStates interface {
	EndpointStates(ctx context.Context) ([]*app.Endpoint, error)
}

// SyncSchedules adds the default verify schedule for every active endpoint
// with a snapshot that has none, and deletes the verify schedules of
// endpoints that are revoked or gone. It reports whether it changed
// anything, so the caller reloads the runner's schedules only then.
func SyncSchedules(ctx context.Context, endpoints EndpointStates, schedules app.JobScheduleService) (bool, error) {
	eps, err := endpoints.EndpointStates(ctx)
	if err != nil {
		return false, err
	}
	list, err := schedules.JobSchedules(ctx)
	if err != nil {
		return false, err
	}
	have := map[string]*app.JobSchedule{}
	for _, s := range list {
		if s.Action == app.ActionVerify && s.TargetType == app.TargetEndpoint {
			have[s.TargetID] = s
		}
	}
	changed := false
	for _, e := range eps {
		s, scheduled := have[e.ID]
		delete(have, e.ID)
		switch {
		case e.Status != app.EndpointActive && scheduled:
			if err := schedules.DeleteJobSchedule(ctx, s.ID); err != nil && app.ErrorCode(err) != app.ENOTFOUND {
				return changed, err
			}
			changed = true
		case e.Status == app.EndpointActive && !scheduled && e.LastSnapshotID != "":
			if err := schedules.SaveJobSchedule(ctx, &app.JobSchedule{TenantID: e.TenantID, Action: app.ActionVerify,
				TargetType: app.TargetEndpoint, TargetID: e.ID, Spec: DefaultSchedule(e.ID), Enabled: true}); err != nil {
				return changed, err
			}
			changed = true
		}
	}
	for _, s := range have { // endpoints that no longer exist
		if err := schedules.DeleteJobSchedule(ctx, s.ID); err != nil && app.ErrorCode(err) != app.ENOTFOUND {
			return changed, err
		}
		changed = true
	}
	return changed, nil
}
