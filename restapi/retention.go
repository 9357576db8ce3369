package restapi

import (
	"context"
	"net/http"

	"backstop/app"
	"backstop/app/retention"
)

// Retention policies and running retention now (web session only, CONTRACT
// §7, §11): a tenant administrator for their own tenant, provider
// administrators for any. Another tenant's policy or endpoint is the same
// 404 as a missing one. Changes are audited by the audit hook like every
// operation. docs/retention.md explains the policy.

type tenantRetentionInput struct {
	TenantID string `query:"tenantId" maxLength:"64" doc:"The tenant. A tenant administrator may omit it (their own); a provider administrator names it (or selects it with X-Service-Tenant)."`
}

type tenantRetention struct {
	TenantID  string              `json:"tenantId"`
	Policy    app.RetentionPolicy `json:"policy"`
	IsDefault bool                `json:"isDefault" doc:"True while the tenant never saved a policy: the default applies."`
}

type tenantRetentionOutput struct{ Body tenantRetention }

type updateTenantRetentionInput struct {
	TenantID string `query:"tenantId" maxLength:"64" doc:"The tenant, as for GET."`
	Body     app.RetentionPolicy
}

// policyOrNull is a retention policy that may be null (an endpoint that
// inherits its tenant's).
type policyOrNull struct {
	_ struct{} `nullable:"true"`
	app.RetentionPolicy
}

type endpointRetention struct {
	EndpointID string              `json:"endpointId"`
	Policy     app.RetentionPolicy `json:"policy" doc:"The policy that applies: the endpoint's own, or its tenant's when inherited."`
	Inherited  bool                `json:"inherited" doc:"True when the endpoint has no policy of its own."`
	LastPrune  *app.EndpointPrune  `json:"lastPrune" doc:"What the latest retention run did to the repository; null until one ran."`
}

type endpointRetentionOutput struct{ Body endpointRetention }

type updateEndpointRetentionInput struct {
	ID   string `path:"id" maxLength:"64"`
	Body struct {
		Policy *policyOrNull `json:"policy" required:"true" doc:"The endpoint's own policy, or null to inherit the tenant's."`
	}
}

type runRetentionInput struct {
	Body struct {
		TenantID string `json:"tenantId" minLength:"1" maxLength:"64"`
	}
}

// retentionTenant resolves the tenant a retention request is for.
func (s *Server) retentionTenant(ctx context.Context, id, field string) (string, error) {
	p := principalFrom(ctx)
	if id == "" {
		id = p.tenantID
		if id == "" && p.user != nil {
			id = p.user.TenantID
		}
		if id == "" {
			return "", app.FieldError(field, "name the tenant")
		}
	}
	if !canManageTenant(p, id) {
		return "", app.NotFound("tenant")
	}
	if _, err := s.Tenants.Tenant(ctx, id); err != nil {
		return "", err
	}
	actedFor(ctx, id)
	return id, nil
}

func (s *Server) retentionService() (app.RetentionService, error) {
	if s.Retention == nil {
		return nil, app.Errorf(app.ENOTIMPLEMENTED, "retention is not available on this appliance")
	}
	return s.Retention, nil
}

func (s *Server) getTenantRetention(ctx context.Context, in *tenantRetentionInput) (*tenantRetentionOutput, error) {
	svc, err := s.retentionService()
	if err != nil {
		return nil, err
	}
	id, err := s.retentionTenant(ctx, in.TenantID, "query.tenantId")
	if err != nil {
		return nil, err
	}
	p, isDefault, err := retention.TenantPolicy(ctx, svc, id)
	if err != nil {
		return nil, err
	}
	return &tenantRetentionOutput{Body: tenantRetention{TenantID: id, Policy: p, IsDefault: isDefault}}, nil
}

func (s *Server) updateTenantRetention(ctx context.Context, in *updateTenantRetentionInput) (*tenantRetentionOutput, error) {
	svc, err := s.retentionService()
	if err != nil {
		return nil, err
	}
	id, err := s.retentionTenant(ctx, in.TenantID, "query.tenantId")
	if err != nil {
		return nil, err
	}
	if err := retention.Validate(in.Body, "body"); err != nil {
		return nil, err
	}
	if err := svc.SetTenantRetention(ctx, id, in.Body); err != nil {
		return nil, err
	}
	return &tenantRetentionOutput{Body: tenantRetention{TenantID: id, Policy: in.Body}}, nil
}

func (s *Server) getEndpointRetention(ctx context.Context, in *idInput) (*endpointRetentionOutput, error) {
	svc, err := s.retentionService()
	if err != nil {
		return nil, err
	}
	if err := s.manageableEndpoint(ctx, in.ID); err != nil {
		return nil, err
	}
	e, err := s.Endpoints.Endpoint(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	p, inherited, err := retention.EndpointPolicy(ctx, svc, e)
	if err != nil {
		return nil, err
	}
	last, err := svc.LastEndpointPrune(ctx, e.ID)
	if err != nil {
		return nil, err
	}
	return &endpointRetentionOutput{Body: endpointRetention{EndpointID: e.ID, Policy: p, Inherited: inherited, LastPrune: last}}, nil
}

func (s *Server) updateEndpointRetention(ctx context.Context, in *updateEndpointRetentionInput) (*endpointRetentionOutput, error) {
	svc, err := s.retentionService()
	if err != nil {
		return nil, err
	}
	if err := s.manageableEndpoint(ctx, in.ID); err != nil {
		return nil, err
	}
	var own *app.RetentionPolicy
	if in.Body.Policy != nil {
		own = &in.Body.Policy.RetentionPolicy
		if err := retention.Validate(*own, "body.policy"); err != nil {
			return nil, err
		}
	}
	if err := svc.SetEndpointRetention(ctx, in.ID, own); err != nil {
		return nil, err
	}
	return s.getEndpointRetention(ctx, &idInput{ID: in.ID})
}

// runRetention starts the tenant's retention job now. While one is queued
// or running, that job is the answer: retention runs once at a time.
func (s *Server) runRetention(ctx context.Context, in *runRetentionInput) (*startJobOutput, error) {
	id, err := s.retentionTenant(ctx, in.Body.TenantID, "body.tenantId")
	if err != nil {
		return nil, err
	}
	if s.JobStore != nil {
		if j, err := s.JobStore.ActiveJobFor(ctx, app.ActionRetention, app.TargetTenant, id); err == nil {
			return &startJobOutput{Status: http.StatusAccepted, Body: j}, nil
		} else if app.ErrorCode(err) != app.ENOTFOUND {
			return nil, err
		}
	}
	j, err := s.JobRunner.Submit(ctx, app.JobRequest{TenantID: id, Action: app.ActionRetention, TargetType: app.TargetTenant,
		TargetID: id, Trigger: s.trigger(ctx)})
	if err != nil {
		return nil, err
	}
	return &startJobOutput{Status: http.StatusAccepted, Body: j}, nil
}

// retentionRoutes registers the retention operations; routes() calls it.
func (s *Server) retentionRoutes() {
	op(s, http.MethodGet, "retention.get", "/api/v1/retention", accessSession, "", "A tenant's snapshot retention policy", s.getTenantRetention)
	op(s, http.MethodPut, "retention.update", "/api/v1/retention", accessSession, "", "Set a tenant's snapshot retention policy", s.updateTenantRetention)
	op(s, http.MethodGet, "retention.getEndpoint", "/api/v1/endpoints/{id}/retention", accessSession, "",
		"The retention policy that applies to an endpoint's repository", s.getEndpointRetention)
	op(s, http.MethodPut, "retention.updateEndpoint", "/api/v1/endpoints/{id}/retention", accessSession, "",
		"Give an endpoint its own retention policy, or null to inherit the tenant's", s.updateEndpointRetention)
	op(s, http.MethodPost, "retention.run", "/api/v1/retention/run", accessSession, "", "Run a tenant's retention now (202 with the job)", s.runRetention)

	doc := s.api.OpenAPI().Paths
	policyDoc := " Tiers in days, each 0 (skipped) or at least the tier before it: every snapshot younger than keepAllDays, then the" +
		" newest of each UTC day, ISO week and month up to keepDailyDays, keepWeeklyDays, keepMonthlyDays; the newest snapshot is" +
		" never forgotten. Endpoint repositories get the same policy as `restic forget --prune` flags. Default: 30, 90, 365, 2557."
	for _, o := range []*struct {
		path string
		get  bool
	}{{"/api/v1/retention", true}, {"/api/v1/retention", false}, {"/api/v1/endpoints/{id}/retention", true},
		{"/api/v1/endpoints/{id}/retention", false}, {"/api/v1/retention/run", false}} {
		item := doc[o.path]
		if item == nil {
			continue
		}
		operation := item.Put
		if o.get {
			operation = item.Get
		} else if o.path == "/api/v1/retention/run" {
			operation = item.Post
		}
		if operation == nil {
			continue
		}
		if o.path != "/api/v1/retention/run" {
			operation.Description += policyDoc
		}
		if r401, ok := operation.Responses["401"]; ok && operation.Responses["404"] == nil {
			r := *r401
			r.Description = "Not Found"
			operation.Responses["404"] = &r
		}
	}
	if item := doc["/api/v1/retention/run"]; item != nil && item.Post != nil {
		item.Post.Description += " Starts the tenant's `retention` job (queue `retention`, target `{type: \"tenant\"}`): snapshot" +
			" retention in the blob store, then `restic forget --prune` for each active endpoint. Answers 202 Accepted with the job;" +
			" while one is queued or running, with that job. The same job runs nightly at 02:30 UTC."
		if r, ok := item.Post.Responses["200"]; ok {
			r.Description = "Accepted: the job is queued (or already running)."
			item.Post.Responses["202"] = r
			delete(item.Post.Responses, "200")
		}
	}
}
