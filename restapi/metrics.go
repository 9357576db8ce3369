package restapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"backstop/app"

	"github.com/julienschmidt/httprouter"
)

// metrics serves GET /metrics (CONTRACT §15) to a scraper connecting from a
// metrics.allow prefix (the client address as the audit log sees it,
// trusted proxies honoured) or presenting metrics.token as a Bearer token.
// With neither configured the route does not exist (404). A refused scrape
// is decided on the request line and headers alone, before anything is
// read from the database: a wrong token costs nothing.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if s.opts.Metrics == nil || (s.opts.MetricsToken == "" && len(s.opts.MetricsAllow) == 0) {
		writeProblemRaw(w, newProblem(app.ENOTFOUND, fmt.Sprintf("No route for %s %s.", r.Method, r.URL.Path)))
		return
	}
	if !s.metricsAllowed(stateFrom(r.Context()).ip) && !s.metricsToken(r) {
		if s.opts.MetricsToken == "" {
			writeProblemRaw(w, newProblem("forbidden", "Metrics are not served to this address (metrics.allow)."))
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="metrics"`)
		writeProblemRaw(w, newProblem(app.EUNAUTHORIZED, "Metrics need the metrics token: Authorization: Bearer <metrics.token>."))
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	s.opts.Metrics.ServeHTTP(w, r)
}

func (s *Server) metricsAllowed(ip string) bool {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return false
	}
	for _, p := range s.opts.MetricsAllow {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// metricsToken compares digests in constant time, so neither the token's
// content nor its length shows in the answer's timing.
func (s *Server) metricsToken(r *http.Request) bool {
	if s.opts.MetricsToken == "" {
		return false
	}
	scheme, sent, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	got, want := sha256.Sum256([]byte(strings.TrimSpace(sent))), sha256.Sum256([]byte(s.opts.MetricsToken))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}
