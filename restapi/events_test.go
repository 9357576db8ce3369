package restapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"backstop/app"
)

type feedPage struct {
	Items      []map[string]any `json:"items"`
	NextCursor *string          `json:"nextCursor"`
}

func (h *harness) feed(t *testing.T, query string, auth ...any) feedPage {
	t.Helper()
	r := h.do("GET", "/api/v1/events"+query, "", auth...)
	check(t, r, 200, "")
	var p feedPage
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func pageIDs(p feedPage) []string {
	ids := []string{}
	for _, it := range p.Items {
		ids = append(ids, it["id"].(string))
	}
	return ids
}

// endpointRunEnd ends an endpoint run through the store as agentapi does,
// raising its job.failed or job.completed event.
func (h *harness) endpointRunEnd(t *testing.T, e *app.Endpoint, state string, f *app.Failure) {
	t.Helper()
	ctx := context.Background()
	now := h.clock.Now()
	job := &app.Job{TenantID: e.TenantID, Queue: app.QueueEndpointBackup, Action: app.ActionBackup, Trigger: app.TriggerSchedule,
		Target: app.JobTarget{Type: app.TargetEndpoint, ID: e.ID, DisplayName: e.Hostname}, QueuedAt: app.At(now)}
	run := &app.AgentRun{ID: "run_" + app.RandomToken(12), EndpointID: e.ID, Kind: app.ActionBackup, StartedAt: now}
	if _, err := h.db.StartAgentRun(ctx, run, job); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.db.FinishAgentRun(ctx, app.AgentRunEnd{RunID: run.ID, EndpointID: e.ID, State: state, FinishedAt: now,
		Failure: f, Message: "failed"}, app.EndpointJobEvents); err != nil {
		t.Fatal(err)
	}
}

func TestEventFeed(t *testing.T) {
	h, disp := webhookHarness(t, true)
	a, b := h.tenantA.ID, h.tenantB.ID

	// A webhook of tenant A receives job.failed: the feed must serve the
	// very envelope it gets.
	delivered := make(chan []byte, 4)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		delivered <- body
	}))
	defer recv.Close()
	hooksKey, _ := h.key(a, app.ScopeWebhooksManage)
	check(t, h.do("POST", "/api/v1/webhooks", `{"url":"`+recv.URL+`/hook","events":["job.failed"]}`, bearer(hooksKey)...), 201, "")

	epA := h.endpoint(a, "srv-a", app.ProfileServer)
	h.endpointRunEnd(t, epA, app.JobFailed, &app.Failure{Code: "agent.backup_failed", Category: app.CategoryAgent})
	publish := func(typ, tenant string) string {
		t.Helper()
		e := &app.Event{Type: typ, TenantID: tenant, Data: map[string]any{"n": 1}}
		if err := h.db.PublishEvent(context.Background(), e); err != nil {
			t.Fatal(err)
		}
		return e.ID
	}
	eB1 := publish(app.EventJobCompleted, b)
	eA2 := publish(app.EventJobCompleted, a)
	publish(app.EventWebhookTest, a) // one receiver's test: not in the feed
	eA3 := publish(app.EventVerifyCompleted, a)
	disp.Notify()

	keyA, _ := h.key(a, app.ScopeJobsRead)
	keyB, _ := h.key(b, app.ScopeJobsRead)
	prov, _ := h.key("", app.ScopeJobsRead)
	noScope, _ := h.key(a, app.ScopeStatusRead)

	// The scope is checked before anything about the query.
	for _, q := range []string{"", "?after=garbage", "?limit=0"} {
		check(t, h.do("GET", "/api/v1/events"+q, "", bearer(noScope)...), 403, app.EFORBIDDEN, `"requiredScope":"jobs:read"`)
	}

	all := h.feed(t, "", bearer(keyA)...)
	if len(all.Items) != 3 || all.NextCursor != nil {
		t.Fatalf("tenant A feed = %v, next %v", pageIDs(all), all.NextCursor)
	}
	eA1 := all.Items[0]["id"].(string)
	if want := []string{eA1, eA2, eA3}; !reflect.DeepEqual(pageIDs(all), want) {
		t.Fatalf("tenant A feed = %v, want %v (oldest first)", pageIDs(all), want)
	}
	if rows := h.auditRows(1); rows[0].Action != "events.list" || rows[0].Status != 200 || rows[0].TenantID != a {
		t.Errorf("audit row %+v", rows[0])
	}

	// The job.failed envelope is the webhook's, byte for byte in meaning,
	// and carries the open incident.
	var body []byte
	select {
	case body = <-delivered:
	case <-time.After(5 * time.Second):
		t.Fatal("the webhook got no job.failed")
	}
	var hooked map[string]any
	if err := json.Unmarshal(body, &hooked); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(hooked, all.Items[0]) {
		t.Fatalf("feed item\n%v\nwebhook body\n%v", all.Items[0], hooked)
	}
	inc, _ := all.Items[0]["data"].(map[string]any)["incident"].(map[string]any)
	if inc["key"] != epA.ID+":agent.backup_failed" || inc["state"] != "open" || all.Items[0]["type"] != "job.failed" ||
		all.Items[0]["tenantId"] != a {
		t.Fatalf("job.failed item %v", all.Items[0])
	}

	// Paging: limit, nextCursor, after.
	p1 := h.feed(t, "?limit=2", bearer(keyA)...)
	if !reflect.DeepEqual(pageIDs(p1), []string{eA1, eA2}) || p1.NextCursor == nil || *p1.NextCursor != eA2 {
		t.Fatalf("page 1 = %v next %v", pageIDs(p1), p1.NextCursor)
	}
	p2 := h.feed(t, "?limit=2&after="+*p1.NextCursor, bearer(keyA)...)
	if !reflect.DeepEqual(pageIDs(p2), []string{eA3}) || p2.NextCursor != nil {
		t.Fatalf("page 2 = %v next %v", pageIDs(p2), p2.NextCursor)
	}
	if p3 := h.feed(t, "?after="+eA3, bearer(keyA)...); len(p3.Items) != 0 || p3.NextCursor != nil {
		t.Fatalf("after the newest = %v next %v", pageIDs(p3), p3.NextCursor)
	}
	// A later event shows up when polling with the last id processed.
	eA4 := publish(app.EventJobFailed, a)
	if p4 := h.feed(t, "?after="+eA3, bearer(keyA)...); !reflect.DeepEqual(pageIDs(p4), []string{eA4}) {
		t.Fatalf("poll after %s = %v, want %s", eA3, pageIDs(p4), eA4)
	}

	// Tenant isolation, and the provider's view.
	if got := pageIDs(h.feed(t, "", bearer(keyB)...)); !reflect.DeepEqual(got, []string{eB1}) {
		t.Fatalf("tenant B feed = %v", got)
	}
	check(t, h.do("GET", "/api/v1/events?after="+eB1, "", bearer(keyA)...), 422, app.EINVALID, `"location":"query.after"`)
	if got := pageIDs(h.feed(t, "", bearer(prov)...)); !reflect.DeepEqual(got, []string{eA1, eB1, eA2, eA3, eA4}) {
		t.Fatalf("provider feed = %v", got)
	}
	if rows := h.auditRows(1); rows[0].TenantID != "" {
		t.Errorf("provider read across tenants audited for %q", rows[0].TenantID)
	}
	if got := pageIDs(h.feed(t, "", append(bearer(prov), "X-Service-Tenant", b)...)); !reflect.DeepEqual(got, []string{eB1}) {
		t.Fatalf("provider feed for B = %v", got)
	}
	check(t, h.do("GET", "/api/v1/events?after="+eA1, "", append(bearer(prov), "X-Service-Tenant", b)...), 422, app.EINVALID,
		`"location":"query.after"`)

	// Bad input.
	for _, c := range []struct{ query, location string }{
		{"?after=garbage", "query.after"},
		{"?after=evt_00000000000000000000000000", "query.after"},
		{"?after=job_00000000000000000000000000", "query.after"},
		{"?limit=0", "query.limit"},
		{"?limit=1001", "query.limit"},
	} {
		check(t, h.do("GET", "/api/v1/events"+c.query, "", bearer(keyA)...), 422, app.EINVALID, `"location":"`+c.location+`"`)
	}
}

func TestEventFeedDocumented(t *testing.T) {
	h := newHarness(t, app.EditionProvider, nil)
	r := h.do("GET", "/api/v1/openapi.json", "")
	check(t, r, 200, "", `"/api/v1/events"`, `"operationId":"events.list"`, `query.after`, `"jobs:read"`)
	var doc struct {
		Paths map[string]struct {
			Get struct {
				Parameters []struct{ Name string }
				Responses  map[string]any
			}
		}
	}
	json.Unmarshal(r.body, &doc)
	op := doc.Paths["/api/v1/events"].Get
	var params []string
	for _, p := range op.Parameters {
		params = append(params, p.Name)
	}
	if !reflect.DeepEqual(params, []string{"after", "limit"}) || op.Responses["422"] == nil || op.Responses["403"] == nil {
		t.Fatalf("events.list params %v responses %v", params, op.Responses)
	}
}
