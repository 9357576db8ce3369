package restapi

import (
	"context"
	"net/http"
	"strings"

	"backstop/app"
)

// Sources (CONTRACT §7, §12): web session only. Tenant administrators see
// and change their tenant's sources, provider administrators any (one
// tenant with X-Service-Tenant). Creating or reconnecting a source checks
// its login first: 422 source_auth_failed, source_tls_failed,
// source_unreachable or source_check_failed with the reason. The password
// is sealed and never shown.

func (s *Server) sourceRoutes() {
	op(s, http.MethodGet, "sources.list", "/api/v1/sources", accessSession, "", "List backup sources", s.listSources)
	op(s, http.MethodPost, "sources.create", "/api/v1/sources", accessSession, "",
		"Add an IMAP account or a Microsoft 365 tenant; its sign-in is checked first (422 source_auth_failed, source_tls_failed, source_unreachable or source_check_failed with the reason: for Microsoft 365 the AADSTS reason, or the missing permission with the admin-consent link). An IMAP account becomes one protected object (kind imap, protected) and one directory entry (imap_account); a Microsoft 365 tenant's directory is synced right away (a directory_sync job), its users protected under autoProtect.",
		s.createSource)
	op(s, http.MethodPatch, "sources.update", "/api/v1/sources/{id}", accessSession, "",
		"Change a source; a change of host, port, security, password, trusted fingerprint or client secret is checked before it is saved", s.updateSource)
	op(s, http.MethodPost, "sources.sync", "/api/v1/sources/{id}/sync", accessSession, "",
		"Sync a Microsoft 365 source's directory now (202 with the directory_sync job; the one already queued or running, if any)", s.syncSource)
	op(s, http.MethodDelete, "sources.delete", "/api/v1/sources/{id}", accessSession, "",
		"Delete a source; its protected objects stay, unprotected, with their snapshots until retention removes them", s.deleteSource)
}

type sourcesOutput struct {
	Body struct {
		Items      []app.SourceView `json:"items" doc:"In creation order."`
		NextCursor *string          `json:"nextCursor"`
	}
}

// sourceView adds the source's protected objects.
func (s *Server) sourceView(ctx context.Context, src *app.Source) (app.SourceView, error) {
	var ids []string
	if s.Protected != nil {
		objs, err := s.Protected.ProtectedObjects(ctx, app.ProtectedObjectFilter{SourceID: src.ID})
		if err != nil {
			return app.SourceView{}, err
		}
		for _, o := range objs {
			ids = append(ids, o.ID)
		}
	}
	return src.View(ids), nil
}

// sessionTenant is the tenant a session administrator's reads cover: their
// own, or for a provider administrator the X-Service-Tenant one ("" = all).
func sessionTenant(p *principal) string {
	if !p.provider {
		return p.user.TenantID
	}
	return p.tenantID
}

func (s *Server) sourcesService() (app.SourceService, error) {
	if s.Sources == nil {
		return nil, app.Errorf(app.ENOTIMPLEMENTED, "Sources are not available in this build.")
	}
	return s.Sources, nil
}

func (s *Server) listSources(ctx context.Context, in *pageInput) (*sourcesOutput, error) {
	svc, err := s.sourcesService()
	if err != nil {
		return nil, err
	}
	if in.Cursor != "" && !app.HasPrefix(in.Cursor, app.PrefixSource) {
		return nil, app.FieldError("query.cursor", "cursor is not one this server gave out")
	}
	list, err := svc.Sources(ctx, app.SourceFilter{TenantID: sessionTenant(principalFrom(ctx)), AfterID: in.Cursor, Limit: in.Limit})
	if err != nil {
		return nil, err
	}
	out := &sourcesOutput{}
	out.Body.Items = []app.SourceView{}
	for _, src := range list {
		v, err := s.sourceView(ctx, src)
		if err != nil {
			return nil, err
		}
		out.Body.Items = append(out.Body.Items, v)
	}
	if len(list) > 0 {
		out.Body.NextCursor = nextCursor(len(list), in.Limit, list[len(list)-1].ID)
	}
	return out, nil
}

type createSourceInput struct {
	Body struct {
		Kind             string `json:"kind" enum:"imap,m365"`
		TenantID         string `json:"tenantId" minLength:"1" maxLength:"64"`
		DisplayName      string `json:"displayName,omitempty" maxLength:"200" doc:"Default: the user name (imap), \"Microsoft 365 <azureTenantId>\" (m365)."`
		Host             string `json:"host,omitempty" maxLength:"253" doc:"imap: required."`
		Port             int    `json:"port,omitempty" minimum:"0" maximum:"65535" doc:"imap: required."`
		Security         string `json:"security,omitempty" enum:"none,starttls,tls" doc:"imap: required."`
		Username         string `json:"username,omitempty" maxLength:"320" doc:"imap: required."`
		Password         string `json:"password,omitempty" maxLength:"1024" doc:"imap: required. Stored sealed; never shown again."`
		TrustFingerprint string `json:"trustFingerprint,omitempty" maxLength:"128" doc:"imap: trust the server certificate with this SHA-256 fingerprint (64 hex digits, colons allowed) instead of verifying its chain: for self-signed lab servers only."`
		Schedule         string `json:"schedule,omitempty" maxLength:"100" doc:"Cron expression (UTC) of the backups; default daily."`
		AzureTenantID    string `json:"azureTenantId,omitempty" maxLength:"253" doc:"m365: required. The customer's Microsoft Entra tenant id (GUID) or domain."`
		ClientID         string `json:"clientId,omitempty" maxLength:"36" doc:"m365: required. The app registration's application (client) id."`
		ClientSecret     string `json:"clientSecret,omitempty" maxLength:"1024" doc:"m365: required. Stored sealed; never shown again."`
		GraphURL         string `json:"graphUrl,omitempty" maxLength:"2048" doc:"m365: Graph base URL (default https://graph.microsoft.com/v1.0; national clouds differ)."`
		LoginURL         string `json:"loginUrl,omitempty" maxLength:"2048" doc:"m365: identity platform base URL (default https://login.microsoftonline.com)."`
		AutoProtect      *bool  `json:"autoProtect,omitempty" doc:"m365: protect users that appear at a directory sync (default true)."`
	}
}

type sourceOutput struct {
	Status int
	Body   app.SourceView
}

func (s *Server) createSource(ctx context.Context, in *createSourceInput) (*sourceOutput, error) {
	svc, err := s.sourcesService()
	if err != nil {
		return nil, err
	}
	b := in.Body
	p := principalFrom(ctx)
	if !canManageTenant(p, b.TenantID) || (p.tenantID != "" && p.tenantID != b.TenantID) {
		return nil, app.FieldError("tenantId", "no such tenant")
	}
	if _, err := s.Tenants.Tenant(ctx, b.TenantID); err != nil {
		return nil, app.FieldError("tenantId", "no such tenant")
	}
	actedFor(ctx, b.TenantID)
	if b.Kind == app.SourceIMAP {
		for field, missing := range map[string]bool{"host": b.Host == "", "port": b.Port == 0, "security": b.Security == "",
			"username": b.Username == "", "password": b.Password == ""} {
			if missing {
				return nil, app.FieldError("body."+field, "%s is required for an imap source", field)
			}
		}
	} else {
		for field, missing := range map[string]bool{"azureTenantId": b.AzureTenantID == "", "clientId": b.ClientID == "",
			"clientSecret": b.ClientSecret == ""} {
			if missing {
				return nil, app.FieldError("body."+field, "%s is required for an m365 source", field)
			}
		}
	}
	src, err := svc.Create(ctx, app.SourceSpec{TenantID: b.TenantID, Kind: b.Kind, DisplayName: b.DisplayName, Schedule: b.Schedule,
		IMAP:        app.IMAPSettings{Host: b.Host, Port: b.Port, Security: b.Security, Username: b.Username, TrustFingerprint: b.TrustFingerprint},
		Password:    b.Password,
		M365:        app.M365Settings{AzureTenantID: b.AzureTenantID, ClientID: b.ClientID, GraphURL: b.GraphURL, LoginURL: b.LoginURL},
		AutoProtect: b.AutoProtect, ClientSecret: b.ClientSecret})
	if err != nil {
		return nil, err
	}
	v, err := s.sourceView(ctx, src)
	if err != nil {
		return nil, err
	}
	return &sourceOutput{Status: http.StatusCreated, Body: v}, nil
}

// visibleSource returns the source when the administrator may manage it;
// another tenant's is the same not-found as a missing one.
func (s *Server) visibleSource(ctx context.Context, svc app.SourceService, id string) (*app.Source, error) {
	src, err := svc.Source(ctx, id)
	if err != nil {
		return nil, err
	}
	p := principalFrom(ctx)
	if !canManageTenant(p, src.TenantID) || (p.tenantID != "" && p.tenantID != src.TenantID) {
		return nil, app.NotFound("source")
	}
	actedFor(ctx, src.TenantID)
	return src, nil
}

type updateSourceInput struct {
	ID   string `path:"id" maxLength:"64"`
	Body struct {
		DisplayName      *string `json:"displayName,omitempty" minLength:"1" maxLength:"200"`
		Host             *string `json:"host,omitempty" minLength:"1" maxLength:"253"`
		Port             *int    `json:"port,omitempty" minimum:"1" maximum:"65535"`
		Security         *string `json:"security,omitempty" enum:"none,starttls,tls"`
		Password         *string `json:"password,omitempty" minLength:"1" maxLength:"1024" doc:"A new password; checked, sealed, never shown."`
		TrustFingerprint *string `json:"trustFingerprint,omitempty" maxLength:"128" doc:"A new trusted certificate fingerprint; empty string to verify the chain again."`
		Schedule         *string `json:"schedule,omitempty" maxLength:"100" doc:"Cron expression (UTC); empty string for the default daily schedule."`
		Disabled         *bool   `json:"disabled,omitempty" doc:"A disabled source's objects are not backed up on schedule."`
		ClientSecret     *string `json:"clientSecret,omitempty" minLength:"1" maxLength:"1024" doc:"m365: a new client secret; checked, sealed, never shown."`
		AutoProtect      *bool   `json:"autoProtect,omitempty" doc:"m365: protect users that appear at a directory sync."`
	}
}

func (s *Server) updateSource(ctx context.Context, in *updateSourceInput) (*sourceOutput, error) {
	svc, err := s.sourcesService()
	if err != nil {
		return nil, err
	}
	if _, err := s.visibleSource(ctx, svc, in.ID); err != nil {
		return nil, err
	}
	b := in.Body
	if b.DisplayName != nil {
		b.DisplayName = app.Ptr(strings.TrimSpace(*b.DisplayName))
	}
	src, err := svc.Update(ctx, in.ID, app.SourceUpdate{DisplayName: b.DisplayName, Host: b.Host, Port: b.Port, Security: b.Security,
		Password: b.Password, TrustFingerprint: b.TrustFingerprint, Schedule: b.Schedule, Disabled: b.Disabled,
		ClientSecret: b.ClientSecret, AutoProtect: b.AutoProtect})
	if err != nil {
		return nil, err
	}
	v, err := s.sourceView(ctx, src)
	if err != nil {
		return nil, err
	}
	return &sourceOutput{Status: http.StatusOK, Body: v}, nil
}

type deleteSourceOutput struct{ Status int }

func (s *Server) deleteSource(ctx context.Context, in *idInput) (*deleteSourceOutput, error) {
	svc, err := s.sourcesService()
	if err != nil {
		return nil, err
	}
	if _, err := s.visibleSource(ctx, svc, in.ID); err != nil {
		return nil, err
	}
	if err := svc.Delete(ctx, in.ID); err != nil {
		return nil, err
	}
	return &deleteSourceOutput{Status: http.StatusNoContent}, nil
}

// syncSource starts a directory sync of a Microsoft 365 source now. While
// one is queued or running, that job is the answer.
func (s *Server) syncSource(ctx context.Context, in *idInput) (*startJobOutput, error) {
	svc, err := s.sourcesService()
	if err != nil {
		return nil, err
	}
	src, err := s.visibleSource(ctx, svc, in.ID)
	if err != nil {
		return nil, err
	}
	if s.JobRunner == nil {
		return nil, app.Errorf(app.ENOTIMPLEMENTED, "Jobs are not available in this build.")
	}
	if s.JobStore != nil {
		if j, err := s.JobStore.ActiveJobFor(ctx, app.ActionSync, app.TargetSource, src.ID); err == nil {
			return &startJobOutput{Status: http.StatusAccepted, Body: j}, nil
		} else if app.ErrorCode(err) != app.ENOTFOUND {
			return nil, err
		}
	}
	j, err := s.JobRunner.Submit(ctx, app.JobRequest{TenantID: src.TenantID, Action: app.ActionSync, TargetType: app.TargetSource,
		TargetID: src.ID, Trigger: s.trigger(ctx)})
	if err != nil {
		return nil, err
	}
	return &startJobOutput{Status: http.StatusAccepted, Body: j}, nil
}
