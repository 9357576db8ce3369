package restapi

import (
	"context"

	"backstop/app"
)

// The latest verify report (scope status:read). A verify run is the sampled
// test restore of an endpoint's newest snapshot plus a repository check;
// POST /api/v1/verifies starts one (jobs.go).
//
// Which report is "latest": the one that finished last among the caller's
// reports — the tenant's, or with a provider key and no X-Service-Tenant,
// every managed tenant's (the report carries tenantId). With ?endpointId=
// it is that endpoint's latest report, so an integrator can poll the proof
// for one machine; another tenant's endpoint is 404 like a missing one.
// No report yet is 404 with code not_found.

type latestVerifyInput struct {
	EndpointID string `query:"endpointId" maxLength:"64" doc:"Only this endpoint's latest report."`
}

type latestVerifyOutput struct{ Body *app.VerifyReport }

func (s *Server) getLatestVerify(ctx context.Context, in *latestVerifyInput) (*latestVerifyOutput, error) {
	p := principalFrom(ctx)
	if in.EndpointID != "" {
		e, err := s.Endpoints.Endpoint(ctx, in.EndpointID)
		if err != nil {
			return nil, err
		}
		if p.tenantID != "" && e.TenantID != p.tenantID {
			return nil, app.NotFound("endpoint")
		}
	}
	if s.VerifyReports == nil {
		return nil, app.NotFound("verify report")
	}
	r, err := s.VerifyReports.LatestVerifyReport(ctx, app.VerifyReportFilter{TenantID: p.tenantID, EndpointID: in.EndpointID})
	if err != nil {
		return nil, err
	}
	return &latestVerifyOutput{Body: r}, nil
}

// verifySummary is the status response's verify object: the latest
// report's outcome, or nil before the first verify run.
func (s *Server) verifySummary(ctx context.Context, tenantID string) (*VerifySummary, error) {
	if s.VerifyReports == nil {
		return nil, nil
	}
	r, err := s.VerifyReports.LatestVerifyReport(ctx, app.VerifyReportFilter{TenantID: tenantID})
	if app.ErrorCode(err) == app.ENOTFOUND {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	return &VerifySummary{JobID: r.JobID, State: r.State, FinishedAt: r.FinishedAt, Sampled: r.Sampled,
		Matched: r.Matched, Mismatched: r.Mismatched}, nil
}

// verifyRoutes registers the verify report operation; routes() calls it.
func (s *Server) verifyRoutes() {
	get(s, "verify.latest", "/api/v1/verify/latest", app.ScopeStatusRead, "The latest verify report (sampled test restore and repository check)", s.getLatestVerify)
	if o := s.api.OpenAPI().Paths["/api/v1/verify/latest"]; o != nil && o.Get != nil {
		o.Get.Description += " The report that finished last among the caller's endpoints (every managed tenant's for a provider key" +
			" without X-Service-Tenant), or the given endpoint's with `?endpointId=`. 404 `not_found` before the first verify run" +
			" and for another tenant's endpoint."
		if r401, ok := o.Get.Responses["401"]; ok && o.Get.Responses["404"] == nil {
			r := *r401 // the same problem+json body
			r.Description = "Not Found"
			o.Get.Responses["404"] = &r
		}
	}
}
