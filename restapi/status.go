package restapi

import (
	"context"
	"slices"
	"time"

	"backstop/app"
)

// Status and endpoint reads (scope status:read). They read only local state:
// a status call never waits for the network.

// StatusSummary is the answer of GET /api/v1/status.
type StatusSummary struct {
	TenantID         *string            `json:"tenantId" doc:"The tenant summarised; null for a provider key reading every tenant."`
	GeneratedAt      app.Time           `json:"generatedAt"`
	Jobs             app.JobCounts      `json:"jobs"`
	ProtectedObjects ProtectedCounts    `json:"protectedObjects"`
	Storage          StorageSummary     `json:"storage"`
	Verify           *VerifySummary     `json:"verify" doc:"Summary of the latest verify report; null until a verify run finished."`
	Endpoints        app.EndpointCounts `json:"endpoints"`
	Version          app.VersionInfo    `json:"version"`
	Archive          ArchiveSummary     `json:"archive"`
}

// ProtectedCounts counts protected objects (mailboxes, drives, IMAP accounts).
type ProtectedCounts = app.ProtectedCounts

// StorageSummary is the state of the storage targets, as GET /storage
// reports it for the same caller.
type StorageSummary struct {
	Targets   int    `json:"targets" doc:"Number of targets serving the tenant (all targets for a provider key without X-Service-Tenant)."`
	State     string `json:"state" enum:"ok,degraded,full,unreachable" doc:"The worst state of those targets."`
	UsedBytes int64  `json:"usedBytes" doc:"Bytes in use, summed over those targets that can tell (S3 targets count nothing)."`
	FreeBytes int64  `json:"freeBytes" doc:"Bytes free, summed over those targets that can tell."`
}

// VerifySummary summarises the latest verify report.
type VerifySummary struct {
	JobID      string   `json:"jobId"`
	State      string   `json:"state"`
	FinishedAt app.Time `json:"finishedAt"`
	Sampled    int      `json:"sampled"`
	Matched    int      `json:"matched"`
	Mismatched int      `json:"mismatched"`
}

// ArchiveSummary is the e-mail archive's size and chain state.
type ArchiveSummary struct {
	Messages   int64  `json:"messages"`
	ChainState string `json:"chainState" enum:"empty,intact,broken,unverified"`
}

type statusOutput struct{ Body StatusSummary }

func (s *Server) getStatus(ctx context.Context, _ *struct{}) (*statusOutput, error) {
	p := principalFrom(ctx)
	now := s.now()
	out := &statusOutput{}
	b := &out.Body
	b.GeneratedAt = app.At(now)
	if p.tenantID != "" {
		b.TenantID = app.Ptr(p.tenantID)
	}
	views, err := s.endpointViews(ctx, app.EndpointFilter{TenantID: p.tenantID}, now)
	if err != nil {
		return nil, err
	}
	b.Endpoints = app.CountEndpoints(views)
	if b.Jobs, err = s.Jobs.CountJobs(ctx, p.tenantID, now.Add(-24*time.Hour)); err != nil {
		return nil, err
	}
	if b.Version, err = s.versionInfo(ctx); err != nil {
		return nil, err
	}
	if b.Verify, err = s.verifySummary(ctx, p.tenantID); err != nil {
		return nil, err
	}
	storage, err := s.storageOverview(ctx, p.tenantID)
	if err != nil {
		return nil, err
	}
	b.Storage = StorageSummary{Targets: len(storage.Targets), State: storage.State, UsedBytes: storage.UsedBytes,
		FreeBytes: storage.FreeBytes}
	if s.Protected != nil {
		objs, err := s.Protected.ProtectedObjects(ctx, app.ProtectedObjectFilter{TenantID: p.tenantID})
		if err != nil {
			return nil, err
		}
		views := make([]app.ProtectedObjectView, len(objs))
		for i, o := range objs {
			views[i] = o.View(now)
		}
		b.ProtectedObjects = app.CountProtectedObjects(views)
	}
	if b.Archive, err = s.archiveSummary(ctx, p.tenantID); err != nil {
		return nil, err
	}
	return out, nil
}

func (s *Server) versionInfo(ctx context.Context) (app.VersionInfo, error) {
	st, err := s.Settings.Settings(ctx)
	if err != nil {
		return app.VersionInfo{}, err
	}
	c, err := s.Versions.VersionCheck(ctx, st.UpdateChannel)
	if err != nil && app.ErrorCode(err) != app.ENOTFOUND {
		return app.VersionInfo{}, err
	}
	v := app.BuildVersionInfo(s.opts.Version, st, c)
	if s.Maintenance != nil {
		m, err := s.Maintenance.Maintenance(ctx)
		if err != nil && app.ErrorCode(err) != app.ENOTFOUND {
			return app.VersionInfo{}, err
		}
		v.Maintenance = m
	}
	return v, nil
}

type versionOutput struct{ Body app.VersionInfo }

func (s *Server) getVersion(ctx context.Context, _ *struct{}) (*versionOutput, error) {
	v, err := s.versionInfo(ctx)
	return &versionOutput{Body: v}, err
}

type listEndpointsInput struct {
	Profile        string `query:"profile" enum:"server,client" doc:"Only servers or only clients."`
	NeedsAttention bool   `query:"needsAttention" doc:"Only machines whose attention is set (not revoked ones)."`
}

type endpointsOutput struct{ Body endpointsOutputBody }

func (s *Server) listEndpoints(ctx context.Context, in *listEndpointsInput) (*endpointsOutput, error) {
	p := principalFrom(ctx)
	views, err := s.endpointViews(ctx, app.EndpointFilter{TenantID: p.tenantID, Profile: in.Profile}, s.now())
	if err != nil {
		return nil, err
	}
	if in.NeedsAttention {
		views = slices.DeleteFunc(views, func(v app.EndpointView) bool { return v.Attention == nil })
	}
	return &endpointsOutput{Body: endpointsOutputBody{Items: views, Total: len(views)}}, nil
}

// endpointViewer is an optional fast path of app.EndpointService (the
// store implements it): views computed from its cached endpoints without
// copying them, which listing 10,000 endpoints otherwise spends a quarter
// of its time on.
type endpointViewer interface {
	EndpointViews(ctx context.Context, f app.EndpointFilter, now time.Time, rules app.EndpointRules) ([]app.EndpointView, error)
}

// endpointViews returns the views of the endpoints f selects, in id order;
// never nil, so an empty list is [] on the wire.
func (s *Server) endpointViews(ctx context.Context, f app.EndpointFilter, now time.Time) ([]app.EndpointView, error) {
	if v, ok := s.Endpoints.(endpointViewer); ok {
		return v.EndpointViews(ctx, f, now, s.opts.Rules)
	}
	eps, err := s.Endpoints.Endpoints(ctx, f)
	if err != nil {
		return nil, err
	}
	views := make([]app.EndpointView, len(eps))
	for i, e := range eps {
		views[i] = e.View(now, s.opts.Rules)
	}
	return views, nil
}

type endpointOutput struct{ Body app.EndpointView }

func (s *Server) getEndpoint(ctx context.Context, in *idInput) (*endpointOutput, error) {
	e, err := s.Endpoints.Endpoint(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	if p := principalFrom(ctx); p.tenantID != "" && e.TenantID != p.tenantID {
		return nil, app.NotFound("endpoint")
	}
	actedFor(ctx, e.TenantID)
	return &endpointOutput{Body: e.View(s.now(), s.opts.Rules)}, nil
}
