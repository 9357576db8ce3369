package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/jobs"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// TestMetricsEndToEnd runs serve with metrics.token set, drives API
// requests, a job and its webhook, and reads them back from /metrics as
// Prometheus would.
func TestMetricsEndToEnd(t *testing.T) {
	const token = "e2e-metrics-token-0123456789"
	var hooks atomic.Int32
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		hooks.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer recv.Close()
	backup := jobs.Kind{Action: app.ActionBackup, TargetType: "endpoint", Queue: app.QueueEndpointBackup,
		Resolve: func(ctx context.Context, tenantID, id string, _ json.RawMessage) (app.JobTarget, error) {
			return app.JobTarget{Type: "endpoint", ID: id, DisplayName: "host-" + id}, nil
		},
		Run: func(ctx context.Context, r *jobs.Run) (*jobs.Outcome, error) {
			time.Sleep(20 * time.Millisecond)
			return &jobs.Outcome{SnapshotID: "snap-" + r.Job.ID}, nil
		}}
	a := startApplianceWith(t, map[string]string{"SERVICE_METRICS_TOKEN": token, "SERVICE_WEBHOOK_ALLOW_PRIVATE": "true"}, backup)
	tenant := a.admin("", "create-tenant", "--name", "Acme")
	key := a.admin("", "create-key", "--tenant", tenant, "--name", "PSA", "--scopes", "jobs:read,restore:write,webhooks:manage,status:read")
	auth := []string{"Authorization", "Bearer " + key}

	a.expect(a.call("GET", "/metrics", ""), 401, "unauthorized")
	a.expect(a.call("GET", "/metrics", "", "Authorization", "Bearer "+token+"x"), 401, "unauthorized")

	a.expect(a.call("POST", "/api/v1/webhooks", `{"url":"`+recv.URL+`/hook","events":["job.completed"]}`, auth...), 201, "")
	a.expect(a.call("GET", "/api/v1/status", "", auth...), 200, "")
	a.expect(a.call("GET", "/api/v1/jobs/job_doesnotexist", "", auth...), 404, "not_found")
	r := a.call("POST", "/api/v1/backups", `{"targetType":"endpoint","targetId":"ep_metrics"}`, auth...)
	a.expect(r, 202, "")
	var job app.Job
	json.Unmarshal(r.body, &job)
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := a.call("GET", "/api/v1/jobs/"+job.ID, "", auth...)
		json.Unmarshal(r.body, &job)
		if job.State == app.JobSucceeded && hooks.Load() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s, %d webhook deliveries after 20 s", job.State, hooks.Load())
		}
		time.Sleep(50 * time.Millisecond)
	}

	var fams map[string]*dto.MetricFamily
	for { // the attempt is counted as it is made; the scrape may race it by a moment
		r := a.call("GET", "/metrics", "", "Authorization", "Bearer "+token)
		a.expect(r, 200, "")
		var p expfmt.TextParser
		var err error
		if fams, err = p.TextToMetricFamilies(strings.NewReader(string(r.body))); err != nil {
			t.Fatalf("scrape does not parse: %v\n%s", err, r.body)
		}
		if sample(fams, "backstop_webhook_deliveries_total", "state", "delivered") >= 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, c := range []struct {
		name, label, value string
		min                float64
	}{
		{"backstop_job_duration_seconds", "queue", "endpoint_backup", 1},
		{"backstop_webhook_attempts_total", "outcome", "delivered", 1},
		{"backstop_webhook_deliveries_total", "state", "delivered", 1},
		{"backstop_http_requests_total", "route", "/api/v1/jobs/{id}", 2},
		{"backstop_http_requests_total", "route", "/api/v1/backups", 1},
		{"backstop_http_requests_total", "code", "401", 2},
		{"backstop_http_request_duration_seconds", "route", "/api/v1/status", 1},
		{"backstop_storage_target_stored_bytes", "kind", "local", 0},
		{"backstop_storage_target_state", "state", "ok", 1},
		{"backstop_storage_target_free_bytes", "kind", "local", 1},
		{"backstop_storage_target_capacity_bytes", "kind", "local", 1},
		{"backstop_jobs", "queue", "endpoint_backup", 0},
		{"go_goroutines", "", "", 1},
		{"process_resident_memory_bytes", "", "", 1},
	} {
		if fams[c.name] == nil {
			t.Errorf("%s missing from the scrape", c.name)
			continue
		}
		if got := sample(fams, c.name, c.label, c.value); got < c.min {
			t.Errorf("%s{%s=%q} = %v, want at least %v", c.name, c.label, c.value, got, c.min)
		}
	}
	if got := sample(fams, "backstop_jobs", "state", "running"); got != 0 {
		t.Errorf("backstop_jobs{state=running} = %v after the job ended", got)
	}
	for _, m := range fams["backstop_http_requests_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if strings.Contains(l.GetValue(), "job_") {
				t.Errorf("raw path in label %s=%s", l.GetName(), l.GetValue())
			}
		}
	}
}

// sample sums the series of name whose label has the value (every series
// when label is ""): counter and gauge values, histogram sample counts.
func sample(fams map[string]*dto.MetricFamily, name, label, value string) float64 {
	var sum float64
	for _, m := range fams[name].GetMetric() {
		match := label == ""
		for _, l := range m.GetLabel() {
			if l.GetName() == label && l.GetValue() == value {
				match = true
			}
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum
}
