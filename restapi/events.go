package restapi

import (
	"context"
	"encoding/json"

	"backstop/app"
)

// The event feed (scope jobs:read, CONTRACT §15): the webhook envelopes from
// the outbox, for PSAs that cannot receive webhooks.

type listEventsInput struct {
	After string `query:"after" maxLength:"64" doc:"Id (evt_…) of the last event the client processed; the feed continues after it. Absent: from the oldest event kept (30 days). An id this key cannot see (never raised, purged after 30 days, another tenant's) is 422 on query.after: start again without it."`
	Limit int    `query:"limit" minimum:"1" maximum:"1000" default:"100"`
}

// feedEvent is one envelope as the webhooks deliver it (CONTRACT §5).
type feedEvent struct {
	ID        string          `json:"id" doc:"evt_…; the order of the feed."`
	Type      string          `json:"type" enum:"job.failed,job.completed,verify.completed"`
	CreatedAt app.Time        `json:"createdAt"`
	TenantID  string          `json:"tenantId"`
	Data      json.RawMessage `json:"data" doc:"The same data as the webhook of that type: data.job (and data.endpoint for endpoint runs, data.result for verify.completed). job.failed and job.completed carry data.incident {key, state: open|resolved, openedAt, replaces?} when the job opens, continues or resolves an incident; a success with no open incident has no data.incident."`
}

type eventsOutput struct {
	Body struct {
		Items      []*feedEvent `json:"items" doc:"Oldest first."`
		NextCursor *string      `json:"nextCursor" doc:"Id of the page's last event when more follow now: pass it as after. null when this page reaches the newest event; poll later with the id of the last event processed."`
	}
}

func (s *Server) eventRoutes() {
	get(s, "events.list", "/api/v1/events", app.ScopeJobsRead, "The event feed: webhook envelopes, oldest first (paged by after)", s.listEvents)
	if o := s.api.OpenAPI().Paths["/api/v1/events"]; o != nil && o.Get != nil {
		o.Get.Description += " The events webhooks deliver (job.failed, job.completed, verify.completed), with the same envelope, " +
			"kept 30 days whether or not they were delivered. Tenant keys see their tenant's events; provider keys every " +
			"tenant's, or the X-Service-Tenant one. Poll with `after` = the id of the last event processed. " +
			"Answers 422 on query.after for an unknown or malformed id."
		if r, ok := o.Get.Responses["403"]; ok && o.Get.Responses["422"] == nil {
			unprocessable := *r
			unprocessable.Description = "Unprocessable Entity: a bad after or limit (errors[].location names it)."
			o.Get.Responses["422"] = &unprocessable
		}
	}
}

func (s *Server) listEvents(ctx context.Context, in *listEventsInput) (*eventsOutput, error) {
	if s.Events == nil {
		return nil, app.Errorf(app.ENOTIMPLEMENTED, "the event feed is not available on this appliance")
	}
	if in.After != "" && !app.HasPrefix(in.After, app.PrefixEvent) {
		return nil, app.FieldError("query.after", "after is not an event id (evt_…)")
	}
	// One more than the page tells whether more follow now.
	evs, err := s.Events.EventFeed(ctx, app.EventFilter{TenantID: principalFrom(ctx).tenantID, After: in.After, Limit: in.Limit + 1})
	if app.ErrorCode(err) == app.ENOTFOUND {
		return nil, app.FieldError("query.after", "no event with this id is kept for this key")
	} else if err != nil {
		return nil, err
	}
	out := &eventsOutput{}
	out.Body.Items = []*feedEvent{}
	for i, e := range evs {
		if i == in.Limit {
			out.Body.NextCursor = app.Ptr(evs[i-1].ID)
			break
		}
		var fe feedEvent
		if err := json.Unmarshal(e.Body, &fe); err != nil {
			return nil, err
		}
		out.Body.Items = append(out.Body.Items, &fe)
	}
	return out, nil
}
