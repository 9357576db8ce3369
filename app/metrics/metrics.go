// Package metrics exports the appliance's state and activity in the
// Prometheus text format, for GET /metrics (CONTRACT §15).
//
// It owns a registry of its own (never the process-wide default one, so
// libraries such as Litestream cannot add series behind our back): the Go
// runtime and process collectors, counters and histograms the components
// feed through small hooks (ObserveRequest, JobEnded, WebhookAttempted),
// and gauges read from the store when a scrape comes (jobs waiting and
// running, storage targets). A scrape reads only SQLite, never the network:
// storage target states are those of the targets' last check.
//
// Who may scrape is decided in restapi, before anything here runs.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"backstop/app"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Sources are what a scrape reads. Either may be nil: its series are left out.
type Sources struct {
	Jobs    app.ActiveJobCounter
	Storage StorageTargets
	Logger  *slog.Logger
	// ScrapeTimeout bounds the store reads of one scrape (default 5 s).
	ScrapeTimeout time.Duration
}

// StorageTargets lists the storage targets with their last checked state.
type StorageTargets interface {
	Targets(ctx context.Context, f app.StorageTargetFilter) ([]*app.StorageTarget, error)
}

// Metrics is the registry and the instruments components feed. Its methods
// are safe for concurrent use and never block.
type Metrics struct {
	reg     *prometheus.Registry
	handler http.Handler

	httpRequests      *prometheus.CounterVec
	httpDuration      *prometheus.HistogramVec
	jobDuration       *prometheus.HistogramVec
	webhookAttempts   *prometheus.CounterVec
	webhookDeliveries *prometheus.CounterVec
}

// JobDurationBuckets span a quick verify of one file to a night-long
// first backup (seconds).
var JobDurationBuckets = []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 28800, 86400}

// New builds the registry with every series registered.
func New(src Sources) *Metrics {
	if src.Logger == nil {
		src.Logger = slog.Default()
	}
	if src.ScrapeTimeout <= 0 {
		src.ScrapeTimeout = 5 * time.Second
	}
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "backstop_http_requests_total",
			Help: "HTTP requests answered by the API, probes, metrics and web interface, by route pattern (not the raw path), method and status code.",
		}, []string{"route", "method", "code"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "backstop_http_request_duration_seconds",
			Help:    "Time from the request's arrival to the end of its answer, by route pattern and method.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route", "method"}),
		jobDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "backstop_job_duration_seconds",
			Help:    "Run time of jobs that ended since start-up (started to finished), by queue and final state.",
			Buckets: JobDurationBuckets,
		}, []string{"queue", "state"}),
		webhookAttempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "backstop_webhook_attempts_total",
			Help: "Webhook delivery attempts since start-up by outcome: delivered (2xx), gone (410), http_error (another status), no_answer (no HTTP answer: refused, timed out, unreachable).",
		}, []string{"outcome"}),
		webhookDeliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "backstop_webhook_deliveries_total",
			Help: "Webhook deliveries that ended since start-up, by final state: delivered, gone (receiver answered 410), failed (every attempt failed).",
		}, []string{"state"}),
	}
	for _, outcome := range []string{"delivered", "gone", "http_error", "no_answer"} {
		m.webhookAttempts.WithLabelValues(outcome)
	}
	for _, state := range []string{app.DeliveryDelivered, app.DeliveryGone, app.DeliveryFailed} {
		m.webhookDeliveries.WithLabelValues(state)
	}
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "backstop_build_info", Help: "Always 1; the running version is in the version label.",
		ConstLabels: prometheus.Labels{"version": app.Version},
	})
	build.Set(1)
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), // standard names, as dashboards expect
		build, m.httpRequests, m.httpDuration, m.jobDuration, m.webhookAttempts, m.webhookDeliveries,
		&stateCollector{src: src},
	)
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		// A failing store read costs its own series, not the whole scrape.
		ErrorHandling:       promhttp.ContinueOnError,
		ErrorLog:            errorLog{src.Logger},
		MaxRequestsInFlight: 2,
		Timeout:             src.ScrapeTimeout + 5*time.Second,
	})
	return m
}

// Handler answers a scrape. It does no access check of its own.
func (m *Metrics) Handler() http.Handler { return m.handler }

// Registry is the registry behind Handler (for tests and tools).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// ObserveRequest counts one answered HTTP request. route is the pattern the
// request matched (e.g. /api/v1/endpoints/{id}), never the raw path.
// Methods outside the standard ones are counted as OTHER: clients choose
// the method, and must not be able to grow the series without bound.
func (m *Metrics) ObserveRequest(route, method string, status int, d time.Duration) {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
	default:
		method = "OTHER"
	}
	m.httpRequests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
	m.httpDuration.WithLabelValues(route, method).Observe(d.Seconds())
}

// JobEnded observes the run time of a job that reached its final state.
// Jobs that never started (cancelled while queued) are not observed.
func (m *Metrics) JobEnded(j *app.Job) {
	if !app.JobTerminal(j.State) || j.StartedAt == nil {
		return
	}
	var d time.Duration
	switch {
	case j.DurationMs != nil:
		d = time.Duration(*j.DurationMs) * time.Millisecond
	case j.FinishedAt != nil:
		d = j.FinishedAt.Sub(j.StartedAt.Time)
	default:
		return
	}
	m.jobDuration.WithLabelValues(j.Queue, j.State).Observe(max(d, 0).Seconds())
}

// WebhookAttempted counts one webhook attempt and, when it ended its
// delivery, the delivery.
func (m *Metrics) WebhookAttempted(o *app.AttemptOutcome) {
	outcome := "no_answer"
	if code := o.Attempt.StatusCode; code != nil {
		switch {
		case *code >= 200 && *code < 300:
			outcome = "delivered"
		case *code == http.StatusGone:
			outcome = "gone"
		default:
			outcome = "http_error"
		}
	}
	m.webhookAttempts.WithLabelValues(outcome).Inc()
	switch o.State {
	case app.DeliveryDelivered, app.DeliveryGone, app.DeliveryFailed:
		m.webhookDeliveries.WithLabelValues(o.State).Inc()
	}
}

type errorLog struct{ l *slog.Logger }

func (e errorLog) Println(v ...any) {
	e.l.Warn("metrics scrape incomplete", slog.Any("error", v))
}
