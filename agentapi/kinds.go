package agentapi

import (
	"context"
	"encoding/json"
	"path/filepath"

	"backstop/app"
	"backstop/app/jobs"
)

// JobKinds are the job kinds of agent runs, for the job runner: backups of
// an endpoint (POST /api/v1/backups with targetType "endpoint") and
// restores of an endpoint's snapshot (POST /api/v1/restores). Both are
// external: Submit queues the job, the endpoint's next heartbeat hands it to
// the agent as a command, and the agent's run reports (through this
// package) start, progress and end it.
func JobKinds(endpoints app.EndpointService, agents app.AgentService) []jobs.Kind {
	eventData := func(ctx context.Context, j *app.Job) (map[string]any, error) {
		e, err := endpoints.Endpoint(ctx, j.Target.ID)
		if err != nil {
			return nil, err
		}
		return map[string]any{"endpoint": app.EndpointEvent(e)}, nil
	}
	return []jobs.Kind{
		{
			Action: app.ActionBackup, TargetType: app.TargetEndpoint, Queue: app.QueueEndpointBackup, MaxAttempts: 1,
			Resolve: func(ctx context.Context, tenantID, targetID string, _ json.RawMessage) (app.JobTarget, error) {
				e, err := activeEndpoint(ctx, endpoints, tenantID, targetID)
				if err != nil {
					return app.JobTarget{}, err
				}
				return endpointTarget(e), nil
			},
			EventData: eventData,
		},
		{
			Action: app.ActionRestore, TargetType: app.TargetEndpoint, Queue: app.QueueEndpointRestore, MaxAttempts: 1,
			// targetID is the snapshot id; the backup that made it names the endpoint.
			Resolve: func(ctx context.Context, tenantID, snapshotID string, params json.RawMessage) (app.JobTarget, error) {
				var p app.RestoreParams
				if len(params) > 0 {
					if err := json.Unmarshal(params, &p); err != nil {
						return app.JobTarget{}, app.FieldError("body", "restore parameters are malformed")
					}
				}
				if p.Destination != "" && !filepath.IsAbs(p.Destination) {
					return app.JobTarget{}, app.FieldError("body.destination", "destination must be an absolute directory on the machine")
				}
				endpointID, _, err := agents.SnapshotSamples(ctx, snapshotID)
				if err != nil {
					return app.JobTarget{}, err
				}
				e, err := activeEndpoint(ctx, endpoints, tenantID, endpointID)
				if app.ErrorCode(err) == app.ENOTFOUND {
					return app.JobTarget{}, app.NotFound("snapshot")
				} else if err != nil {
					return app.JobTarget{}, err
				}
				return endpointTarget(e), nil
			},
			EventData: eventData,
		},
	}
}

func endpointTarget(e *app.Endpoint) app.JobTarget {
	name := e.DisplayName
	if name == "" {
		name = e.Hostname
	}
	return app.JobTarget{Type: app.TargetEndpoint, ID: e.ID, DisplayName: name}
}

// activeEndpoint returns the tenant's endpoint; another tenant's is not
// found, a revoked one cannot run anything.
func activeEndpoint(ctx context.Context, endpoints app.EndpointService, tenantID, id string) (*app.Endpoint, error) {
	e, err := endpoints.Endpoint(ctx, id)
	if err != nil {
		return nil, err
	}
	if tenantID != "" && e.TenantID != tenantID {
		return nil, app.NotFound("endpoint")
	}
	if e.Status != app.EndpointActive {
		return nil, app.FieldError("body.targetId", "endpoint %s is revoked", e.ID)
	}
	return e, nil
}
