package restapi

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"backstop/app"
	"backstop/app/archive"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humahttprouter"
)

// The archive's policies (CONTRACT §3, §7, §14): retention rules and legal
// holds (changes: web session), search, a message, its content and export
// (web session; audited like every read of user data, by the audit hook),
// the holds list and the evidence report (archive:read).

func (s *Server) archivePolicyRoutes() {
	op(s, http.MethodGet, "archiveRetention.get", "/api/v1/archive/retention", accessSession, "", "A tenant's archive retention rules", s.getArchiveRetention)
	op(s, http.MethodPut, "archiveRetention.update", "/api/v1/archive/retention", accessSession, "",
		"Set a tenant's archive retention rules (first matching rule wins; days 0 expires at the next run)", s.updateArchiveRetention)
	get(s, "archiveHolds.list", "/api/v1/archive/holds", app.ScopeArchiveRead, "Legal holds, newest first (paged)", s.listArchiveHolds)
	op(s, http.MethodPost, "archiveHolds.create", "/api/v1/archive/holds", accessSession, "", "Place a legal hold (recorded in the chain)", s.createArchiveHold)
	op(s, http.MethodPost, "archiveHolds.release", "/api/v1/archive/holds/{id}/release", accessSession, "",
		"Release a legal hold with a reason (recorded in the chain)", s.releaseArchiveHold)
	op(s, http.MethodGet, "archiveMessages.list", "/api/v1/archive/messages", accessSession, "",
		"Search archived messages (full text over subject, addresses and body; newest first, paged)", s.searchArchive)
	op(s, http.MethodGet, "archiveMessages.get", "/api/v1/archive/messages/{id}", accessSession, "", "One archived message", s.getArchiveMessage)
	op(s, http.MethodGet, "archiveMessages.content", "/api/v1/archive/messages/{id}/content", accessSession, "",
		"The message's exact archived bytes (message/rfc822); 410 once purged", s.archiveMessageContent)
	op(s, http.MethodPost, "archiveExports.create", "/api/v1/archive/exports", accessSession, "",
		"Export a search's result set: a zip of .eml files and evidence.json of the period", s.exportArchive)
	get(s, "archiveEvidence.get", "/api/v1/archive/evidence", app.ScopeArchiveRead,
		"The evidence report of a period (JSON; a PDF with Accept: application/pdf or ?format=pdf)", s.getArchiveEvidence)

	binary := func(path, method string, types ...string) {
		o := s.api.OpenAPI().Paths[path]
		if o == nil {
			return
		}
		target := o.Get
		if method == http.MethodPost {
			target = o.Post
		}
		if target == nil {
			return
		}
		r := &huma.Response{Description: "The file.", Content: map[string]*huma.MediaType{}}
		for _, t := range types {
			r.Content[t] = &huma.MediaType{Schema: &huma.Schema{Type: "string", Format: "binary"}}
		}
		target.Responses["200"] = r
	}
	binary("/api/v1/archive/messages/{id}/content", http.MethodGet, "message/rfc822")
	binary("/api/v1/archive/exports", http.MethodPost, "application/zip")
}

// archiveReadTenant is the tenant of an archive:read request: the key's or
// the session's tenant, or the one a provider names (X-Service-Tenant or
// ?tenantId). need: "" is not an answer (a provider must name one).
func (s *Server) archiveReadTenant(ctx context.Context, named string, need bool) (string, error) {
	p := principalFrom(ctx)
	own := p.tenantID
	if own == "" && p.user != nil && !p.provider {
		own = p.user.TenantID
	}
	if own != "" {
		if named != "" && named != own {
			return "", app.NotFound("tenant")
		}
		return own, nil
	}
	if named == "" {
		if need {
			return "", app.FieldError("query.tenantId", "name the tenant (tenantId or X-Service-Tenant)")
		}
		return "", nil
	}
	if _, err := s.Tenants.Tenant(ctx, named); err != nil {
		return "", err
	}
	actedFor(ctx, named)
	return named, nil
}

type archiveRetentionBody struct {
	TenantID  string `json:"tenantId"`
	IsDefault bool   `json:"isDefault" doc:"True while the tenant never saved rules: every message is kept 2557 days."`
	archive.Retention
}

type archiveRetentionOutput struct{ Body archiveRetentionBody }

type updateArchiveRetentionInput struct {
	TenantID string `query:"tenantId" maxLength:"64" doc:"The tenant, as for GET."`
	Body     archive.Retention
}

func (s *Server) getArchiveRetention(ctx context.Context, in *archiveTenantInput) (*archiveRetentionOutput, error) {
	a, err := s.archiveService()
	if err != nil {
		return nil, err
	}
	id, err := s.retentionTenant(ctx, in.TenantID, "query.tenantId")
	if err != nil {
		return nil, err
	}
	r, isDefault, err := a.RetentionOf(ctx, id)
	if err != nil {
		return nil, err
	}
	return &archiveRetentionOutput{Body: archiveRetentionBody{TenantID: id, IsDefault: isDefault, Retention: r}}, nil
}

func (s *Server) updateArchiveRetention(ctx context.Context, in *updateArchiveRetentionInput) (*archiveRetentionOutput, error) {
	a, err := s.archiveService()
	if err != nil {
		return nil, err
	}
	id, err := s.retentionTenant(ctx, in.TenantID, "query.tenantId")
	if err != nil {
		return nil, err
	}
	if err := a.SetRetention(ctx, id, in.Body); err != nil {
		return nil, err
	}
	return s.getArchiveRetention(ctx, &archiveTenantInput{TenantID: id})
}

// HoldView is a legal hold on the wire.
type HoldView struct {
	ID                 string    `json:"id"`
	TenantID           string    `json:"tenantId"`
	Name               string    `json:"name"`
	Matter             string    `json:"matter"`
	Custodians         []string  `json:"custodians" doc:"Addresses or @domains; empty: every message."`
	From               *app.Time `json:"from"`
	To                 *app.Time `json:"to"`
	Query              string    `json:"query" doc:"Search words every covered message has; empty: no condition."`
	Active             bool      `json:"active"`
	CreatedAt          app.Time  `json:"createdAt"`
	CreatedBy          string    `json:"createdBy"`
	RecordIndex        int64     `json:"recordIndex"`
	ReleasedAt         *app.Time `json:"releasedAt"`
	ReleaseReason      *string   `json:"releaseReason"`
	ReleasedBy         *string   `json:"releasedBy"`
	ReleaseRecordIndex *int64    `json:"releaseRecordIndex"`
}

func holdView(h *archive.Hold) HoldView {
	v := HoldView{ID: h.ID, TenantID: h.TenantID, Name: h.Name, Matter: h.Matter, Custodians: h.Custodians,
		From: app.AtPtr(h.From), To: app.AtPtr(h.To), Query: h.Query, Active: h.ReleasedAt == nil,
		CreatedAt: app.At(h.CreatedAt), CreatedBy: h.CreatedBy, RecordIndex: h.RecordIndex,
		ReleasedAt: app.AtPtr(h.ReleasedAt), ReleaseRecordIndex: h.ReleaseRecordIndex}
	if v.Custodians == nil {
		v.Custodians = []string{}
	}
	if h.ReleasedAt != nil {
		v.ReleaseReason, v.ReleasedBy = &h.ReleaseReason, &h.ReleasedBy
	}
	return v
}

type holdOutput struct{ Body HoldView }

type holdsOutput struct {
	Body struct {
		Items      []HoldView `json:"items"`
		NextCursor *string    `json:"nextCursor"`
	}
}

type listHoldsInput struct {
	TenantID string `query:"tenantId" maxLength:"64" doc:"A provider's choice of tenant (or X-Service-Tenant); otherwise every tenant."`
	Limit    int    `query:"limit" minimum:"1" maximum:"1000" default:"100"`
	Cursor   string `query:"cursor" maxLength:"64" doc:"nextCursor of the previous page."`
}

func (s *Server) listArchiveHolds(ctx context.Context, in *listHoldsInput) (*holdsOutput, error) {
	a, err := s.archiveService()
	if err != nil {
		return nil, err
	}
	tenant, err := s.archiveReadTenant(ctx, in.TenantID, false)
	if err != nil {
		return nil, err
	}
	if in.Cursor != "" && !app.HasPrefix(in.Cursor, archive.PrefixHold) {
		return nil, app.FieldError("query.cursor", "cursor is not one this server gave out")
	}
	limit := max(in.Limit, 1)
	holds, err := a.Holds(ctx, tenant, in.Cursor, limit+1)
	if err != nil {
		return nil, err
	}
	out := &holdsOutput{}
	if len(holds) > limit {
		holds = holds[:limit]
		next := holds[limit-1].ID
		out.Body.NextCursor = &next
	}
	out.Body.Items = make([]HoldView, 0, len(holds))
	for _, h := range holds {
		out.Body.Items = append(out.Body.Items, holdView(h))
	}
	return out, nil
}

type createHoldInput struct {
	Body struct {
		TenantID   string    `json:"tenantId,omitempty" maxLength:"64" doc:"The tenant; a tenant administrator may omit it."`
		Name       string    `json:"name" minLength:"1" maxLength:"200"`
		Matter     string    `json:"matter,omitempty" maxLength:"200"`
		Custodians []string  `json:"custodians,omitempty" maxItems:"1000" doc:"Addresses or @domains whose messages are held; none: every message."`
		From       *app.Time `json:"from,omitempty" doc:"Held: messages captured (or dated) at or after."`
		To         *app.Time `json:"to,omitempty" doc:"Held: messages captured (or dated) at or before."`
		Query      string    `json:"query,omitempty" maxLength:"1000" doc:"Held: messages with all these words."`
	}
}

func timePtr(t *app.Time) *time.Time {
	if t == nil {
		return nil
	}
	return &t.Time
}

func (s *Server) createArchiveHold(ctx context.Context, in *createHoldInput) (*holdOutput, error) {
	a, err := s.archiveService()
	if err != nil {
		return nil, err
	}
	id, err := s.retentionTenant(ctx, in.Body.TenantID, "body.tenantId")
	if err != nil {
		return nil, err
	}
	_, by, _ := principalFrom(ctx).actor()
	h, err := a.CreateHold(ctx, archive.HoldSpec{TenantID: id, Name: in.Body.Name, Matter: in.Body.Matter,
		Custodians: in.Body.Custodians, From: timePtr(in.Body.From), To: timePtr(in.Body.To), Query: in.Body.Query, By: by})
	if err != nil {
		return nil, err
	}
	return &holdOutput{Body: holdView(h)}, nil
}

type releaseHoldInput struct {
	ID   string `path:"id" maxLength:"64"`
	Body struct {
		Reason string `json:"reason" minLength:"1" maxLength:"1000" doc:"Why the hold ends (kept with the hold)."`
	}
}

func (s *Server) releaseArchiveHold(ctx context.Context, in *releaseHoldInput) (*holdOutput, error) {
	a, err := s.archiveService()
	if err != nil {
		return nil, err
	}
	h, err := a.Hold(ctx, "", in.ID)
	if err != nil {
		return nil, err
	}
	if !canManageTenant(principalFrom(ctx), h.TenantID) {
		return nil, app.NotFound("hold")
	}
	actedFor(ctx, h.TenantID)
	_, by, _ := principalFrom(ctx).actor()
	h, err = a.ReleaseHold(ctx, h.TenantID, h.ID, in.Body.Reason, by)
	if err != nil {
		return nil, err
	}
	return &holdOutput{Body: holdView(h)}, nil
}

type searchArchiveInput struct {
	TenantID  string `query:"tenantId" maxLength:"64" doc:"The tenant; a tenant administrator may omit it."`
	Q         string `query:"q" maxLength:"1000" doc:"Words to find in subject, addresses or body (all of them; word* for a prefix)."`
	From      string `query:"from" maxLength:"40" doc:"Captured at or after (YYYY-MM-DD or RFC 3339)."`
	To        string `query:"to" maxLength:"40" doc:"Captured at or before (YYYY-MM-DD: the whole day, or RFC 3339)."`
	Channel   string `query:"channel" maxLength:"64"`
	Custodian string `query:"custodian" maxLength:"320" doc:"An address or @domain the message concerns."`
	Limit     int    `query:"limit" minimum:"1" maximum:"1000" default:"100"`
	Cursor    string `query:"cursor" maxLength:"64" doc:"nextCursor of the previous page."`
}

type messagesOutput struct {
	Body struct {
		Items      []archive.MessageView `json:"items"`
		NextCursor *string               `json:"nextCursor"`
	}
}

// parseArchiveTime reads a date (YYYY-MM-DD, UTC; as an upper bound the
// end of that day) or an RFC 3339 time.
func parseArchiveTime(v, field string, end bool) (*time.Time, error) {
	if v == "" {
		return nil, nil
	}
	if d, err := time.Parse(time.DateOnly, v); err == nil {
		if end {
			d = d.Add(24*time.Hour - time.Millisecond)
		}
		return &d, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return nil, app.FieldError(field, "a date (YYYY-MM-DD) or an RFC 3339 time")
	}
	t = t.UTC()
	return &t, nil
}

func (s *Server) searchQuery(ctx context.Context, tenantID, q, from, to, channel, custodian, where string) (archive.SearchQuery, error) {
	id, err := s.retentionTenant(ctx, tenantID, where+".tenantId")
	if err != nil {
		return archive.SearchQuery{}, err
	}
	f, err := parseArchiveTime(from, where+".from", false)
	if err != nil {
		return archive.SearchQuery{}, err
	}
	t, err := parseArchiveTime(to, where+".to", true)
	if err != nil {
		return archive.SearchQuery{}, err
	}
	return archive.SearchQuery{TenantID: id, Q: q, From: f, To: t, ChannelID: channel, Custodian: custodian}, nil
}

func (s *Server) searchArchive(ctx context.Context, in *searchArchiveInput) (*messagesOutput, error) {
	a, err := s.archiveService()
	if err != nil {
		return nil, err
	}
	q, err := s.searchQuery(ctx, in.TenantID, in.Q, in.From, in.To, in.Channel, in.Custodian, "query")
	if err != nil {
		return nil, err
	}
	q.Cursor, q.Limit = in.Cursor, in.Limit
	items, next, err := a.Search(ctx, q)
	if err != nil {
		return nil, err
	}
	out := &messagesOutput{}
	out.Body.Items = items
	if next != "" {
		out.Body.NextCursor = &next
	}
	return out, nil
}

type messageOutput struct{ Body *archive.MessageView }

// archiveMessageTenant is the tenant whose messages a session may read.
func (s *Server) archiveMessageTenant(ctx context.Context) string {
	p := principalFrom(ctx)
	if p.provider {
		return p.tenantID // "" reads any tenant's; the answer names it
	}
	return p.user.TenantID
}

func (s *Server) getArchiveMessage(ctx context.Context, in *idInput) (*messageOutput, error) {
	a, err := s.archiveService()
	if err != nil {
		return nil, err
	}
	v, err := a.MessageView(ctx, s.archiveMessageTenant(ctx), in.ID)
	if err != nil {
		return nil, err
	}
	actedFor(ctx, v.TenantID)
	return &messageOutput{Body: v}, nil
}

func (s *Server) archiveMessageContent(ctx context.Context, in *idInput) (*huma.StreamResponse, error) {
	a, err := s.archiveService()
	if err != nil {
		return nil, err
	}
	m, rc, err := a.Content(ctx, s.archiveMessageTenant(ctx), in.ID)
	if err != nil {
		return nil, err
	}
	actedFor(ctx, m.TenantID)
	return &huma.StreamResponse{Body: func(hctx huma.Context) {
		defer rc.Close()
		_, w, _ := humahttprouter.Unwrap(hctx)
		h := w.Header()
		h.Set("Content-Type", "message/rfc822")
		h.Set("Content-Disposition", contentDisposition(m.SHA256+".eml"))
		h.Set("Content-Length", strconv.FormatInt(m.Size, 10))
		w.WriteHeader(http.StatusOK)
		if _, err := io.Copy(w, rc); err != nil {
			s.opts.Logger.Error("archive message download cut short", "request_id", stateFrom(ctx).id, "message_id", m.ID, "error", err)
			panic(http.ErrAbortHandler)
		}
	}}, nil
}

type exportArchiveInput struct {
	Body struct {
		TenantID  string `json:"tenantId,omitempty" maxLength:"64" doc:"The tenant; a tenant administrator may omit it."`
		Q         string `json:"q,omitempty" maxLength:"1000"`
		From      string `json:"from,omitempty" maxLength:"40" doc:"YYYY-MM-DD or RFC 3339."`
		To        string `json:"to,omitempty" maxLength:"40" doc:"YYYY-MM-DD (the whole day) or RFC 3339."`
		Channel   string `json:"channel,omitempty" maxLength:"64"`
		Custodian string `json:"custodian,omitempty" maxLength:"320"`
	}
}

// exportArchive streams the zip. The evidence is built and the result set
// read before the first byte, so those failures are ordinary errors; a
// failure while streaming cuts the connection (a truncated zip).
func (s *Server) exportArchive(ctx context.Context, in *exportArchiveInput) (*huma.StreamResponse, error) {
	a, err := s.archiveService()
	if err != nil {
		return nil, err
	}
	b := in.Body
	q, err := s.searchQuery(ctx, b.TenantID, b.Q, b.From, b.To, b.Channel, b.Custodian, "body")
	if err != nil {
		return nil, err
	}
	ex, err := a.PrepareExport(ctx, q)
	if err != nil {
		return nil, err
	}
	return &huma.StreamResponse{Body: func(hctx huma.Context) {
		_, w, _ := humahttprouter.Unwrap(hctx)
		h := w.Header()
		h.Set("Content-Type", "application/zip")
		h.Set("Content-Disposition", contentDisposition("archive-export-"+s.now().UTC().Format("20060102-150405")+".zip"))
		w.WriteHeader(http.StatusOK)
		if _, err := ex.WriteTo(ctx, w); err != nil {
			s.opts.Logger.Error("archive export cut short", "request_id", stateFrom(ctx).id, "tenant_id", q.TenantID, "error", err)
			panic(http.ErrAbortHandler)
		}
	}}, nil
}

type evidenceInput struct {
	TenantID string `query:"tenantId" maxLength:"64" doc:"A provider's choice of tenant (or X-Service-Tenant)."`
	From     string `query:"from" required:"true" maxLength:"40" doc:"YYYY-MM-DD or RFC 3339."`
	To       string `query:"to" required:"true" maxLength:"40" doc:"YYYY-MM-DD (the whole day) or RFC 3339."`
	Format   string `query:"format" enum:"json,pdf" doc:"pdf: the same report as a PDF (also Accept: application/pdf)."`
	Accept   string `header:"Accept"`
}

func (s *Server) getArchiveEvidence(ctx context.Context, in *evidenceInput) (*huma.StreamResponse, error) {
	a, err := s.archiveService()
	if err != nil {
		return nil, err
	}
	tenant, err := s.archiveReadTenant(ctx, in.TenantID, true)
	if err != nil {
		return nil, err
	}
	from, err := parseArchiveTime(in.From, "query.from", false)
	if err != nil {
		return nil, err
	}
	to, err := parseArchiveTime(in.To, "query.to", true)
	if err != nil {
		return nil, err
	}
	body, err := a.Evidence(ctx, tenant, *from, *to)
	if err != nil {
		return nil, err
	}
	ctype, name := "application/json", "evidence.json"
	if in.Format == "pdf" || in.Format == "" && strings.Contains(in.Accept, "application/pdf") {
		if body, err = archive.EvidencePDF(body); err != nil {
			return nil, err
		}
		ctype, name = "application/pdf", "evidence.pdf"
	}
	return &huma.StreamResponse{Body: func(hctx huma.Context) {
		_, w, _ := humahttprouter.Unwrap(hctx)
		w.Header().Set("Content-Type", ctype)
		w.Header().Set("Content-Disposition", contentDisposition(name))
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		w.Write(body)
	}}, nil
}
