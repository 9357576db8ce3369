package restapi

import (
	"context"

	"backstop/app"
)

// The directory (CONTRACT §4, §13): users, shared mailboxes, rooms and IMAP
// accounts per tenant (users:read), billing counts, and protection per
// entry (users:write). GET /directory/{id} is deliberately absent: beside
// the static /directory/summary it would make httprouter panic.

func (s *Server) directoryRoutes() {
	get(s, "directory.list", "/api/v1/directory", app.ScopeUsersRead, "Directory entries (paged, in id order)", s.listDirectory)
	get(s, "directory.summary", "/api/v1/directory/summary", app.ScopeUsersRead,
		"Billing counts per tenant and in total (the ?from=&to= daily rows are not in this version)", s.directorySummary)
	op(s, "PUT", "directory.protection", "/api/v1/directory/{id}/protection", accessKey, app.ScopeUsersWrite,
		"Protect or unprotect an entry's protected objects (unprotecting keeps the snapshots)", s.setDirectoryProtection)
}

func (s *Server) directoryService() (app.DirectoryService, error) {
	if s.Directory == nil {
		return nil, app.Errorf(app.ENOTIMPLEMENTED, "The directory is not available in this build.")
	}
	return s.Directory, nil
}

type listDirectoryInput struct {
	Kind   string `query:"kind" enum:"user,shared_mailbox,room,imap_account"`
	Limit  int    `query:"limit" minimum:"1" maximum:"1000" default:"100"`
	Cursor string `query:"cursor" maxLength:"64" doc:"nextCursor of the previous page."`
}

type directoryOutput struct {
	Body struct {
		Items      []app.DirectoryEntryView `json:"items"`
		NextCursor *string                  `json:"nextCursor"`
	}
}

func (s *Server) listDirectory(ctx context.Context, in *listDirectoryInput) (*directoryOutput, error) {
	svc, err := s.directoryService()
	if err != nil {
		return nil, err
	}
	if in.Cursor != "" && !app.HasPrefix(in.Cursor, app.PrefixUser) {
		return nil, app.FieldError("query.cursor", "cursor is not one this server gave out")
	}
	list, err := svc.DirectoryEntries(ctx, app.DirectoryFilter{TenantID: principalFrom(ctx).tenantID, Kind: in.Kind,
		AfterID: in.Cursor, Limit: in.Limit})
	if err != nil {
		return nil, err
	}
	out := &directoryOutput{}
	out.Body.Items = make([]app.DirectoryEntryView, len(list))
	for i, d := range list {
		out.Body.Items[i] = d.View()
	}
	if len(list) > 0 {
		out.Body.NextCursor = nextCursor(len(list), in.Limit, list[len(list)-1].ID)
	}
	return out, nil
}

type directorySummaryOutput struct {
	Body struct {
		GeneratedAt app.Time                    `json:"generatedAt"`
		Total       app.DirectoryCounts         `json:"total"`
		Tenants     []app.TenantDirectoryCounts `json:"tenants" doc:"One row per tenant with entries or protected objects."`
	}
}

func (s *Server) directorySummary(ctx context.Context, _ *struct{}) (*directorySummaryOutput, error) {
	svc, err := s.directoryService()
	if err != nil {
		return nil, err
	}
	rows, err := svc.DirectoryCounts(ctx, principalFrom(ctx).tenantID)
	if err != nil {
		return nil, err
	}
	out := &directorySummaryOutput{}
	out.Body.GeneratedAt, out.Body.Tenants = app.At(s.now()), nonNilSlice(rows)
	for _, r := range rows {
		out.Body.Total.Add(r.DirectoryCounts)
	}
	return out, nil
}

type protectionInput struct {
	ID   string `path:"id" maxLength:"64"`
	Body struct {
		Protected bool `json:"protected" required:"true"`
	}
}

type directoryEntryOutput struct{ Body app.DirectoryEntryView }

func (s *Server) setDirectoryProtection(ctx context.Context, in *protectionInput) (*directoryEntryOutput, error) {
	svc, err := s.directoryService()
	if err != nil {
		return nil, err
	}
	d, err := svc.DirectoryEntry(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	if p := principalFrom(ctx); p.tenantID != "" && d.TenantID != p.tenantID {
		return nil, app.NotFound("directory entry")
	}
	actedFor(ctx, d.TenantID)
	if d, err = svc.SetDirectoryProtection(ctx, d.ID, in.Body.Protected); err != nil {
		return nil, err
	}
	if s.ProtectionChanged != nil {
		s.ProtectionChanged()
	}
	return &directoryEntryOutput{Body: d.View()}, nil
}
