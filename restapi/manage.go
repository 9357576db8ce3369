package restapi

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"backstop/app"
)

// Management operations for the web interface (session only).

// pageInput is the paging of CONTRACT §2: limit (default 100, max 1000) and
// the opaque cursor of the previous page's nextCursor.
type pageInput struct {
	Limit  int    `query:"limit" minimum:"1" maximum:"1000" default:"100"`
	Cursor string `query:"cursor" maxLength:"64" doc:"nextCursor of the previous page."`
}

// nextCursor is the cursor after a page of n items whose last id is last,
// or nil when the page was not full (nothing follows).
func nextCursor(n, limit int, last string) *string {
	if n < limit || n == 0 {
		return nil
	}
	return &last
}

type tenantsOutput struct {
	Body struct {
		Items      []*app.Tenant `json:"items" doc:"In creation order."`
		NextCursor *string       `json:"nextCursor"`
	}
}

func (s *Server) listTenants(ctx context.Context, in *pageInput) (*tenantsOutput, error) {
	p := principalFrom(ctx)
	out := &tenantsOutput{}
	if !p.provider {
		t, err := s.Tenants.Tenant(ctx, p.user.TenantID)
		if err != nil {
			return nil, err
		}
		out.Body.Items = []*app.Tenant{t}
		return out, nil
	}
	if in.Cursor != "" && !app.HasPrefix(in.Cursor, app.PrefixTenant) {
		return nil, app.FieldError("query.cursor", "cursor is not one this server gave out")
	}
	ts, err := s.Tenants.Tenants(ctx, app.TenantFilter{AfterID: in.Cursor, Limit: in.Limit})
	if err != nil {
		return nil, err
	}
	out.Body.Items = nonNilSlice(ts)
	if len(ts) > 0 {
		out.Body.NextCursor = nextCursor(len(ts), in.Limit, ts[len(ts)-1].ID)
	}
	return out, nil
}

type createTenantInput struct {
	Body struct {
		Name string `json:"name" minLength:"1" maxLength:"200"`
	}
}

type tenantOutput struct{ Body *app.Tenant }

func (s *Server) createTenant(ctx context.Context, in *createTenantInput) (*tenantOutput, error) {
	if !principalFrom(ctx).provider {
		return nil, forbidden("Only provider administrators create tenants.")
	}
	t := &app.Tenant{Name: strings.TrimSpace(in.Body.Name)}
	if err := s.Tenants.CreateTenant(ctx, t); err != nil {
		return nil, err
	}
	actedFor(ctx, t.ID)
	return &tenantOutput{Body: t}, nil
}

func forbidden(msg string) *Problem { return newProblem("forbidden", msg) }

// canManageTenant reports whether the administrator may act for tenant.
func canManageTenant(p *principal, tenantID string) bool {
	return p.provider || p.user.TenantID == tenantID
}

type keysOutput struct {
	Body struct {
		Items      []*app.APIKey `json:"items" doc:"Newest first; revoked keys stay listed."`
		NextCursor *string       `json:"nextCursor"`
	}
}

func (s *Server) listKeys(ctx context.Context, in *pageInput) (*keysOutput, error) {
	p := principalFrom(ctx)
	if in.Cursor != "" && !app.HasPrefix(in.Cursor, app.PrefixKey) {
		return nil, app.FieldError("query.cursor", "cursor is not one this server gave out")
	}
	f := app.KeyFilter{BeforeID: in.Cursor, Limit: in.Limit}
	if !p.provider {
		f.TenantID = &p.user.TenantID
	} else if p.tenantID != "" {
		f.TenantID = &p.tenantID
	}
	keys, err := s.Keys.Keys(ctx, f)
	if err != nil {
		return nil, err
	}
	out := &keysOutput{}
	out.Body.Items = nonNilSlice(keys)
	if len(keys) > 0 {
		out.Body.NextCursor = nextCursor(len(keys), in.Limit, keys[len(keys)-1].ID)
	}
	return out, nil
}

type createKeyInput struct {
	Body struct {
		TenantID      string   `json:"tenantId,omitempty" doc:"Tenant the key belongs to; omit for a provider key."`
		Name          string   `json:"name" minLength:"1" maxLength:"100"`
		Scopes        []string `json:"scopes" minItems:"1" uniqueItems:"true" enum:"status:read,jobs:read,items:read,users:read,archive:read,restore:write,verify:write,users:write,webhooks:manage"`
		ExpiresInDays *int     `json:"expiresInDays" required:"true" nullable:"true" enum:"30,90,180,365" doc:"30, 90, 180 or 365 days, or null for no expiry."`
		Provider      bool     `json:"provider,omitempty" doc:"A provider key works across every tenant (provider edition)."`
	}
}

type createdKey struct {
	*app.APIKey
	Value string `json:"value" doc:"The key. Shown once: it cannot be recovered, only revoked and replaced."`
}

type createKeyOutput struct{ Body createdKey }

func (s *Server) createKey(ctx context.Context, in *createKeyInput) (*createKeyOutput, error) {
	p := principalFrom(ctx)
	b := in.Body
	k := &app.APIKey{ID: app.NewID(app.PrefixKey), Name: strings.TrimSpace(b.Name), Provider: b.Provider, CreatedBy: p.user.ID}
	switch {
	case b.Provider && s.opts.Edition != app.EditionProvider:
		return nil, app.FieldError("provider", "provider keys exist only in the provider edition")
	case b.Provider && !p.provider:
		return nil, forbidden("Only provider administrators create provider keys.")
	case b.Provider && b.TenantID != "":
		return nil, app.FieldError("tenantId", "a provider key belongs to no tenant; omit tenantId")
	case !b.Provider:
		if b.TenantID == "" {
			b.TenantID = p.user.TenantID
		}
		if b.TenantID == "" {
			return nil, app.FieldError("tenantId", "tenantId is required for a tenant key")
		}
		if !canManageTenant(p, b.TenantID) {
			return nil, app.NotFound("tenant")
		}
		if _, err := s.Tenants.Tenant(ctx, b.TenantID); err != nil {
			return nil, app.FieldError("tenantId", "no such tenant")
		}
		k.TenantID = b.TenantID
	}
	if k.Name == "" {
		return nil, app.FieldError("name", "name must not be blank")
	}
	for _, sc := range b.Scopes {
		if !slices.Contains(k.Scopes, app.Scope(sc)) {
			k.Scopes = append(k.Scopes, app.Scope(sc))
		}
	}
	now := s.now()
	k.CreatedAt = app.At(now)
	if b.ExpiresInDays != nil {
		k.ExpiresAt = app.Ptr(app.At(now.Add(time.Duration(*b.ExpiresInDays) * 24 * time.Hour)))
	}
	value := app.NewKeyValue(k.ID)
	k.Fingerprint = app.Fingerprint(value)
	if err := s.Keys.CreateKey(ctx, k); err != nil {
		return nil, err
	}
	actedFor(ctx, k.TenantID)
	return &createKeyOutput{Body: createdKey{APIKey: k, Value: value}}, nil
}

type idInput struct {
	ID string `path:"id" maxLength:"64"`
}

type keyOutput struct{ Body *app.APIKey }

func (s *Server) revokeKey(ctx context.Context, in *idInput) (*keyOutput, error) {
	p := principalFrom(ctx)
	k, err := s.Keys.Key(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	if (k.Provider && !p.provider) || (!k.Provider && !canManageTenant(p, k.TenantID)) {
		return nil, app.NotFound("API key")
	}
	actedFor(ctx, k.TenantID)
	if err := s.Keys.RevokeKey(ctx, k.ID, s.now()); err != nil {
		return nil, err
	}
	k, err = s.Keys.Key(ctx, k.ID)
	return &keyOutput{Body: k}, err
}

type enrollmentInput struct {
	Body struct {
		TenantID string `json:"tenantId" minLength:"1" maxLength:"64"`
		Profile  string `json:"profile" enum:"server,client"`
	}
}

type enrollmentOutput struct {
	Body struct {
		ID             string   `json:"id"`
		Token          string   `json:"token" doc:"One-time token; shown once."`
		TenantID       string   `json:"tenantId"`
		Profile        string   `json:"profile"`
		ExpiresAt      app.Time `json:"expiresAt"`
		InstallCommand string   `json:"installCommand" doc:"One line to paste on the machine."`
	}
}

func (s *Server) createEnrollmentToken(ctx context.Context, in *enrollmentInput) (*enrollmentOutput, error) {
	p := principalFrom(ctx)
	if !canManageTenant(p, in.Body.TenantID) {
		return nil, app.FieldError("tenantId", "no such tenant")
	}
	if _, err := s.Tenants.Tenant(ctx, in.Body.TenantID); err != nil {
		return nil, app.FieldError("tenantId", "no such tenant")
	}
	actedFor(ctx, in.Body.TenantID)
	value, t := app.NewEnrollmentToken(in.Body.TenantID, in.Body.Profile, s.now())
	if err := s.Enrollment.CreateEnrollmentToken(ctx, t); err != nil {
		return nil, err
	}
	out := &enrollmentOutput{}
	out.Body.ID, out.Body.Token, out.Body.TenantID, out.Body.Profile = t.ID, value, t.TenantID, t.Profile
	out.Body.ExpiresAt = app.At(t.ExpiresAt)
	out.Body.InstallCommand = InstallCommand(s.publicBase(ctx), value, t.Profile)
	return out, nil
}

// InstallCommand is the one line an administrator pastes on a machine, for
// an appliance reached at base (its public URL).
func InstallCommand(base, token, profile string) string {
	base = strings.TrimRight(base, "/")
	return "curl -fsSL " + base + "/install/agent.sh | sudo sh -s -- --server " + base + " --token " + token + " --profile " + profile
}

// publicBase is the address agents should use: public_url when configured,
// else the address the administrator's browser reached this request at.
func (s *Server) publicBase(ctx context.Context) string {
	if s.opts.PublicURL != "" {
		return s.opts.PublicURL
	}
	return stateFrom(ctx).base
}

type settingsOutput struct{ Body *app.Settings }

func (s *Server) getSettings(ctx context.Context, _ *struct{}) (*settingsOutput, error) {
	st, err := s.Settings.Settings(ctx)
	return &settingsOutput{Body: st}, err
}

type updateSettingsInput struct {
	Body struct {
		UpdateCheck   *bool   `json:"updateCheck,omitempty"`
		UpdateChannel *string `json:"updateChannel,omitempty" enum:"stable,beta"`
	}
}

func (s *Server) updateSettings(ctx context.Context, in *updateSettingsInput) (*settingsOutput, error) {
	if !principalFrom(ctx).provider {
		return nil, forbidden("Only provider administrators change appliance settings.")
	}
	now := s.now()
	st, err := s.Settings.UpdateSettings(ctx, func(st *app.Settings) error {
		if in.Body.UpdateCheck != nil {
			if *in.Body.UpdateCheck && !st.UpdateCheck {
				st.UpdateCheckEnabledAt = &now
			}
			st.UpdateCheck = *in.Body.UpdateCheck
		}
		if in.Body.UpdateChannel != nil {
			st.UpdateChannel = *in.Body.UpdateChannel
		}
		return nil
	})
	return &settingsOutput{Body: st}, err
}

type auditInput struct {
	TenantID string    `query:"tenantId" maxLength:"64"`
	ActorID  string    `query:"actorId" maxLength:"64"`
	Since    time.Time `query:"since" doc:"RFC 3339 time; rows at or after it."`
	Until    time.Time `query:"until" doc:"RFC 3339 time; rows before it."`
	Limit    int       `query:"limit" minimum:"1" maximum:"1000" default:"100"`
	Cursor   string    `query:"cursor" maxLength:"32"`
}

type auditOutput struct {
	Body struct {
		Items      []*app.AuditEntry `json:"items"`
		NextCursor *string           `json:"nextCursor"`
	}
}

func (s *Server) listAudit(ctx context.Context, in *auditInput) (*auditOutput, error) {
	p := principalFrom(ctx)
	f := app.AuditFilter{TenantID: in.TenantID, ActorID: in.ActorID, Limit: in.Limit}
	if !p.provider {
		if in.TenantID != "" && in.TenantID != p.user.TenantID {
			return nil, app.FieldError("query.tenantId", "no such tenant")
		}
		f.TenantID = p.user.TenantID
	}
	if !in.Since.IsZero() {
		f.Since = &in.Since
	}
	if !in.Until.IsZero() {
		f.Until = &in.Until
	}
	if in.Cursor != "" {
		id, err := strconv.ParseInt(in.Cursor, 10, 64)
		if err != nil || id <= 0 {
			return nil, app.FieldError("query.cursor", "cursor is not one this server gave out")
		}
		f.BeforeID = id
	}
	rows, err := s.Audit.AuditEntries(ctx, f)
	if err != nil {
		return nil, err
	}
	out := &auditOutput{}
	out.Body.Items = nonNilSlice(rows)
	if len(rows) == f.Limit && len(rows) > 0 {
		out.Body.NextCursor = app.Ptr(strconv.FormatInt(rows[len(rows)-1].ID, 10))
	}
	return out, nil
}

func nonNilSlice[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
