package restapi

import (
	"context"
	"time"

	"backstop/app"
)

// The directory (CONTRACT §4, §13): users, shared mailboxes, rooms and IMAP
// accounts per tenant (users:read), billing counts, and protection per
// entry (users:write). GET /directory/{id} is deliberately absent: beside
// the static /directory/summary it would make httprouter panic.

func (s *Server) directoryRoutes() {
	get(s, "directory.list", "/api/v1/directory", app.ScopeUsersRead, "Directory entries (paged, in id order)", s.listDirectory)
	get(s, "directory.summary", "/api/v1/directory/summary", app.ScopeUsersRead,
		"Billing counts per tenant and in total; with ?from=&to= (dates, at most 366 days) also the daily rows recorded at 00:00 UTC, one per tenant per day", s.directorySummary)
	op(s, "PUT", "directory.protection", "/api/v1/directory/{id}/protection", accessKey, app.ScopeUsersWrite,
		"Protect or unprotect an entry: protecting a Microsoft 365 user creates its mailbox and drive objects; unprotecting keeps the snapshots", s.setDirectoryProtection)
}

func (s *Server) directoryService() (app.DirectoryService, error) {
	if s.Directory == nil {
		return nil, app.Errorf(app.ENOTIMPLEMENTED, "The directory is not available in this build.")
	}
	return s.Directory, nil
}

type listDirectoryInput struct {
	Kind      string `query:"kind" enum:"user,shared_mailbox,room,imap_account"`
	Q         string `query:"q" maxLength:"200" doc:"Case-insensitive part of the display name, e-mail or user principal name."`
	Protected string `query:"protected" enum:"true,false"`
	Licensed  string `query:"licensed" enum:"true,false"`
	SourceID  string `query:"sourceId" maxLength:"64"`
	Limit     int    `query:"limit" minimum:"1" maximum:"1000" default:"100"`
	Cursor    string `query:"cursor" maxLength:"64" doc:"nextCursor of the previous page."`
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
	boolFilter := func(v string) *bool {
		if v == "" {
			return nil
		}
		return app.Ptr(v == "true")
	}
	list, err := svc.DirectoryEntries(ctx, app.DirectoryFilter{TenantID: principalFrom(ctx).tenantID, Kind: in.Kind,
		Query: in.Q, Protected: boolFilter(in.Protected), Licensed: boolFilter(in.Licensed), SourceID: in.SourceID,
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
		Daily       *[]app.DailyDirectoryCounts `json:"daily,omitempty" doc:"With ?from=&to=: the counts recorded at 00:00 UTC of each day, one row per tenant per day that has a record, by date then tenant."`
	}
}

type directorySummaryInput struct {
	From string `query:"from" maxLength:"10" doc:"First day (YYYY-MM-DD, UTC) of the daily rows; needs to."`
	To   string `query:"to" maxLength:"10" doc:"Last day (YYYY-MM-DD, UTC, inclusive) of the daily rows; at most 366 days after from."`
}

// maxSummaryDays bounds a ?from=&to= range.
const maxSummaryDays = 366

func (s *Server) directorySummary(ctx context.Context, in *directorySummaryInput) (*directorySummaryOutput, error) {
	svc, err := s.directoryService()
	if err != nil {
		return nil, err
	}
	var from, to time.Time
	daily := in.From != "" || in.To != ""
	if daily {
		if from, err = time.Parse(time.DateOnly, in.From); err != nil {
			return nil, app.FieldError("query.from", "from must be a date, YYYY-MM-DD")
		}
		if to, err = time.Parse(time.DateOnly, in.To); err != nil {
			return nil, app.FieldError("query.to", "to must be a date, YYYY-MM-DD")
		}
		switch {
		case to.Before(from):
			return nil, app.FieldError("query.to", "to must not be before from")
		case to.Sub(from) > (maxSummaryDays-1)*24*time.Hour:
			return nil, app.FieldError("query.to", "the range must be at most %d days", maxSummaryDays)
		}
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
	if daily {
		days, err := svc.DailyCounts(ctx, principalFrom(ctx).tenantID, in.From, in.To)
		if err != nil {
			return nil, err
		}
		days = nonNilSlice(days)
		out.Body.Daily = &days
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
	if s.Protection != nil {
		d, err = s.Protection.SetProtection(ctx, d.ID, in.Body.Protected)
	} else {
		d, err = svc.SetDirectoryProtection(ctx, d.ID, in.Body.Protected)
	}
	if err != nil {
		return nil, err
	}
	if s.ProtectionChanged != nil {
		s.ProtectionChanged()
	}
	return &directoryEntryOutput{Body: d.View()}, nil
}
