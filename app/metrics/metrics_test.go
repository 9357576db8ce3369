package metrics

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"backstop/app"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

type fakeJobs struct {
	counts []app.JobQueueCount
	err    error
}

func (f fakeJobs) CountActiveJobs(context.Context) ([]app.JobQueueCount, error) {
	return f.counts, f.err
}

type fakeTargets []*app.StorageTarget

func (f fakeTargets) Targets(context.Context, app.StorageTargetFilter) ([]*app.StorageTarget, error) {
	return f, nil
}

// scrape serves one scrape and parses it with Prometheus' own text parser.
func scrape(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape: %d %s", rec.Code, rec.Body)
	}
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatalf("scrape does not parse: %v\n%s", err, rec.Body)
	}
	return fams
}

// value returns the value of the series of name whose labels include want.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	t.Helper()
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

func TestScrapeSeries(t *testing.T) {
	free, capacity := int64(5<<30), int64(10<<30)
	m := New(Sources{
		Jobs: fakeJobs{counts: []app.JobQueueCount{{Queue: app.QueueVerify, State: app.JobRunning, Count: 2}}},
		Storage: fakeTargets{
			{ID: "st_1", Name: "Local", Kind: app.StorageKindLocal, State: app.StorageOK, StoredBytes: 1234, FreeBytes: &free, CapacityBytes: &capacity, Default: true},
			{ID: "st_2", Name: "Wasabi", Kind: app.StorageKindS3, State: app.StorageUnreachable},
		},
	})
	m.ObserveRequest("/api/v1/endpoints/{id}", http.MethodGet, 200, 3*time.Millisecond)
	m.ObserveRequest("/api/v1/endpoints/{id}", http.MethodGet, 404, time.Millisecond)
	m.ObserveRequest("(unmatched)", "BREW", 405, time.Millisecond)
	m.ObserveRequest("(unmatched)", "PROPFIND", 405, time.Millisecond)
	started := app.At(time.Unix(1000, 0))
	m.JobEnded(&app.Job{Queue: app.QueueVerify, State: app.JobSucceeded, StartedAt: &started, DurationMs: app.Ptr(int64(90_000))})
	m.JobEnded(&app.Job{Queue: app.QueueVerify, State: app.JobCancelled}) // never started: not observed
	m.WebhookAttempted(&app.AttemptOutcome{State: app.DeliveryPending, Attempt: app.DeliveryAttempt{StatusCode: app.Ptr(500)}})
	m.WebhookAttempted(&app.AttemptOutcome{State: app.DeliveryDelivered, Attempt: app.DeliveryAttempt{StatusCode: app.Ptr(204)}})
	m.WebhookAttempted(&app.AttemptOutcome{State: app.DeliveryFailed})

	fams := scrape(t, m)
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"backstop_jobs", map[string]string{"queue": "verify", "state": "running"}, 2},
		{"backstop_jobs", map[string]string{"queue": "endpoint_backup", "state": "queued"}, 0},
		{"backstop_job_duration_seconds", map[string]string{"queue": "verify", "state": "succeeded"}, 1},
		{"backstop_http_requests_total", map[string]string{"route": "/api/v1/endpoints/{id}", "method": "GET", "code": "200"}, 1},
		{"backstop_http_requests_total", map[string]string{"route": "/api/v1/endpoints/{id}", "code": "404"}, 1},
		{"backstop_http_request_duration_seconds", map[string]string{"route": "/api/v1/endpoints/{id}"}, 2},
		{"backstop_http_requests_total", map[string]string{"route": "(unmatched)", "method": "OTHER", "code": "405"}, 2},
		{"backstop_webhook_attempts_total", map[string]string{"outcome": "http_error"}, 1},
		{"backstop_webhook_attempts_total", map[string]string{"outcome": "delivered"}, 1},
		{"backstop_webhook_attempts_total", map[string]string{"outcome": "no_answer"}, 1},
		{"backstop_webhook_attempts_total", map[string]string{"outcome": "gone"}, 0},
		{"backstop_webhook_deliveries_total", map[string]string{"state": "delivered"}, 1},
		{"backstop_webhook_deliveries_total", map[string]string{"state": "failed"}, 1},
		{"backstop_storage_target_stored_bytes", map[string]string{"target": "st_1", "name": "Local", "kind": "local"}, 1234},
		{"backstop_storage_target_free_bytes", map[string]string{"target": "st_1"}, float64(free)},
		{"backstop_storage_target_capacity_bytes", map[string]string{"target": "st_1"}, float64(capacity)},
		{"backstop_storage_target_state", map[string]string{"target": "st_1", "state": "ok"}, 1},
		{"backstop_storage_target_state", map[string]string{"target": "st_1", "state": "full"}, 0},
		{"backstop_storage_target_state", map[string]string{"target": "st_2", "state": "unreachable"}, 1},
		{"backstop_storage_target_default", map[string]string{"target": "st_1"}, 1},
		{"backstop_build_info", map[string]string{"version": app.Version}, 1},
	} {
		if got, ok := value(t, fams, tc.name, tc.labels); !ok || got != tc.want {
			t.Errorf("%s%v = %v (present %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}
	if _, ok := value(t, fams, "backstop_storage_target_free_bytes", map[string]string{"target": "st_2"}); ok {
		t.Error("free bytes reported for a target that cannot tell them")
	}
	if _, ok := value(t, fams, "backstop_job_duration_seconds", map[string]string{"state": "cancelled"}); ok {
		t.Error("a job that never started was observed")
	}
	for _, name := range []string{"go_goroutines", "go_memstats_alloc_bytes", "process_resident_memory_bytes"} {
		if fams[name] == nil {
			t.Errorf("%s missing (Go and process collectors)", name)
		}
	}
	for name, f := range fams {
		if strings.HasPrefix(name, "backstop_") && f.GetHelp() == "" {
			t.Errorf("%s has no HELP", name)
		}
	}
}

// A failing store read loses its own series, not the scrape.
func TestScrapeSurvivesStoreError(t *testing.T) {
	m := New(Sources{Jobs: fakeJobs{err: errors.New("database is locked")}})
	m.ObserveRequest("/healthz", http.MethodGet, 200, time.Millisecond)
	fams := scrape(t, m)
	if fams["backstop_jobs"] != nil {
		t.Error("backstop_jobs reported despite the failing read")
	}
	if _, ok := value(t, fams, "backstop_http_requests_total", map[string]string{"route": "/healthz"}); !ok {
		t.Error("the rest of the scrape is missing")
	}
}
