package restapi

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"runtime/debug"
	"strings"
	"time"

	"backstop/app"

	"github.com/julienschmidt/httprouter"
)

// requestState travels with each request from the outer middleware through
// huma and the handler back to the audit hook.
type requestState struct {
	id        string
	ip        string
	principal *principal
	action    string // operation id; set for audited operations
	route     string // pattern the request matched, for metrics
	base      string // scheme://host this request reached, for links
	// actedFor is the tenant the request turned out to act for, when the
	// caller acts across tenants (a provider without X-Service-Tenant) and
	// the resource names one; the audit row records it.
	actedFor string
}

// actedFor records, for the audit row, the tenant a cross-tenant caller
// acted for: the tenant of the one resource it read or changed.
func actedFor(ctx context.Context, tenantID string) {
	if st := stateFrom(ctx); st.principal != nil && st.principal.tenantID == "" {
		st.actedFor = tenantID
	}
}

type stateKey struct{}

func stateFrom(ctx context.Context) *requestState {
	st, _ := ctx.Value(stateKey{}).(*requestState)
	if st == nil {
		return &requestState{}
	}
	return st
}

// withRequestState assigns the request id, the client address, security
// headers and the audit hook, and recovers panics outside huma.
func (s *Server) withRequestState(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := &requestState{id: requestID(r.Header.Get("X-Request-Id")), ip: s.clientIP(r), base: s.requestBase(r)}
		h := w.Header()
		h.Set("X-Request-Id", st.id)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		if strings.HasPrefix(r.URL.Path, "/api/") {
			h.Set("Cache-Control", "no-store")
		}
		aw := &auditingWriter{ResponseWriter: w, s: s, r: r, st: st}
		if s.opts.ObserveRequest == nil {
			next.ServeHTTP(aw, r.WithContext(context.WithValue(r.Context(), stateKey{}, st)))
			return
		}
		started := time.Now()
		defer func() {
			// Also when a handler panics on purpose (http.ErrAbortHandler):
			// the request was answered, if only in part.
			status := aw.status
			if status == 0 {
				status = http.StatusOK
			}
			s.opts.ObserveRequest(st.route, r.Method, status, time.Since(started))
		}()
		next.ServeHTTP(aw, r.WithContext(context.WithValue(r.Context(), stateKey{}, st)))
	})
}

// Route labels for requests that matched no route pattern.
const (
	routeUI        = "(ui)"        // the web interface's pages and files
	routeUnmatched = "(unmatched)" // 404 and 405 answers outside the web interface
)

// plain registers a GET route outside huma (probes, metrics): no
// authentication by API key, no audit row, no rate limit.
func (s *Server) plain(path string, h httprouter.Handle) {
	s.router.GET(path, func(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
		stateFrom(r.Context()).route = path
		h(w, r, p)
	})
}

// requestID echoes a client's id when it is short and printable, else makes one.
func requestID(sent string) string {
	if n := len(sent); n > 0 && n <= 128 {
		ok := true
		for _, c := range sent {
			if c < 0x21 || c > 0x7e {
				ok = false
				break
			}
		}
		if ok {
			return sent
		}
	}
	return "req_" + app.RandomToken(20)
}

// clientIP is the peer address, or the right-most untrusted address of
// X-Forwarded-For when the peer is a configured trusted proxy.
func (s *Server) clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	peer = peer.Unmap()
	if !s.trusted(peer) {
		return peer.String()
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break
		}
		a = a.Unmap()
		if !s.trusted(a) {
			return a.String()
		}
		peer = a
	}
	return peer.String()
}

func (s *Server) trusted(a netip.Addr) bool {
	for _, p := range s.opts.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// requestBase is scheme://host of the request as the client sent it; the
// scheme comes from X-Forwarded-Proto only when the peer is a trusted proxy.
func (s *Server) requestBase(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		if a, err := netip.ParseAddr(host); err == nil && s.trusted(a.Unmap()) {
			if p := r.Header.Get("X-Forwarded-Proto"); p == "https" || p == "http" {
				scheme = p
			}
		}
	}
	return scheme + "://" + r.Host
}

// auditingWriter writes the audit row of an audited operation when the
// status is set, before any byte of the answer is sent. If the row cannot be
// written the answer becomes a 500: nothing is answered unaudited.
type auditingWriter struct {
	http.ResponseWriter
	s       *Server
	r       *http.Request
	st      *requestState
	wrote   bool
	discard bool
	status  int // the status sent
}

func (w *auditingWriter) WriteHeader(code int) {
	if w.wrote {
		return
	}
	w.wrote = true
	if w.st.action != "" && w.st.principal != nil {
		if err := w.s.writeAudit(w.r, w.st, code); err != nil {
			w.s.opts.Logger.Error("audit write failed; answering 500", slog.String("request_id", w.st.id), slog.Any("error", err))
			h := w.ResponseWriter.Header()
			for k := range h {
				if k != "X-Request-Id" {
					h.Del(k)
				}
			}
			w.discard, w.status = true, http.StatusInternalServerError
			writeProblemRaw(w.ResponseWriter, newProblem(app.EINTERNAL, "Internal error; request id "+w.st.id+"."))
			return
		}
	}
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *auditingWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if w.discard {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush and deadlines (SSE).
func (w *auditingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush forwards to the underlying writer so streams reach the client.
func (w *auditingWriter) Flush() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok && !w.discard {
		f.Flush()
	}
}

func (s *Server) writeAudit(r *http.Request, st *requestState, status int) error {
	p := st.principal
	tenant := p.tenantID
	if tenant == "" {
		tenant = st.actedFor
	}
	e := &app.AuditEntry{
		At: app.At(s.opts.Now()), TenantID: tenant, Action: st.action, Target: r.URL.Path, Status: status,
		IP: st.ip, UserAgent: truncate(r.UserAgent(), 512), RequestID: st.id,
	}
	e.ActorType, e.ActorID, e.ActorName = p.actor()
	return s.Audit.WriteAudit(context.WithoutCancel(r.Context()), e)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// writeProblem answers with p as problem+json, with the request id in
// detail for internal errors.
func writeProblemRaw(w http.ResponseWriter, p *Problem) {
	h := w.Header()
	for k, v := range p.headers {
		h[k] = v
	}
	h.Set("Content-Type", "application/problem+json")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	st := stateFrom(r.Context())
	st.route = routeUnmatched
	if s.opts.UI != nil && !strings.HasPrefix(r.URL.Path, "/api/") {
		st.route = routeUI
		s.opts.UI.ServeHTTP(w, r)
		return
	}
	writeProblemRaw(w, newProblem(app.ENOTFOUND, fmt.Sprintf("No route for %s %s.", r.Method, r.URL.Path)))
}

func (s *Server) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	stateFrom(r.Context()).route = routeUnmatched
	writeProblemRaw(w, newProblem("method_not_allowed", fmt.Sprintf("%s is not allowed on %s; see the Allow header.", r.Method, r.URL.Path)))
}

func (s *Server) panicked(w http.ResponseWriter, r *http.Request, v any) {
	if v == http.ErrAbortHandler {
		panic(v) // a handler cutting its answer short on purpose (a damaged download)
	}
	st := stateFrom(r.Context())
	s.opts.Logger.Error("panic serving request", slog.String("request_id", st.id), slog.Any("panic", v),
		slog.String("stack", string(debug.Stack())))
	writeProblemRaw(w, newProblem(app.EINTERNAL, "Internal error; request id "+st.id+"."))
}

// now is the server's clock.
func (s *Server) now() time.Time { return s.opts.Now() }
