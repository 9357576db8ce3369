package restapi

import (
	"context"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"backstop/app"
	"backstop/app/metrics"

	"github.com/prometheus/common/expfmt"
)

const testMetricsToken = "metrics-token-0123456789"

// countingJobs counts the scrapes that reached the database.
type countingJobs struct{ reads atomic.Int32 }

func (c *countingJobs) CountActiveJobs(context.Context) ([]app.JobQueueCount, error) {
	c.reads.Add(1)
	return nil, nil
}

// metricsHarness is a server with metrics wired as serve wires them.
func metricsHarness(t *testing.T, tweak func(*Options)) (*harness, *countingJobs) {
	jobs := &countingJobs{}
	h := newHarness(t, app.EditionStandard, func(o *Options) {
		m := metrics.New(metrics.Sources{Jobs: jobs, Logger: discardLogger()})
		o.Metrics, o.ObserveRequest = m.Handler(), m.ObserveRequest
		if tweak != nil {
			tweak(o)
		}
	})
	return h, jobs
}

func TestMetricsOffByDefault(t *testing.T) {
	h, jobs := metricsHarness(t, nil)
	check(t, h.do("GET", "/metrics", ""), 404, "not_found")
	check(t, h.do("GET", "/metrics", "", bearer(testMetricsToken)...), 404, "not_found")
	if n := jobs.reads.Load(); n != 0 {
		t.Errorf("%d database reads while metrics are off", n)
	}
}

func TestMetricsToken(t *testing.T) {
	h, jobs := metricsHarness(t, func(o *Options) { o.MetricsToken = testMetricsToken })
	before := h.auditCount()
	for name, hdr := range map[string][]any{
		"none":       nil,
		"wrong":      bearer("metrics-token-0123456780"),
		"prefix":     bearer(testMetricsToken[:10]),
		"longer":     bearer(testMetricsToken + "x"),
		"not bearer": {"Authorization", "Basic " + testMetricsToken},
		"api key":    bearer("bsk_" + strings.Repeat("a", 40)),
	} {
		t.Run(name, func(t *testing.T) {
			r := h.do("GET", "/metrics", "", hdr...)
			check(t, r, 401, "unauthorized")
			if r.header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
	// A refused scrape costs nothing: no read of the database.
	if n := jobs.reads.Load(); n != 0 {
		t.Errorf("refused scrapes read the database %d times", n)
	}
	r := h.do("GET", "/metrics", "", bearer(testMetricsToken)...)
	check(t, r, 200, "", "# HELP backstop_jobs ", "go_goroutines")
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q", ct)
	}
	if n := jobs.reads.Load(); n != 1 {
		t.Errorf("%d database reads for one scrape, want 1", n)
	}
	// Neither scrapes nor refusals are audited.
	if after := h.auditCount(); after != before {
		t.Errorf("audit rows %d -> %d", before, after)
	}
}

func TestMetricsAllowList(t *testing.T) {
	loopback := netip.MustParsePrefix("127.0.0.1/32")
	t.Run("allowed prefix needs no token", func(t *testing.T) {
		h, _ := metricsHarness(t, func(o *Options) { o.MetricsAllow = []netip.Prefix{loopback} })
		check(t, h.do("GET", "/metrics", ""), 200, "", "backstop_jobs")
	})
	t.Run("another address is refused", func(t *testing.T) {
		h, jobs := metricsHarness(t, func(o *Options) { o.MetricsAllow = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")} })
		check(t, h.do("GET", "/metrics", ""), 403, "forbidden")
		// A spoofed X-Forwarded-For from an untrusted peer changes nothing.
		check(t, h.do("GET", "/metrics", "", "X-Forwarded-For", "10.1.2.3"), 403, "forbidden")
		if n := jobs.reads.Load(); n != 0 {
			t.Errorf("refused scrapes read the database %d times", n)
		}
	})
	t.Run("another address may still use the token", func(t *testing.T) {
		h, _ := metricsHarness(t, func(o *Options) {
			o.MetricsAllow, o.MetricsToken = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, testMetricsToken
		})
		check(t, h.do("GET", "/metrics", ""), 401, "unauthorized")
		check(t, h.do("GET", "/metrics", "", bearer(testMetricsToken)...), 200, "")
	})
	t.Run("behind a trusted proxy the forwarded client counts", func(t *testing.T) {
		h, _ := metricsHarness(t, func(o *Options) {
			o.TrustedProxies = []netip.Prefix{loopback}
			o.MetricsAllow = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
		})
		check(t, h.do("GET", "/metrics", "", "X-Forwarded-For", "10.1.2.3"), 200, "")
		check(t, h.do("GET", "/metrics", "", "X-Forwarded-For", "192.0.2.1"), 403, "forbidden")
		check(t, h.do("GET", "/metrics", ""), 403, "forbidden") // the proxy itself is not allowed
	})
}

// HTTP requests are counted by route pattern, never by raw path.
func TestMetricsCountRequestsByRoute(t *testing.T) {
	h, _ := metricsHarness(t, func(o *Options) { o.MetricsToken = testMetricsToken })
	key, _ := h.key(h.tenantA.ID, app.ScopeStatusRead)
	ep := h.endpoint(h.tenantA.ID, "srv-1", app.ProfileServer)
	check(t, h.do("GET", "/api/v1/endpoints/"+ep.ID, "", bearer(key)...), 200, "")
	check(t, h.do("GET", "/api/v1/endpoints/ep_missing1", "", bearer(key)...), 404, "")
	check(t, h.do("GET", "/api/v1/endpoints/ep_missing2", "", bearer(key)...), 404, "")
	check(t, h.do("GET", "/api/v1/endpoints/"+ep.ID, ""), 401, "")
	check(t, h.do("GET", "/api/v1/no/such/route/1", ""), 404, "")
	check(t, h.do("GET", "/healthz", ""), 200, "")

	r := h.do("GET", "/metrics", "", bearer(testMetricsToken)...)
	check(t, r, 200, "")
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(r.body)))
	if err != nil {
		t.Fatalf("scrape does not parse: %v", err)
	}
	got := map[string]float64{}
	for _, m := range fams["backstop_http_requests_total"].GetMetric() {
		var route, method, code string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "route":
				route = l.GetValue()
			case "method":
				method = l.GetValue()
			case "code":
				code = l.GetValue()
			}
		}
		got[method+" "+route+" "+code] = m.GetCounter().GetValue()
	}
	for series, want := range map[string]float64{
		"GET /api/v1/endpoints/{id} 200": 1,
		"GET /api/v1/endpoints/{id} 404": 2,
		"GET /api/v1/endpoints/{id} 401": 1,
		"GET (unmatched) 404":            1,
		"GET /healthz 200":               1,
	} {
		if got[series] != want {
			t.Errorf("%s = %v, want %v (all: %v)", series, got[series], want, got)
		}
	}
	for series := range got {
		if strings.Contains(series, "ep_") {
			t.Errorf("raw path in a label: %s", series)
		}
	}
	var durations uint64
	for _, m := range fams["backstop_http_request_duration_seconds"].GetMetric() {
		durations += m.GetHistogram().GetSampleCount()
	}
	if durations < 6 {
		t.Errorf("%d request durations observed, want at least 6", durations)
	}
}
