package restapi

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"

	"backstop/app"

	"github.com/danielgtaylor/huma/v2"
)

// Endpoint management for the web interface (session only): pre-create an
// endpoint with its enrollment token, rename it, change what and when it
// backs up, and revoke it. Revocation is immediate and irreversible: the
// endpoint's secret is refused by /agent/v1 and by its repository from the
// next request on; the endpoint stays listed and its repository stays.

type endpointSettings struct {
	DisplayName *string   `json:"displayName,omitempty" maxLength:"200"`
	Schedule    *string   `json:"schedule,omitempty" maxLength:"100" doc:"Cron expression (5 fields, or @daily, @every 6h); empty for on demand only."`
	Paths       *[]string `json:"paths,omitempty" maxItems:"100" doc:"Absolute paths to back up."`
	Excludes    *[]string `json:"excludes,omitempty" maxItems:"200" doc:"restic exclude patterns."`
	// PinnedAgentVersion only on PATCH (CONTRACT §9): absent leaves the pin.
	PinnedAgentVersion pinnedVersion `json:"pinnedAgentVersion,omitempty"`
}

// pinnedVersion is a PATCH field that may be absent (leave the pin), null
// (unpin: the agent follows the appliance's build) or a semantic version.
type pinnedVersion struct {
	Sent    bool
	Version string // "" for null
}

func (p *pinnedVersion) UnmarshalJSON(b []byte) error {
	p.Sent = true
	if string(b) == "null" {
		p.Version = ""
		return nil
	}
	return json.Unmarshal(b, &p.Version)
}

// Schema describes the field to huma: a string or null.
func (pinnedVersion) Schema(huma.Registry) *huma.Schema {
	return &huma.Schema{Type: huma.TypeString, Nullable: true, MaxLength: app.Ptr(64),
		Description: "Keep this endpoint's agent at this version (its self-update then installs only that version, when the appliance carries it); null unpins."}
}

// apply validates the settings and sets them on e.
func (b *endpointSettings) apply(e *app.Endpoint) error {
	if b.DisplayName != nil {
		e.DisplayName = strings.TrimSpace(*b.DisplayName)
	}
	if b.Schedule != nil {
		sched := strings.TrimSpace(*b.Schedule)
		if err := app.ValidateSchedule(sched); err != nil {
			return app.FieldError("body.schedule", "%s", app.ErrorMessage(err))
		}
		e.Schedule = sched
	}
	if b.Paths != nil {
		for _, p := range *b.Paths {
			if !filepath.IsAbs(p) && !strings.HasPrefix(p, "/") {
				return app.FieldError("body.paths", "path %q is not absolute", p)
			}
		}
		e.Paths = *b.Paths
	}
	if b.Excludes != nil {
		for _, x := range *b.Excludes {
			if strings.TrimSpace(x) == "" {
				return app.FieldError("body.excludes", "exclude patterns must not be blank")
			}
		}
		e.Excludes = *b.Excludes
	}
	if b.PinnedAgentVersion.Sent {
		v := strings.TrimSpace(b.PinnedAgentVersion.Version)
		if v != "" && !app.ValidSemver(v) {
			return app.FieldError("body.pinnedAgentVersion", "%q is not a semantic version (x.y.z)", v)
		}
		e.PinnedAgentVersion = strings.TrimPrefix(v, "v")
	}
	return nil
}

type createEndpointInput struct {
	Body struct {
		TenantID    string    `json:"tenantId" minLength:"1" maxLength:"64"`
		Profile     string    `json:"profile" enum:"server,client"`
		DisplayName *string   `json:"displayName,omitempty" maxLength:"200"`
		Schedule    *string   `json:"schedule,omitempty" maxLength:"100" doc:"Cron expression; default daily at 01:00 UTC; empty for on demand only."`
		Paths       *[]string `json:"paths,omitempty" maxItems:"100" doc:"Absolute paths to back up."`
		Excludes    *[]string `json:"excludes,omitempty" maxItems:"200" doc:"restic exclude patterns."`
	}
}

type createEndpointOutput struct {
	Body struct {
		Endpoint       app.EndpointView `json:"endpoint"`
		Token          string           `json:"token" doc:"One-time enrollment token for this endpoint; shown once."`
		ExpiresAt      app.Time         `json:"expiresAt"`
		InstallCommand string           `json:"installCommand" doc:"One line to paste on the machine."`
	}
}

// createEndpoint pre-creates an endpoint (never seen) and a token that
// enrolls the machine as that endpoint.
func (s *Server) createEndpoint(ctx context.Context, in *createEndpointInput) (*createEndpointOutput, error) {
	p := principalFrom(ctx)
	b := in.Body
	if !canManageTenant(p, b.TenantID) {
		return nil, app.FieldError("body.tenantId", "no such tenant")
	}
	if _, err := s.Tenants.Tenant(ctx, b.TenantID); err != nil {
		return nil, app.FieldError("body.tenantId", "no such tenant")
	}
	actedFor(ctx, b.TenantID)
	now := s.now()
	e := &app.Endpoint{ID: app.NewID(app.PrefixEndpoint), TenantID: b.TenantID, Profile: b.Profile,
		Status: app.EndpointActive, Schedule: app.DefaultEndpointSchedule, CreatedAt: now}
	settings := endpointSettings{DisplayName: b.DisplayName, Schedule: b.Schedule, Paths: b.Paths, Excludes: b.Excludes}
	if err := settings.apply(e); err != nil {
		return nil, err
	}
	if err := s.Endpoints.CreateEndpoint(ctx, e); err != nil {
		return nil, err
	}
	value, t := app.NewEnrollmentToken(b.TenantID, b.Profile, now)
	t.EndpointID = e.ID
	if err := s.Enrollment.CreateEnrollmentToken(ctx, t); err != nil {
		return nil, err
	}
	out := &createEndpointOutput{}
	out.Body.Endpoint, out.Body.Token, out.Body.ExpiresAt = e.View(now, s.opts.Rules), value, app.At(t.ExpiresAt)
	out.Body.InstallCommand = InstallCommand(s.publicBase(ctx), value, b.Profile)
	return out, nil
}

type updateEndpointInput struct {
	ID   string `path:"id" maxLength:"64"`
	Body endpointSettings
}

// updateEndpoint renames an endpoint or changes its schedule, paths or
// excludes; the agent picks the change up at its next heartbeat.
func (s *Server) updateEndpoint(ctx context.Context, in *updateEndpointInput) (*endpointOutput, error) {
	if err := s.manageableEndpoint(ctx, in.ID); err != nil {
		return nil, err
	}
	e, err := s.Endpoints.UpdateEndpoint(ctx, in.ID, func(e *app.Endpoint) error {
		if e.Status != app.EndpointActive {
			return app.Errorf(app.ECONFLICT, "endpoint %s is revoked", e.ID)
		}
		return in.Body.apply(e)
	})
	if err != nil {
		return nil, err
	}
	return &endpointOutput{Body: e.View(s.now(), s.opts.Rules)}, nil
}

// revokeEndpoint revokes an endpoint; revoking a revoked endpoint keeps the
// first revocation time.
func (s *Server) revokeEndpoint(ctx context.Context, in *idInput) (*endpointOutput, error) {
	if err := s.manageableEndpoint(ctx, in.ID); err != nil {
		return nil, err
	}
	now := s.now()
	e, err := s.Endpoints.UpdateEndpoint(ctx, in.ID, func(e *app.Endpoint) error {
		if e.Status != app.EndpointRevoked {
			e.Status, e.RevokedAt = app.EndpointRevoked, &now
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &endpointOutput{Body: e.View(now, s.opts.Rules)}, nil
}

// manageableEndpoint is not found for another tenant's endpoint.
func (s *Server) manageableEndpoint(ctx context.Context, id string) error {
	e, err := s.Endpoints.Endpoint(ctx, id)
	if err != nil {
		return err
	}
	if p := principalFrom(ctx); !canManageTenant(p, e.TenantID) || (p.tenantID != "" && p.tenantID != e.TenantID) {
		return app.NotFound("endpoint")
	}
	actedFor(ctx, e.TenantID)
	return nil
}
