package restapi

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/jobs"
)

// jobHarness is the API harness with a real job runner over the same
// database. The runner knows one kind: backups of endpoints, resolved
// against the stored endpoints, whose runs wait for the test's step channel.
type jobHarness struct {
	*harness
	runner *jobs.Runner
	steps  chan app.JobProgress // each value is reported; closing it ends the run
}

func newJobHarness(t *testing.T, keepAlive time.Duration) *jobHarness {
	t.Helper()
	h := newHarness(t, app.EditionProvider, func(o *Options) { o.SSEKeepAlive = keepAlive })
	jh := &jobHarness{harness: h, steps: make(chan app.JobProgress)}
	jh.runner = jobs.New(jobs.Config{Store: h.db, Logger: discardLogger()})
	jh.runner.Register(jobs.Kind{
		Action: app.ActionBackup, TargetType: "endpoint", Queue: app.QueueEndpointBackup,
		Resolve: func(ctx context.Context, tenantID, id string, _ json.RawMessage) (app.JobTarget, error) {
			e, err := h.db.Endpoint(ctx, id)
			if err != nil {
				return app.JobTarget{}, err
			}
			if e.TenantID != tenantID {
				return app.JobTarget{}, app.NotFound("endpoint")
			}
			return app.JobTarget{Type: "endpoint", ID: e.ID, DisplayName: e.Hostname}, nil
		},
		Run: func(ctx context.Context, r *jobs.Run) (*jobs.Outcome, error) {
			for {
				select {
				case p, ok := <-jh.steps:
					if !ok {
						return &jobs.Outcome{SnapshotID: "snap-" + r.Job.ID}, nil
					}
					r.Progress(ctx, p)
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
		},
	})
	if err := jh.runner.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { jh.runner.Close() })
	h.srv.JobStore, h.srv.JobRunner, h.srv.JobFeed = h.db, jh.runner, jh.runner.Broker()
	return jh
}

// storeJob stores a job directly (for list and detail tests).
func (h *jobHarness) storeJob(tenantID, queue, state string) *app.Job {
	h.t.Helper()
	j := &app.Job{TenantID: tenantID, Queue: queue, State: state, Action: app.ActionBackup, Executor: app.ExecutorExternal,
		Target: app.JobTarget{Type: "endpoint", ID: "ep_x", DisplayName: "x"}, Trigger: app.TriggerAPI, ItemCauses: []app.ItemCause{}}
	if err := h.db.CreateJob(context.Background(), j); err != nil {
		h.t.Fatal(err)
	}
	return j
}

func TestJobRoutesCheckScopeBeforeLookupAndBody(t *testing.T) {
	h := newJobHarness(t, 0)
	noScope, _ := h.key(h.tenantA.ID, app.ScopeStatusRead)
	for _, c := range []struct{ method, path, body, scope string }{
		{"GET", "/api/v1/jobs", "", "jobs:read"},
		{"GET", "/api/v1/jobs/job_doesnotexist", "", "jobs:read"},
		{"GET", "/api/v1/jobs/job_doesnotexist/events", "", "jobs:read"},
		{"POST", "/api/v1/backups", `{"bad json`, "restore:write"},
		{"POST", "/api/v1/restores", `{"snapshotId": 1}`, "restore:write"},
		{"POST", "/api/v1/verifies", `{}`, "verify:write"},
	} {
		r := h.do(c.method, c.path, c.body, bearer(noScope)...)
		check(t, r, 403, app.EFORBIDDEN, `"requiredScope":"`+c.scope+`"`)
	}
	// The failure-code catalogue needs a valid key, nothing more.
	check(t, h.do("GET", "/api/v1/failure-codes", ""), 401, app.EUNAUTHORIZED)
	check(t, h.do("GET", "/api/v1/failure-codes", "", bearer(noScope)...), 200, "", `"graph.consent_missing"`)
}

func TestJobOfAnotherTenantIsNotFound(t *testing.T) {
	h := newJobHarness(t, 0)
	other := h.storeJob(h.tenantB.ID, app.QueueEndpointBackup, app.JobQueued)
	keyA, _ := h.key(h.tenantA.ID, app.ScopeJobsRead)
	missing := h.do("GET", "/api/v1/jobs/job_00000000000000000000000000", "", bearer(keyA)...)
	theirs := h.do("GET", "/api/v1/jobs/"+other.ID, "", bearer(keyA)...)
	check(t, missing, 404, app.ENOTFOUND)
	check(t, theirs, 404, app.ENOTFOUND)
	if missing.json()["detail"] != theirs.json()["detail"] {
		t.Errorf("another tenant's job is distinguishable: %s vs %s", theirs.body, missing.body)
	}
	check(t, h.do("GET", "/api/v1/jobs/"+other.ID+"/events", "", bearer(keyA)...), 404, app.ENOTFOUND)
	list := h.do("GET", "/api/v1/jobs", "", bearer(keyA)...)
	check(t, list, 200, "", `"items":[]`)

	// A provider key without X-Service-Tenant sees every tenant's jobs.
	prov, _ := h.key("", app.ScopeJobsRead)
	check(t, h.do("GET", "/api/v1/jobs/"+other.ID, "", bearer(prov)...), 200, "", `"tenantId":"`+h.tenantB.ID+`"`)
	check(t, h.do("GET", "/api/v1/jobs/"+other.ID, "", append(bearer(prov), "X-Service-Tenant", h.tenantA.ID)...), 404, app.ENOTFOUND)
}

func TestStartingWorkValidatesTargetKinds(t *testing.T) {
	h := newJobHarness(t, 0)
	key, _ := h.key(h.tenantA.ID, app.ScopeRestoreWrite, app.ScopeVerifyWrite, app.ScopeJobsRead)
	field := func(r *response) string {
		var p Problem
		json.Unmarshal(r.body, &p)
		if len(p.Errors) == 0 {
			return ""
		}
		return p.Errors[0].Location
	}
	for _, c := range []struct{ path, body, location string }{
		{"/api/v1/backups", `{"targetType":"protected_object","targetId":"po_1"}`, "body.targetType"},
		{"/api/v1/verifies", `{"targetType":"endpoint","targetId":"ep_1"}`, "body.targetType"},
		{"/api/v1/restores", `{"snapshotId":"abc"}`, "body.snapshotId"},
		{"/api/v1/backups", `{"targetType":"tape","targetId":"x"}`, "body.targetType"},
		{"/api/v1/backups", `{"targetType":"endpoint","targetId":"x","extra":1}`, "body.extra"},
	} {
		r := h.do("POST", c.path, c.body, bearer(key)...)
		check(t, r, 422, app.EINVALID)
		if got := field(r); got != c.location {
			t.Errorf("%s %s: errors[0].location = %q, want %q (%s)", c.path, c.body, got, c.location, r.body)
		}
	}

	mine := h.endpoint(h.tenantA.ID, "web1", app.ProfileServer)
	theirs := h.endpoint(h.tenantB.ID, "db1", app.ProfileServer)
	check(t, h.do("POST", "/api/v1/backups", `{"targetType":"endpoint","targetId":"`+theirs.ID+`"}`, bearer(key)...), 404, app.ENOTFOUND)
	r := h.do("POST", "/api/v1/backups", `{"targetType":"endpoint","targetId":"`+mine.ID+`"}`, bearer(key)...)
	check(t, r, 202, "", `"state":"queued"`, `"trigger":"api"`, `"queue":"endpoint_backup"`, `"displayName":"web1"`, `"failure":null`)
	id := r.json()["id"].(string)
	if !app.HasPrefix(id, app.PrefixJob) {
		t.Fatalf("job id %q", id)
	}
	rows := h.auditRows(1)
	if rows[0].Action != "backups.start" || rows[0].Status != 202 {
		t.Errorf("audit row %+v", rows[0])
	}
	close(h.steps)
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := h.do("GET", "/api/v1/jobs/"+id, "", bearer(key)...)
		if r.json()["state"] == "succeeded" {
			check(t, r, 200, "", `"items":[]`, `"failureGroups":[]`, `"snapshotId":"snap-`+id+`"`, `"itemCauses":[]`)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job did not finish: %s", r.body)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestListJobsFiltersAndPages(t *testing.T) {
	h := newJobHarness(t, 0)
	var ids []string
	for i := range 5 {
		state := app.JobQueued
		if i%2 == 1 {
			state = app.JobFailed
		}
		ids = append(ids, h.storeJob(h.tenantA.ID, app.QueueEndpointBackup, state).ID)
		h.clock.Add(time.Minute)
	}
	h.storeJob(h.tenantA.ID, app.QueueVerify, app.JobQueued)
	key, _ := h.key(h.tenantA.ID, app.ScopeJobsRead)
	var seen []string
	cursor := ""
	for page := 0; ; page++ {
		q := url.Values{"limit": {"2"}, "queue": {"endpoint_backup"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		r := h.do("GET", "/api/v1/jobs?"+q.Encode(), "", bearer(key)...)
		check(t, r, 200, "")
		var b struct {
			Items      []app.Job `json:"items"`
			NextCursor *string   `json:"nextCursor"`
		}
		json.Unmarshal(r.body, &b)
		for _, j := range b.Items {
			seen = append(seen, j.ID)
		}
		if b.NextCursor == nil || page > 5 {
			break
		}
		if strings.HasPrefix(*b.NextCursor, "job_") {
			t.Errorf("cursor %q is a raw id, not opaque", *b.NextCursor)
		}
		cursor = *b.NextCursor
	}
	if len(seen) != 5 || seen[0] != ids[4] || seen[4] != ids[0] {
		t.Fatalf("paged ids %v, want the 5 endpoint jobs newest first %v", seen, ids)
	}
	r := h.do("GET", "/api/v1/jobs?state=failed", "", bearer(key)...)
	if n := len(r.json()["items"].([]any)); n != 2 {
		t.Errorf("state=failed gave %d jobs, want 2", n)
	}
	since := url.QueryEscape(harnessStart.Add(150 * time.Second).Format(time.RFC3339))
	r = h.do("GET", "/api/v1/jobs?since="+since+"&queue=endpoint_backup", "", bearer(key)...)
	if n := len(r.json()["items"].([]any)); n != 2 {
		t.Errorf("since gave %d jobs, want 2: %s", n, r.body)
	}
	other := &app.Job{TenantID: h.tenantA.ID, Queue: app.QueueEndpointBackup, State: app.JobQueued, Action: app.ActionBackup,
		Executor: app.ExecutorExternal, Target: app.JobTarget{Type: "endpoint", ID: "ep_y"}, Trigger: app.TriggerAPI}
	if err := h.db.CreateJob(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	for target, want := range map[string]int{"ep_y": 1, "ep_x": 6, "ep_none": 0} {
		r = h.do("GET", "/api/v1/jobs?targetId="+target, "", bearer(key)...)
		if n := len(r.json()["items"].([]any)); n != want {
			t.Errorf("targetId=%s gave %d jobs, want %d", target, n, want)
		}
	}
	check(t, h.do("GET", "/api/v1/jobs?cursor=nonsense", "", bearer(key)...), 422, app.EINVALID)
	check(t, h.do("GET", "/api/v1/jobs?state=exploded", "", bearer(key)...), 422, app.EINVALID)
	check(t, h.do("GET", "/api/v1/jobs?limit=1001", "", bearer(key)...), 422, app.EINVALID)
}

func TestJobDetailListsFailedItemsAndGroups(t *testing.T) {
	h := newJobHarness(t, 0)
	ctx := context.Background()
	j := h.storeJob(h.tenantA.ID, app.QueueEndpointBackup, app.JobQueued)
	if _, err := h.runner.Start(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	for i, code := range []string{"graph.throttled", "graph.mailbox_unavailable", "graph.throttled"} {
		f := app.NewFailure(code, map[string]any{"mailbox": "a@example.com", "accessToken": "eyJsecret"}, "Authorization: Bearer abcdefghijkl", "download", h.clock.Now())
		if err := h.runner.Item(ctx, j.ID, &app.JobItem{Ref: "msg" + string(rune('0'+i)), Name: "Message " + string(rune('0'+i)), Failure: f}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.runner.Finish(ctx, j.ID, &jobs.Outcome{}); err != nil {
		t.Fatal(err)
	}
	key, _ := h.key(h.tenantA.ID, app.ScopeJobsRead)
	r := h.do("GET", "/api/v1/jobs/"+j.ID, "", bearer(key)...)
	check(t, r, 200, "", `"state":"partial"`, `"itemsFailed":3`, `"failure":null`,
		`"failureGroups":[{"code":"graph.throttled","count":2,"sample":"Message 0"},{"code":"graph.mailbox_unavailable","count":1,"sample":"Message 1"}]`,
		`"itemCauses":[{"code":"graph.throttled","category":"throttling","count":2}`)
	if strings.Contains(string(r.body), "eyJsecret") || strings.Contains(string(r.body), "abcdefghijkl") {
		t.Errorf("secrets leaked into the job detail: %s", r.body)
	}
	var d struct {
		Items []app.JobItem `json:"items"`
	}
	json.Unmarshal(r.body, &d)
	if len(d.Items) != 3 || d.Items[0].Failure == nil || d.Items[0].Failure.Code != "graph.throttled" || len(d.Items[0].Failure.FixSteps) == 0 {
		t.Fatalf("items = %+v", d.Items)
	}
}
