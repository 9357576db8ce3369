package restapi

import (
	"context"
	"net/http"

	"backstop/app"
	"backstop/app/archive"

	"github.com/danielgtaylor/huma/v2"
)

// The email archive's intake and chain (CONTRACT §14): status, channels,
// the chain, checkpoints, record and consistency proofs (archive:read);
// creating and deleting channels (web session only, CONTRACT §7). The
// policies' routes (holds, retention, search, export, evidence) are in
// archive_policy.go.

func (s *Server) archiveRoutes() {
	get(s, "archive.status", "/api/v1/archive/status", app.ScopeArchiveRead, "The tenant's archive: messages, bytes, chain and channels", s.getArchiveStatus)
	get(s, "archiveChannels.list", "/api/v1/archive/channels", app.ScopeArchiveRead, "The tenant's capture channels (not paged)", s.listArchiveChannels)
	op(s, http.MethodPost, "archiveChannels.create", "/api/v1/archive/channels", accessSession, "",
		"Create a capture channel; an smtp_journal channel's answer carries its journal recipient address", s.createArchiveChannel)
	op(s, http.MethodDelete, "archiveChannels.delete", "/api/v1/archive/channels/{id}", accessSession, "",
		"Stop a capture channel (its records keep naming it; its address is refused from then on)", s.deleteArchiveChannel)
	get(s, "archiveChain.get", "/api/v1/archive/chain", app.ScopeArchiveRead, "The chain's latest checkpoint, state and verifier key", s.getArchiveChain)
	get(s, "archiveChain.checkpoint", "/api/v1/archive/chain/checkpoint", app.ScopeArchiveRead,
		"The latest signed checkpoint (C2SP signed note, text/plain)", s.getArchiveCheckpoint)
	if o := s.api.OpenAPI().Paths["/api/v1/archive/chain/checkpoint"]; o != nil && o.Get != nil {
		resp := o.Get.Responses["200"]
		resp.Description = "The signed note: origin, size, base64 root hash, then signature lines."
		resp.Content = map[string]*huma.MediaType{"text/plain": {Schema: &huma.Schema{Type: "string"}}}
	}
	get(s, "archiveChain.consistency", "/api/v1/archive/chain/consistency", app.ScopeArchiveRead,
		"Consistency proof from tree size from to tree size to (422 unless 0 < from <= to <= size)", s.getArchiveConsistency)
	get(s, "archiveRecords.get", "/api/v1/archive/records/{index}", app.ScopeArchiveRead,
		"One record, with proof=true its inclusion proof against the latest checkpoint", s.getArchiveRecord)
	op(s, http.MethodPost, "archiveChain.verify", "/api/v1/archive/chain/verify", accessKey, app.ScopeArchiveRead,
		"Start an archive_verify job: re-hash every message, recompute the tree, check every checkpoint (202 with the job)", s.verifyArchiveChain)
}

func (s *Server) archiveService() (*archive.Service, error) {
	if s.Archive == nil {
		return nil, app.Errorf(app.ENOTIMPLEMENTED, "The archive is not available in this build.")
	}
	return s.Archive, nil
}

// archiveTenant resolves the tenant of an archive request: the caller's
// own (a tenant key or administrator, or X-Service-Tenant), else the
// tenantId a provider names. Another tenant is the same 404 as a missing one.
func (s *Server) archiveTenant(ctx context.Context, id, field string) (string, error) {
	p := principalFrom(ctx)
	own := p.tenantID
	if own == "" && p.user != nil && !p.provider {
		own = p.user.TenantID
	}
	switch {
	case id == "" && own == "":
		return "", app.FieldError(field, "name the tenant")
	case id == "":
		id = own
	case own != "" && id != own:
		return "", app.NotFound("tenant")
	}
	if _, err := s.Tenants.Tenant(ctx, id); err != nil {
		return "", err
	}
	actedFor(ctx, id)
	return id, nil
}

type archiveTenantInput struct {
	TenantID string `query:"tenantId" maxLength:"64" doc:"The tenant: a provider key or administrator names it (or selects it with X-Service-Tenant); others may omit it."`
}

type archiveStatusOutput struct{ Body *archive.StatusView }

func (s *Server) getArchiveStatus(ctx context.Context, in *archiveTenantInput) (*archiveStatusOutput, error) {
	svc, err := s.archiveService()
	if err != nil {
		return nil, err
	}
	id, err := s.archiveTenant(ctx, in.TenantID, "query.tenantId")
	if err != nil {
		return nil, err
	}
	v, err := svc.Status(ctx, id)
	if err != nil {
		return nil, err
	}
	return &archiveStatusOutput{Body: v}, nil
}

type archiveChannelsOutput struct {
	Body struct {
		Items []archive.ChannelView `json:"items"`
	}
}

func (s *Server) listArchiveChannels(ctx context.Context, in *archiveTenantInput) (*archiveChannelsOutput, error) {
	svc, err := s.archiveService()
	if err != nil {
		return nil, err
	}
	id, err := s.archiveTenant(ctx, in.TenantID, "query.tenantId")
	if err != nil {
		return nil, err
	}
	chs, err := svc.Channels(ctx, id)
	if err != nil {
		return nil, err
	}
	out := &archiveChannelsOutput{}
	out.Body.Items = []archive.ChannelView{}
	for _, c := range chs {
		out.Body.Items = append(out.Body.Items, c.View())
	}
	return out, nil
}

type createArchiveChannelInput struct {
	Body struct {
		Kind        string `json:"kind" enum:"smtp_journal,imap,m365"`
		TenantID    string `json:"tenantId,omitempty" maxLength:"64" doc:"The tenant; a tenant administrator may omit it."`
		DisplayName string `json:"displayName,omitempty" maxLength:"200"`
		SourceID    string `json:"sourceId,omitempty" maxLength:"64" doc:"imap and m365: the source whose mailboxes are captured."`
	}
}

type archiveChannelOutput struct {
	Status int
	Body   archive.ChannelView
}

func (s *Server) createArchiveChannel(ctx context.Context, in *createArchiveChannelInput) (*archiveChannelOutput, error) {
	svc, err := s.archiveService()
	if err != nil {
		return nil, err
	}
	id, err := s.archiveTenant(ctx, in.Body.TenantID, "body.tenantId")
	if err != nil {
		return nil, err
	}
	if !canManageTenant(principalFrom(ctx), id) {
		return nil, app.NotFound("tenant")
	}
	c, err := svc.CreateChannel(ctx, archive.ChannelSpec{TenantID: id, Kind: in.Body.Kind, DisplayName: in.Body.DisplayName, SourceID: in.Body.SourceID})
	if err != nil {
		return nil, err
	}
	return &archiveChannelOutput{Status: http.StatusCreated, Body: c.View()}, nil
}

func (s *Server) deleteArchiveChannel(ctx context.Context, in *idInput) (*struct{}, error) {
	svc, err := s.archiveService()
	if err != nil {
		return nil, err
	}
	c, err := svc.Channel(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	if !canManageTenant(principalFrom(ctx), c.TenantID) {
		return nil, app.NotFound("channel")
	}
	actedFor(ctx, c.TenantID)
	return nil, svc.DeleteChannel(ctx, in.ID)
}

type archiveChainOutput struct{ Body *archive.ChainView }

func (s *Server) getArchiveChain(ctx context.Context, in *archiveTenantInput) (*archiveChainOutput, error) {
	svc, err := s.archiveService()
	if err != nil {
		return nil, err
	}
	id, err := s.archiveTenant(ctx, in.TenantID, "query.tenantId")
	if err != nil {
		return nil, err
	}
	v, err := svc.Chain(ctx, id)
	if err != nil {
		return nil, err
	}
	return &archiveChainOutput{Body: v}, nil
}

type archiveCheckpointOutput struct {
	ContentType string `header:"Content-Type"`
	Body        []byte
}

func (s *Server) getArchiveCheckpoint(ctx context.Context, in *archiveTenantInput) (*archiveCheckpointOutput, error) {
	svc, err := s.archiveService()
	if err != nil {
		return nil, err
	}
	id, err := s.archiveTenant(ctx, in.TenantID, "query.tenantId")
	if err != nil {
		return nil, err
	}
	cp, err := svc.Checkpoint(ctx, id)
	if err != nil {
		return nil, err
	}
	return &archiveCheckpointOutput{ContentType: "text/plain; charset=utf-8", Body: []byte(cp.Note)}, nil
}

// The tenant field is declared, not embedded: huma does not read the
// parameters of an embedded (unexported) struct.
type archiveConsistencyInput struct {
	TenantID string `query:"tenantId" maxLength:"64" doc:"The tenant: a provider key or administrator names it (or selects it with X-Service-Tenant); others may omit it."`
	From     int64  `query:"from" doc:"The older tree size (at least 1)."`
	To       int64  `query:"to" doc:"The newer tree size (at most the log's size)."`
}

type archiveConsistencyOutput struct{ Body *archive.Consistency }

func (s *Server) getArchiveConsistency(ctx context.Context, in *archiveConsistencyInput) (*archiveConsistencyOutput, error) {
	svc, err := s.archiveService()
	if err != nil {
		return nil, err
	}
	id, err := s.archiveTenant(ctx, in.TenantID, "query.tenantId")
	if err != nil {
		return nil, err
	}
	c, err := svc.Consistency(ctx, id, in.From, in.To)
	if err != nil {
		return nil, err
	}
	return &archiveConsistencyOutput{Body: c}, nil
}

type archiveRecordInput struct {
	TenantID string `query:"tenantId" maxLength:"64" doc:"The tenant: a provider key or administrator names it (or selects it with X-Service-Tenant); others may omit it."`
	Index    int64  `path:"index" minimum:"0"`
	Proof    bool   `query:"proof" doc:"Add the inclusion proof and the checkpoint it is against."`
}

type archiveRecordOutput struct{ Body *archive.RecordProof }

func (s *Server) getArchiveRecord(ctx context.Context, in *archiveRecordInput) (*archiveRecordOutput, error) {
	svc, err := s.archiveService()
	if err != nil {
		return nil, err
	}
	id, err := s.archiveTenant(ctx, in.TenantID, "query.tenantId")
	if err != nil {
		return nil, err
	}
	r, err := svc.Record(ctx, id, in.Index, in.Proof)
	if err != nil {
		return nil, err
	}
	return &archiveRecordOutput{Body: r}, nil
}

type verifyArchiveInput struct {
	Body *struct {
		TenantID string `json:"tenantId,omitempty" maxLength:"64"`
	}
}

// verifyArchiveChain starts the tenant's archive_verify job; while one is
// queued or running, that job is the answer.
func (s *Server) verifyArchiveChain(ctx context.Context, in *verifyArchiveInput) (*startJobOutput, error) {
	if _, err := s.archiveService(); err != nil {
		return nil, err
	}
	tid := ""
	if in.Body != nil {
		tid = in.Body.TenantID
	}
	id, err := s.archiveTenant(ctx, tid, "body.tenantId")
	if err != nil {
		return nil, err
	}
	if s.JobStore != nil {
		if j, err := s.JobStore.ActiveJobFor(ctx, app.ActionVerify, archive.TargetArchive, id); err == nil {
			return &startJobOutput{Status: http.StatusAccepted, Body: j}, nil
		} else if app.ErrorCode(err) != app.ENOTFOUND {
			return nil, err
		}
	}
	j, err := s.JobRunner.Submit(ctx, app.JobRequest{TenantID: id, Action: app.ActionVerify, TargetType: archive.TargetArchive,
		TargetID: id, Trigger: s.trigger(ctx)})
	if err != nil {
		return nil, err
	}
	return &startJobOutput{Status: http.StatusAccepted, Body: j}, nil
}

// archiveSummary is the status's archive object.
func (s *Server) archiveSummary(ctx context.Context, tenantID string) (ArchiveSummary, error) {
	if s.Archive == nil {
		return ArchiveSummary{ChainState: "empty"}, nil
	}
	n, state, err := s.Archive.Summary(ctx, tenantID)
	return ArchiveSummary{Messages: n, ChainState: state}, err
}
