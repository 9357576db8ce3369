package restapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"backstop/app"
)

// Jobs (scope jobs:read), starting work (restore:write, verify:write) and the
// failure-code catalogue (any valid key).

type listJobsInput struct {
	State  string    `query:"state" enum:"queued,running,succeeded,partial,failed,interrupted,cancelled"`
	Queue  string    `query:"queue" enum:"mailbox_backup,drive_backup,imap_backup,endpoint_backup,endpoint_restore,restore,verify,archive_verify,directory_sync,retention,maintenance"`
	Target string    `query:"targetId" maxLength:"64" doc:"Only jobs on this target, e.g. an endpoint's id (ep_…)."`
	Since  time.Time `query:"since" doc:"RFC 3339 time: jobs queued at or after it."`
	Limit  int       `query:"limit" minimum:"1" maximum:"1000" default:"100"`
	Cursor string    `query:"cursor" maxLength:"128" doc:"nextCursor of the previous page."`
}

type jobsOutput struct {
	Body struct {
		Items      []*app.Job `json:"items" doc:"Newest first."`
		NextCursor *string    `json:"nextCursor"`
	}
}

// jobCursor makes a list position an opaque cursor: the queue time in
// milliseconds and the id of the last job of a page.
func jobCursor(j *app.Job) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(j.QueuedAt.UnixMilli(), 10) + ":" + j.ID))
}

func parseJobCursor(c string) (*app.JobCursor, error) {
	bad := app.FieldError("query.cursor", "cursor is not one this server gave out")
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return nil, bad
	}
	at, id, ok := strings.Cut(string(b), ":")
	ms, err := strconv.ParseInt(at, 10, 64)
	if !ok || err != nil || !app.HasPrefix(id, app.PrefixJob) {
		return nil, bad
	}
	return &app.JobCursor{QueuedAt: time.UnixMilli(ms).UTC(), ID: id}, nil
}

func (s *Server) listJobs(ctx context.Context, in *listJobsInput) (*jobsOutput, error) {
	f := app.JobFilter{TenantID: principalFrom(ctx).tenantID, State: in.State, Queue: in.Queue, TargetID: in.Target, Limit: in.Limit}
	if !in.Since.IsZero() {
		f.Since = &in.Since
	}
	if in.Cursor != "" {
		c, err := parseJobCursor(in.Cursor)
		if err != nil {
			return nil, err
		}
		f.Before = c
	}
	jobs, err := s.JobStore.Jobs(ctx, f)
	if err != nil {
		return nil, err
	}
	out := &jobsOutput{}
	out.Body.Items = nonNilSlice(jobs)
	if len(jobs) == f.Limit {
		out.Body.NextCursor = app.Ptr(jobCursor(jobs[len(jobs)-1]))
	}
	return out, nil
}

// visibleJob returns the job when the caller may see it; another tenant's
// job is the same not-found as a missing one.
func (s *Server) visibleJob(ctx context.Context, id string) (*app.Job, error) {
	j, err := s.JobStore.Job(ctx, id)
	if err != nil {
		return nil, err
	}
	if p := principalFrom(ctx); p.tenantID != "" && j.TenantID != p.tenantID {
		return nil, app.NotFound("job")
	}
	actedFor(ctx, j.TenantID)
	return j, nil
}

// maxJobItems bounds the failed items listed in a job's detail.
const maxJobItems = 1000

type jobDetailOutput struct{ Body app.JobDetail }

func (s *Server) getJob(ctx context.Context, in *idInput) (*jobDetailOutput, error) {
	j, err := s.visibleJob(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	items, err := s.JobStore.JobItems(ctx, j.ID, maxJobItems)
	if err != nil {
		return nil, err
	}
	groups, err := s.JobStore.FailureGroups(ctx, j.ID)
	if err != nil {
		return nil, err
	}
	return &jobDetailOutput{Body: app.JobDetail{Job: j, Items: nonNilSlice(items), FailureGroups: nonNilSlice(groups)}}, nil
}

type startJobOutput struct {
	Status int
	Body   *app.Job
}

type targetBody struct {
	TargetType string `json:"targetType" enum:"endpoint,protected_object" doc:"What to work on. A type this version has no job for is 422 on body.targetType."`
	TargetID   string `json:"targetId" minLength:"1" maxLength:"64"`
}

type startBackupInput struct{ Body targetBody }

type startVerifyInput struct{ Body targetBody }

type startRestoreInput struct {
	Body struct {
		SnapshotID  string          `json:"snapshotId" minLength:"1" maxLength:"128"`
		Items       []string        `json:"items,omitempty" maxItems:"10000" doc:"Paths or item ids to restore; all when absent."`
		Destination json.RawMessage `json:"destination,omitempty" doc:"Where to restore; the original place when absent (never overwriting)."`
	}
}

func (s *Server) trigger(ctx context.Context) string {
	if principalFrom(ctx).user != nil {
		return app.TriggerWeb
	}
	return app.TriggerAPI
}

func (s *Server) submit(ctx context.Context, req app.JobRequest) (*startJobOutput, error) {
	req.TenantID, req.Trigger = principalFrom(ctx).tenantID, s.trigger(ctx)
	j, err := s.JobRunner.Submit(ctx, req)
	if err != nil {
		return nil, err
	}
	return &startJobOutput{Status: http.StatusAccepted, Body: j}, nil
}

func (s *Server) startBackup(ctx context.Context, in *startBackupInput) (*startJobOutput, error) {
	return s.submit(ctx, app.JobRequest{Action: app.ActionBackup, TargetType: in.Body.TargetType, TargetID: in.Body.TargetID})
}

func (s *Server) startVerify(ctx context.Context, in *startVerifyInput) (*startJobOutput, error) {
	return s.submit(ctx, app.JobRequest{Action: app.ActionVerify, TargetType: in.Body.TargetType, TargetID: in.Body.TargetID})
}

func (s *Server) startRestore(ctx context.Context, in *startRestoreInput) (*startJobOutput, error) {
	params, err := json.Marshal(struct {
		SnapshotID  string          `json:"snapshotId"`
		Items       []string        `json:"items,omitempty"`
		Destination json.RawMessage `json:"destination,omitempty"`
	}{in.Body.SnapshotID, in.Body.Items, in.Body.Destination})
	if err != nil {
		return nil, err
	}
	return s.submit(ctx, app.JobRequest{Action: app.ActionRestore, TargetID: in.Body.SnapshotID, Params: params})
}

type failureCodesOutput struct {
	Body struct {
		Items      []app.FailureCode `json:"items"`
		Categories []string          `json:"categories"`
	}
}

func (s *Server) listFailureCodes(ctx context.Context, _ *struct{}) (*failureCodesOutput, error) {
	out := &failureCodesOutput{}
	out.Body.Items, out.Body.Categories = app.FailureCodes(), app.FailureCategories
	return out, nil
}

// jobRoutes registers the job operations; routes() calls it.
func (s *Server) jobRoutes() {
	get(s, "jobs.list", "/api/v1/jobs", app.ScopeJobsRead, "Jobs, newest first (paged)", s.listJobs)
	get(s, "jobs.get", "/api/v1/jobs/{id}", app.ScopeJobsRead, "One job with its failed items and failure groups", s.getJob)
	s.registerJobEvents()
	op(s, http.MethodPost, "backups.start", "/api/v1/backups", accessKey, app.ScopeRestoreWrite, "Start a backup (202 with the job)", s.startBackup)
	op(s, http.MethodPost, "restores.start", "/api/v1/restores", accessKey, app.ScopeRestoreWrite, "Start a restore (202 with the job)", s.startRestore)
	op(s, http.MethodPost, "verifies.start", "/api/v1/verifies", accessKey, app.ScopeVerifyWrite, "Start a verify run: a sampled test restore (202 with the job)", s.startVerify)
	op(s, http.MethodGet, "failureCodes.list", "/api/v1/failure-codes", accessKey, "", "The catalogue of job failure codes", s.listFailureCodes)
	if o := s.api.OpenAPI().Paths["/api/v1/failure-codes"]; o != nil && o.Get != nil {
		o.Get.Description = "Any valid key or session; no scope needed. Every stable `failure.code` with its category, flags, parameters, fix steps and docs URL, so a PSA can map causes to ticket types."
		o.Get.Security = []map[string][]string{{"bearer": {}}, {"session": {}}}
	}
	for _, p := range []string{"/api/v1/backups", "/api/v1/restores", "/api/v1/verifies"} {
		if o := s.api.OpenAPI().Paths[p]; o != nil && o.Post != nil {
			o.Post.Description += " Answers 202 Accepted with the queued job; follow it at /api/v1/jobs/{id}/events."
			if r, ok := o.Post.Responses["200"]; ok {
				r.Description = "Accepted: the job is queued."
				o.Post.Responses["202"] = r
				delete(o.Post.Responses, "200")
			}
		}
	}
}
