// Package restapi serves the integration API under /api/v1, the operational
// probes, and (through an injected handler) the web interface.
//
// Every /api/v1 operation is declared with huma v2, so the OpenAPI 3.1
// description at /api/v1/openapi.json is generated from the same Go types
// that validate requests. Around huma sits plain net/http middleware for what
// every request needs: a request id, panic recovery, security headers, and
// the audit hook, which writes the audit row when the status is known and
// before the first byte of the answer leaves.
//
// Request pipeline for an operation:
//
//	request id -> route -> authenticate (401) -> rate limit (429)
//	  -> scope (403) -> tenant selection (404/400) -> CSRF (403)
//	  -> huma: parse and validate (400/413/422) -> handler
//	  -> audit row committed -> answer
//
// Scope is checked before any lookup and before the body is read, so a key
// without the scope learns nothing about ids or schemas.
package restapi

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"reflect"
	"sync"
	"time"

	"backstop/app"
	"backstop/app/archive"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humahttprouter"
	"github.com/julienschmidt/httprouter"
)

// Services are the app services the API is a front for.
type Services struct {
	Tenants    app.TenantService
	Keys       app.KeyService
	Users      app.UserService
	Audit      app.AuditService
	Endpoints  app.EndpointService
	Enrollment app.EnrollmentService
	Settings   app.SettingsService
	Versions   app.VersionCheckService
	Jobs       app.JobCounter
	Webhooks   app.WebhookService
	// Ping checks the database for /readyz.
	Ping func(ctx context.Context) error

	// JobStore, JobRunner and JobFeed serve /jobs, starting work and the
	// job progress stream.
	JobStore  app.JobService
	JobRunner app.JobSubmitter
	JobFeed   app.JobFeed
	// Events serves the event feed (GET /events) from the outbox; nil
	// answers 501 not_implemented.
	Events app.EventService

	// VerifyReports serves GET /verify/latest and the status's verify
	// summary; nil answers as if no verify ever ran.
	VerifyReports app.VerifyReportService

	// Retention serves the retention policies (session only); nil answers
	// 501 not_implemented.
	Retention app.RetentionService
	// Maintenance holds the updater's announced or running update
	// (POST, DELETE /maintenance and version.maintenance); nil: the routes
	// answer 501 and version.maintenance is null.
	Maintenance app.MaintenanceService
	// Storage serves /storage, /storage-targets, the status's storage
	// object and the storage check of /readyz; nil answers as if there
	// were no target (and /readyz checks only the data directory).
	Storage app.StorageTargetService
	// ApplianceKey reads the appliance key file (the blob store owns it);
	// ApplianceKeys records its one download. Either nil: the download
	// answers 503.
	ApplianceKey  func() ([]byte, error)
	ApplianceKeys app.ApplianceKeyDownloads

	// Sources, Protected, Snapshots and Directory serve /sources,
	// /protected-objects (with snapshots and items) and /directory; nil
	// answers 501 (lists of snapshots: empty). ProtectionChanged, if set,
	// is called after PUT /directory/{id}/protection (backup schedules
	// follow protection).
	Sources   app.SourceService
	Protected app.ProtectedObjectService
	Snapshots app.SnapshotBrowser
	Directory app.DirectoryService
	// Protection, if set, serves PUT /directory/{id}/protection (creating
	// the objects of Microsoft 365 entries); nil: Directory flips existing
	// objects only.
	Protection        app.DirectoryProtector
	ProtectionChanged func()

	// Archive serves /archive (CONTRACT §14) and the status's archive
	// object; nil answers 501 (the status: an empty archive).
	Archive *archive.Service
}

// Options are the server's settings, fixed at start-up.
type Options struct {
	Edition        string
	Version        string
	PublicURL      string
	DataDir        string
	RateLimit      int
	RateWindow     time.Duration
	TrustedProxies []netip.Prefix
	SecureCookies  bool
	SessionTTL     time.Duration
	Rules          app.EndpointRules
	Logger         *slog.Logger
	Now            app.Clock
	// SSEKeepAlive is the interval of keep-alive comments on event
	// streams (default 15 s).
	SSEKeepAlive time.Duration
	// UI serves everything outside /api/, /healthz, /readyz and /metrics;
	// nil answers 404.
	UI http.Handler
	// SetupToken, when set, lets the first administrator be created through
	// POST /api/v1/setup. It is printed by serve while no administrator exists.
	SetupToken string
	// NotReady makes /readyz answer not ready whatever the checks say. Only
	// builds for the updater's rollback test set it (see main.go).
	NotReady bool

	// Metrics answers GET /metrics (metrics.go) to a caller presenting
	// MetricsToken as a Bearer token or connecting from a MetricsAllow
	// prefix. Nil, or neither set: /metrics answers 404.
	Metrics      http.Handler
	MetricsToken string
	MetricsAllow []netip.Prefix
	// ObserveRequest, if set, is told of every answered request: the route
	// pattern it matched (never the raw path), its method, the status sent
	// and how long it took. It must not block.
	ObserveRequest func(route, method string, status int, d time.Duration)
}

// Server is the HTTP front of the appliance.
type Server struct {
	Services
	opts    Options
	router  *httprouter.Router
	api     huma.API
	limiter *rateLimiter
	logins  *loginLimiter
	handler http.Handler

	streamsOnce      sync.Once
	streamsCloseOnce sync.Once
	streamsDone      chan struct{} // closed by CloseStreams
}

// New builds the server and registers every route.
func New(svc Services, opts Options) *Server {
	if opts.Now == nil {
		opts.Now = app.SystemClock
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.RateLimit == 0 {
		opts.RateLimit, opts.RateWindow = 600, 10*time.Minute
	}
	if opts.SessionTTL == 0 {
		opts.SessionTTL = 12 * time.Hour
	}
	if opts.Version == "" {
		opts.Version = app.Version
	}
	s := &Server{
		Services: svc,
		opts:     opts,
		router:   httprouter.New(),
		limiter:  newRateLimiter(opts.RateLimit, opts.RateWindow),
		logins:   newLoginLimiter(),
	}
	s.router.RedirectTrailingSlash = false
	s.router.RedirectFixedPath = false
	s.router.HandleMethodNotAllowed = true
	s.router.NotFound = http.HandlerFunc(s.notFound)
	s.router.MethodNotAllowed = http.HandlerFunc(s.methodNotAllowed)
	s.router.PanicHandler = s.panicked

	huma.NewError = humaError
	config := huma.DefaultConfig("Backstop API", opts.Version)
	config.OpenAPIPath = "/api/v1/openapi"
	config.DocsPath = ""    // the web interface renders the reference itself, offline
	config.SchemasPath = "" // no $schema links in bodies
	config.CreateHooks = nil
	config.Formats = jsonFormats() // self-writing bodies (fastjson.go), encoding/json otherwise
	config.Info.Description = apiDescription
	config.Info.License = &huma.License{Name: "Proprietary", Identifier: "LicenseRef-Backstop-Proprietary"}
	// Relative: every appliance serves the API at its own address, so the
	// description names no host; clients resolve "/" against the URL they
	// fetched it from (or take the appliance's address as their base URL).
	config.Servers = []*huma.Server{{URL: "/", Description: "This appliance: the origin that serves this document."}}
	// app.Time is a string in RFC 3339 form on the wire.
	config.Components.Schemas.RegisterTypeAlias(reflect.TypeFor[app.Time](), reflect.TypeFor[time.Time]())
	config.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		"bearer": {Type: "http", Scheme: "bearer", Description: "API key: `Authorization: Bearer bsk_…`."},
		"session": {Type: "apiKey", In: "cookie", Name: sessionCookie,
			Description: "Web-interface session; unsafe methods also need the X-CSRF-Token header."},
	}
	s.api = humahttprouter.New(s.router, config)
	s.api.UseMiddleware(s.authorize)
	s.routes()
	s.handler = s.withRequestState(s.router)
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// ReleaseMemory compacts the rate limiters (the idle trimmer of serve calls
// it): what they keep of the requests of the past window, exactly, and no
// more.
func (s *Server) ReleaseMemory() {
	now := s.now()
	s.limiter.compact(now)
	s.logins.byIP.compact(now)
	s.logins.byAccount.compact(now)
}

// OpenAPI returns the generated description (for tests and tools).
func (s *Server) OpenAPI() *huma.OpenAPI { return s.api.OpenAPI() }

// routes registers every route; it reads as the API's table of contents.
func (s *Server) routes() {
	// Probes and metrics: unversioned, never audited, outside the API
	// keys' rate limit.
	s.plain("/healthz", s.healthz)
	s.plain("/readyz", s.readyz)
	s.plain("/metrics", s.metrics) // metrics.go: off unless a token or allow-list is set

	// Status and endpoints (status:read).
	get(s, "status.get", "/api/v1/status", app.ScopeStatusRead, "Summary of the tenant's protection", s.getStatus)
	get(s, "version.get", "/api/v1/version", app.ScopeStatusRead, "Running version and update hint", s.getVersion)
	get(s, "endpoints.list", "/api/v1/endpoints", app.ScopeStatusRead, "Servers and clients backed up by the agent (not paged)", s.listEndpoints)
	get(s, "endpoints.get", "/api/v1/endpoints/{id}", app.ScopeStatusRead, "One server or client", s.getEndpoint)
	s.verifyRoutes() // GET /api/v1/verify/latest

	// Storage (status:read), storage targets and the appliance key (web
	// session, provider administrators).
	s.storageRoutes()

	// Protected objects, snapshots and items (items:read; a download
	// restore:write) and the directory (users:read, users:write).
	s.protectedRoutes()
	s.directoryRoutes()

	// Webhooks (webhooks:manage): CRUD, rotate-secret, test, deliveries, replay.
	s.webhookRoutes()

	// Jobs (jobs:read), starting work (restore:write, verify:write), failure codes.
	s.jobRoutes()
	s.eventRoutes() // GET /api/v1/events (jobs:read)

	// The email archive: status, channels, chain and proofs (archive:read;
	// channels are created and deleted in a web session).
	s.archiveRoutes()

	// Web session and first-run setup.
	op(s, http.MethodPost, "session.create", "/api/v1/session", accessPublic, "", "Sign in (web interface)", s.createSession)
	op(s, http.MethodGet, "session.get", "/api/v1/session", accessSession, "", "The signed-in administrator", s.getSession)
	op(s, http.MethodDelete, "session.delete", "/api/v1/session", accessSession, "", "Sign out", s.deleteSession)
	op(s, http.MethodGet, "setup.get", "/api/v1/setup", accessPublic, "", "Whether first-run setup is open", s.getSetup)
	op(s, http.MethodPost, "setup.create", "/api/v1/setup", accessPublic, "", "Create the first administrator with the one-time setup token", s.createSetup)

	// Management (web session only; API keys get 401).
	op(s, http.MethodGet, "tenants.list", "/api/v1/tenants", accessSession, "", "List tenants", s.listTenants)
	op(s, http.MethodPost, "tenants.create", "/api/v1/tenants", accessSession, "", "Create a tenant (provider administrators)", s.createTenant)
	op(s, http.MethodGet, "apiKeys.list", "/api/v1/api-keys", accessSession, "", "List API keys", s.listKeys)
	op(s, http.MethodPost, "apiKeys.create", "/api/v1/api-keys", accessSession, "", "Create an API key; the value is shown once", s.createKey)
	op(s, http.MethodDelete, "apiKeys.revoke", "/api/v1/api-keys/{id}", accessSession, "", "Revoke an API key (irreversible; it stays listed)", s.revokeKey)
	op(s, http.MethodPost, "endpoints.create", "/api/v1/endpoints", accessSession, "", "Pre-create an endpoint with its one-time enrollment token", s.createEndpoint)
	op(s, http.MethodPatch, "endpoints.update", "/api/v1/endpoints/{id}", accessSession, "", "Rename an endpoint or change its schedule, paths or excludes", s.updateEndpoint)
	op(s, http.MethodPost, "endpoints.revoke", "/api/v1/endpoints/{id}/revoke", accessSession, "", "Revoke an endpoint (irreversible; it stays listed, its data stays)", s.revokeEndpoint)
	op(s, http.MethodPost, "enrollmentTokens.create", "/api/v1/enrollment-tokens", accessSession, "", "Create a one-time agent enrollment token", s.createEnrollmentToken)
	op(s, http.MethodGet, "settings.get", "/api/v1/settings", accessSession, "", "Read settings", s.getSettings)
	op(s, http.MethodPatch, "settings.update", "/api/v1/settings", accessSession, "", "Change settings", s.updateSettings)
	s.maintenanceRoutes() // POST, DELETE /maintenance (provider administrators)
	op(s, http.MethodGet, "audit.list", "/api/v1/audit", accessSession, "", "The audit log, newest first", s.listAudit)
	s.sourceRoutes()        // GET, POST /sources; PATCH, DELETE /sources/{id}
	s.retentionRoutes()     // GET, PUT /retention; GET, PUT /endpoints/{id}/retention; POST /retention/run
	s.archivePolicyRoutes() // /archive/retention, /archive/holds, /archive/messages, /archive/exports, /archive/evidence
}

const apiDescription = `The Backstop integration API for RMM, PSA and ticketing tools.

Authenticate with an API key: ` + "`Authorization: Bearer bsk_…`" + `. Each operation names the one scope it needs;
scopes do not imply each other. Provider keys (Service Provider edition) read across every managed tenant, or one
tenant named in ` + "`X-Service-Tenant`" + `; writes need that header.

Errors are RFC 9457 problem+json with a stable ` + "`code`" + `. Every key may make 600 requests per rolling 10 minutes;
each answer carries RateLimit-Policy and RateLimit headers, and a 429 carries Retry-After.

Timestamps are RFC 3339 UTC with milliseconds; an unknown time is null.`
