// Package graphtest is a fake Microsoft Graph and Microsoft identity
// platform on 127.0.0.1, for tests and benchmarks: the only stand-in for
// the real service, so it is never looser than the service. Every behaviour
// cites the Graph documentation it follows (paths are those of
// microsoftgraph/microsoft-graph-docs-contrib unless a URL is given).
//
// One Server serves one tenant on one listener: the identity platform
// (/{tenant}/oauth2/v2.0/token), Graph (/v1.0 and /beta, served alike), the
// pre-authenticated download host (/download/…) and the upload hosts
// (/upload/…). Every URL it hands out is absolute and points back at it.
package graphtest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Options tune a fake.
type Options struct {
	// Latency is added to every HTTP request (benchmarks use 50 ms).
	Latency time.Duration
	// MailboxConcurrency is the most requests in flight per mailbox
	// before 429 ApplicationThrottled (Graph: 4). Default 4.
	MailboxConcurrency int
	// MailboxRequestsPer10Min is Outlook's per-app-per-mailbox window
	// (Graph: 10,000). Default 10,000.
	MailboxRequestsPer10Min int
	// TokenLifetime is expires_in of issued tokens (default 3599 s).
	TokenLifetime time.Duration
	// DownloadURLLifetime is how long a download URL works (default 1 h).
	DownloadURLLifetime time.Duration
	// SharePointRUPerMinute is the tenant's SharePoint/OneDrive resource
	// unit budget per minute (SharePoint throttling docs: 1,200 for a
	// tenant of up to 1,000 licences, the default).
	SharePointRUPerMinute int
}

func (o *Options) defaults() {
	if o.MailboxConcurrency <= 0 {
		o.MailboxConcurrency = 4
	}
	if o.MailboxRequestsPer10Min <= 0 {
		o.MailboxRequestsPer10Min = 10000
	}
	if o.TokenLifetime <= 0 {
		o.TokenLifetime = 3599 * time.Second
	}
	if o.DownloadURLLifetime <= 0 {
		o.DownloadURLLifetime = time.Hour
	}
	if o.SharePointRUPerMinute <= 0 {
		o.SharePointRUPerMinute = 1200
	}
}

// Server is a running fake with one Microsoft 365 tenant.
type Server struct {
	hs   *httptest.Server
	opt  Options
	base string // http://127.0.0.1:port

	mu       sync.Mutex
	tenant   Tenant
	roles    map[string]bool // nil: every permission
	tokens   map[string]*accessToken
	skus     []*sku
	users    map[string]*user
	userList []*user // directory order
	drives   map[string]*drive
	opaque   map[string]any // skip, delta, download and upload tokens
	mboxes   map[string]*mailboxLimits
	sp       sharePointBudget
	stats    Stats
}

// Tenant identifies the fake's tenant and its app registration.
type Tenant struct {
	AzureTenantID string
	ClientID      string
	ClientSecret  string
	// Roles are the application permissions consented (e.g.
	// "User.Read.All"); nil means every one Backstop needs.
	Roles []string
	// SecretExpired makes the token endpoint answer AADSTS7000222.
	SecretExpired bool
}

// New starts a fake serving tenant t on 127.0.0.1; Close stops it.
func New(t Tenant, opt Options) *Server {
	opt.defaults()
	s := &Server{
		opt:    opt,
		tenant: t,
		tokens: map[string]*accessToken{},
		users:  map[string]*user{},
		drives: map[string]*drive{},
		opaque: map[string]any{},
		mboxes: map[string]*mailboxLimits{},
	}
	s.setRolesLocked(t.Roles)
	// Set s.base before it serves: handlers read it, and a request from
	// another process carries no happens-before edge to this write.
	s.hs = httptest.NewUnstartedServer(http.HandlerFunc(s.serveHTTP))
	s.base = "http://" + s.hs.Listener.Addr().String()
	s.hs.Start()
	return s
}

// Close stops the server.
func (s *Server) Close() { s.hs.Close() }

// GraphURL is the Graph base to configure, ".../v1.0".
func (s *Server) GraphURL() string { return s.base + "/v1.0" }

// LoginURL is the identity platform base to configure.
func (s *Server) LoginURL() string { return s.base }

// Stats are the fake's counters.
type Stats struct {
	Requests int64
	// Violations counts requests that arrived while the mailbox already
	// had MailboxConcurrency in flight, or before a Retry-After the fake
	// sent for that mailbox had passed. A correct client makes none.
	Violations int64
	Throttled  int64 // 429/503 answers sent
	// MaxInFlight is the most requests in flight on one mailbox seen.
	MaxInFlight int64
}

// Stats returns the counters so far. Requests counts every HTTP request
// and every request inside a $batch.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// call is one Graph request, from the wire or from inside a $batch.
type call struct {
	method  string
	path    string // below the version root, e.g. /users/x/messages
	query   url.Values
	header  http.Header
	body    []byte
	version string // v1.0 or beta
	reqID   string
	token   *accessToken
	inBatch bool
}

// answer is what a handler produces; serveHTTP or $batch writes it out.
type answer struct {
	status int
	header http.Header
	body   []byte
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func randToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func jsonAnswer(status int, v any) answer {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json; odata.metadata=minimal; odata.streaming=true; IEEE754Compatible=false; charset=utf-8")
	return answer{status: status, header: h, body: b}
}

// errAnswer follows concepts/errors.md: {"error":{"code","message",
// "innerError":{"date","request-id","client-request-id"}}}.
func (c *call) errAnswer(status int, code, message string) answer {
	return jsonAnswer(status, map[string]any{"error": map[string]any{
		"code":    code,
		"message": message,
		"innerError": map[string]any{
			"date":              time.Now().UTC().Format("2006-01-02T15:04:05"),
			"request-id":        c.reqID,
			"client-request-id": c.reqID,
		},
	}})
}

// errInner is an error whose innerError carries its own code, as the
// OneDrive API nests them (concepts/errors.md "innererror").
func (c *call) errInner(status int, code, inner, message string) answer {
	return jsonAnswer(status, map[string]any{"error": map[string]any{
		"code":    code,
		"message": message,
		"innerError": map[string]any{
			"code":              inner,
			"date":              time.Now().UTC().Format("2006-01-02T15:04:05"),
			"request-id":        c.reqID,
			"client-request-id": c.reqID,
		},
	}})
}

func withHeader(a answer, k, v string) answer {
	if a.header == nil {
		a.header = http.Header{}
	}
	a.header.Set(k, v)
	return a
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	reqID := newID()
	// concepts/errors.md: every response carries request-id (and echoes
	// client-request-id).
	w.Header().Set("request-id", reqID)
	if crid := r.Header.Get("client-request-id"); crid != "" {
		w.Header().Set("client-request-id", crid)
	} else {
		w.Header().Set("client-request-id", reqID)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p := r.URL.Path
	var a answer
	switch {
	case strings.HasSuffix(p, "/oauth2/v2.0/token"):
		s.countRequest()
		a = s.serveToken(r, body, reqID)
	case strings.HasPrefix(p, "/v1.0/"), strings.HasPrefix(p, "/beta/"):
		version, rest, _ := strings.Cut(p[1:], "/")
		c := &call{method: r.Method, path: "/" + rest, query: r.URL.Query(), header: r.Header,
			body: body, version: version, reqID: reqID}
		a = s.serveGraph(c)
	case strings.HasPrefix(p, "/download/"):
		a = s.serveDownload(r, strings.TrimPrefix(p, "/download/"), reqID)
	case strings.HasPrefix(p, "/upload/drive/"):
		a = s.serveDriveUpload(r, strings.TrimPrefix(p, "/upload/drive/"), body, reqID)
	case strings.HasPrefix(p, "/upload/attachment/"):
		a = s.serveAttachmentUpload(r, strings.TrimPrefix(p, "/upload/attachment/"), body, reqID)
	default:
		s.countRequest()
		c := &call{reqID: reqID}
		a = c.errAnswer(http.StatusNotFound, "BadRequest", "Resource not found for the segment '"+p+"'.")
	}
	for k, vs := range a.header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if a.status == 0 {
		a.status = http.StatusOK
	}
	w.WriteHeader(a.status)
	if r.Method != http.MethodHead && len(a.body) > 0 {
		_, _ = io.Copy(w, bytes.NewReader(a.body))
	}
}

func (s *Server) countRequest() {
	s.mu.Lock()
	s.stats.Requests++
	s.mu.Unlock()
}

// sleep adds the configured latency; callers hold their throttling slot
// while sleeping so concurrency is measurable.
func (s *Server) sleep() {
	if s.opt.Latency > 0 {
		time.Sleep(s.opt.Latency)
	}
}

// serveGraph authenticates, routes, throttles and answers one Graph call.
func (s *Server) serveGraph(c *call) answer {
	s.countRequest()
	if a, ok := s.authenticate(c); !ok {
		if !c.inBatch {
			s.sleep()
		}
		return a
	}
	rt := s.route(c)
	if rt.h == nil {
		if !c.inBatch {
			s.sleep()
		}
		return rt.notFound(c)
	}
	if rt.role != "" && !c.token.has(rt.role) {
		if !c.inBatch {
			s.sleep()
		}
		return rt.denied(c)
	}
	release, a, ok := s.admit(c, rt)
	if !ok {
		if !c.inBatch {
			s.sleep()
		}
		return a
	}
	defer release()
	if !c.inBatch {
		s.sleep()
	}
	return rt.h(c)
}

// absolute makes a URL below the version root of c absolute.
func (s *Server) absolute(c *call, pathAndQuery string) string {
	v := c.version
	if v == "" {
		v = "v1.0"
	}
	return s.base + "/" + v + pathAndQuery
}

// putOpaque stores v under a fresh opaque token.
func (s *Server) putOpaqueLocked(v any) string {
	t := randToken(12)
	s.opaque[t] = v
	return t
}

func fmtTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }

func errorf(format string, a ...any) string { return fmt.Sprintf(format, a...) }
