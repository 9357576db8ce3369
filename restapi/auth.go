package restapi

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"backstop/app"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humahttprouter"
)

// access says who may call an operation.
type access int

const (
	accessPublic  access = iota // no credentials (probes, sign-in, OpenAPI)
	accessKey                   // API key with the operation's scope, or a web session
	accessSession               // web session only; API keys get 401
)

// routeInfo is attached to each huma operation as metadata.
type routeInfo struct {
	access access
	scope  app.Scope
}

const metaKey = "backstop"

// principal is who is calling and for which tenant.
type principal struct {
	key  *app.APIKey
	user *app.User
	sess *app.Session
	// tenantID is the tenant acted for; "" means every tenant the provider
	// manages (provider keys and provider administrators without a header).
	tenantID string
	provider bool
}

func (p *principal) actor() (typ, id, name string) {
	if p.key != nil {
		return app.ActorKey, p.key.ID, p.key.Name
	}
	return app.ActorUser, p.user.ID, p.user.Email
}

func (p *principal) hasScope(s app.Scope) bool {
	return p.user != nil || p.key.HasScope(s) // administrators hold every scope
}

// principalFrom returns the authenticated caller of a handler.
func principalFrom(ctx context.Context) *principal { return stateFrom(ctx).principal }

var errUnauthorized = func() *Problem {
	return newProblem(app.EUNAUTHORIZED, "A valid API key is required: Authorization: Bearer <key>.").
		withHeader("WWW-Authenticate", `Bearer error="invalid_token"`)
}

// authorize is the huma middleware that authenticates, rate limits, checks
// the scope, selects the tenant and checks CSRF, in that order.
func (s *Server) authorize(ctx huma.Context, next func(huma.Context)) {
	op := ctx.Operation()
	info, _ := op.Metadata[metaKey].(routeInfo)
	r, w, _ := humahttprouter.Unwrap(ctx)
	st := stateFrom(r.Context())
	st.route = op.Path
	if info.access == accessPublic {
		next(ctx)
		return
	}
	p, prob := s.authenticate(r, info)
	if prob != nil {
		writeProblemRaw(w, prob)
		return
	}
	st.principal, st.action = p, op.OperationID

	if p.key != nil {
		ok, remaining, reset := s.limiter.allow(p.key.ID, s.now())
		w.Header().Set("RateLimit-Policy", fmt.Sprintf(`"default";q=%d;w=%d`, s.opts.RateLimit, int(s.opts.RateWindow.Seconds())))
		w.Header().Set("RateLimit", fmt.Sprintf(`"default";r=%d;t=%d`, remaining, reset))
		if !ok {
			writeProblemRaw(w, newProblem(app.ERATELIMITED,
				fmt.Sprintf("This key made %d requests in the last %s; retry in %d s.", s.opts.RateLimit, s.opts.RateWindow, reset)).
				withHeader("Retry-After", strconv.Itoa(reset)))
			return
		}
		if err := s.Keys.TouchKey(r.Context(), p.key.ID, s.now()); err != nil {
			s.opts.Logger.Warn("recording key use failed", slog.String("key_id", p.key.ID), slog.Any("error", err))
		}
	}
	if info.scope != "" && !p.hasScope(info.scope) {
		pr := newProblem(app.EFORBIDDEN, fmt.Sprintf("This key lacks the scope %s.", info.scope))
		pr.RequiredScope = string(info.scope)
		writeProblemRaw(w, pr.withHeader("WWW-Authenticate", fmt.Sprintf(`Bearer error="insufficient_scope", scope="%s"`, info.scope)))
		return
	}
	if prob := s.selectTenant(r, p, info); prob != nil {
		writeProblemRaw(w, prob)
		return
	}
	if p.sess != nil && !safeMethod(r.Method) {
		sent := r.Header.Get("X-CSRF-Token")
		if subtle.ConstantTimeCompare([]byte(sent), []byte(p.sess.CSRFToken)) != 1 {
			writeProblemRaw(w, newProblem("csrf_failed", "The X-CSRF-Token header is missing or does not match this session."))
			return
		}
	}
	next(ctx)
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// authenticate accepts a bearer API key on key routes, and a session cookie
// on key and session routes. Every failure is the same 401.
func (s *Server) authenticate(r *http.Request, info routeInfo) (*principal, *Problem) {
	if auth := r.Header.Get("Authorization"); auth != "" {
		if info.access == accessSession {
			return nil, newProblem(app.EUNAUTHORIZED, "This operation is for the web interface; API keys cannot call it.")
		}
		scheme, value, _ := strings.Cut(auth, " ")
		if !strings.EqualFold(scheme, "Bearer") {
			return nil, errUnauthorized()
		}
		k, err := s.keyFor(r.Context(), strings.TrimSpace(value))
		if err != nil {
			return nil, errUnauthorized()
		}
		return &principal{key: k, tenantID: k.TenantID, provider: k.Provider}, nil
	}
	if c, err := r.Cookie(sessionCookie); err == nil && c.Value != "" {
		if p, err := s.sessionPrincipal(r.Context(), c.Value); err == nil {
			return p, nil
		}
		return nil, newProblem(app.EUNAUTHORIZED, "Your session has ended; sign in again.")
	}
	return nil, errUnauthorized()
}

// keyFor looks up a presented key value: form and checksum first (no
// lookup for garbage), then the stored fingerprint in constant time, then
// revocation, expiry and edition.
func (s *Server) keyFor(ctx context.Context, value string) (*app.APIKey, error) {
	id, ok := app.ParseKeyValue(value)
	if !ok {
		return nil, errors.New("malformed key")
	}
	k, err := s.Keys.Key(ctx, id)
	if err != nil {
		return nil, err
	}
	if subtle.ConstantTimeCompare([]byte(app.Fingerprint(value)), []byte(k.Fingerprint)) != 1 {
		return nil, errors.New("wrong secret")
	}
	if !k.Usable(s.now()) {
		return nil, errors.New("revoked or expired")
	}
	if k.Provider && s.opts.Edition != app.EditionProvider {
		return nil, errors.New("provider key outside the provider edition")
	}
	return k, nil
}

// selectTenant applies X-Service-Tenant: provider callers may name one
// tenant (unknown: 404) and must name one to write; a tenant caller may only
// name its own.
func (s *Server) selectTenant(r *http.Request, p *principal, info routeInfo) *Problem {
	header := strings.TrimSpace(r.Header.Get("X-Service-Tenant"))
	if !p.provider {
		if header != "" && header != p.tenantID {
			return newProblem(app.ENOTFOUND, "Tenant not found.")
		}
		return nil
	}
	if header == "" {
		if info.access == accessKey && !safeMethod(r.Method) {
			return newProblem(app.ETENANTREQUIRED, "A provider key must name the tenant in X-Service-Tenant to make changes.")
		}
		return nil
	}
	if _, err := s.Tenants.Tenant(r.Context(), header); err != nil {
		return newProblem(app.ENOTFOUND, "Tenant not found.")
	}
	p.tenantID = header
	return nil
}

// get registers a GET operation under a key scope.
func get[I, O any](s *Server, id, path string, scope app.Scope, summary string, h func(context.Context, *I) (*O, error)) {
	op(s, http.MethodGet, id, path, accessKey, scope, summary, h)
}

// op registers one operation with huma, with its access rule, scope,
// documented errors, and app error conversion.
func op[I, O any](s *Server, method, id, path string, acc access, scope app.Scope, summary string, h func(context.Context, *I) (*O, error)) {
	o := huma.Operation{
		OperationID: id, Method: method, Path: path, Summary: summary,
		Metadata: map[string]any{metaKey: routeInfo{access: acc, scope: scope}},
		Tags:     []string{strings.SplitN(id, ".", 2)[0]},
	}
	switch acc {
	case accessPublic:
		// Explicitly none, rather than absent: to a reader and to linters an
		// absent security list means "not stated".
		o.Security = []map[string][]string{}
	case accessKey:
		o.Security = []map[string][]string{{"bearer": {string(scope)}}, {"session": {}}}
		o.Errors = []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusTooManyRequests}
		o.Description = fmt.Sprintf("Scope: `%s`.", scope)
	case accessSession:
		o.Security = []map[string][]string{{"session": {}}}
		o.Errors = []int{http.StatusUnauthorized, http.StatusForbidden}
		o.Description = "Web interface only (session cookie and X-CSRF-Token); API keys get 401."
	}
	if method != http.MethodGet && method != http.MethodDelete {
		o.Errors = append(o.Errors, http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity)
	}
	if strings.Contains(path, "{") {
		o.Errors = append(o.Errors, http.StatusNotFound)
	}
	// huma answers 200 unless told otherwise: a POST that creates a resource
	// answers 201; signing in creates nothing the caller can address.
	if method == http.MethodPost {
		o.DefaultStatus = http.StatusOK
		if strings.HasSuffix(id, ".create") && id != "session.create" {
			o.DefaultStatus = http.StatusCreated
		}
	}
	huma.Register(s.api, o, func(ctx context.Context, in *I) (*O, error) {
		out, err := h(ctx, in)
		if err != nil {
			return nil, s.apiError(ctx, err)
		}
		return out, nil
	})
}

// apiError converts a handler error to a problem; internal errors are logged
// and answered without detail beyond the request id.
func (s *Server) apiError(ctx context.Context, err error) error {
	var se huma.StatusError
	if errors.As(err, &se) {
		return err
	}
	var ae *app.Error
	if errors.As(err, &ae) && ae.Code != app.EINTERNAL {
		return fieldProblem(ae)
	}
	st := stateFrom(ctx)
	s.opts.Logger.Error("request failed", slog.String("request_id", st.id), slog.String("action", st.action), slog.Any("error", err))
	return newProblem(app.EINTERNAL, "Internal error; request id "+st.id+".")
}
