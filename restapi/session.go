package restapi

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strconv"

	"backstop/app"

	"github.com/danielgtaylor/huma/v2"
)

const sessionCookie = "backstop_session"

// sessionPrincipal resolves a session cookie value to its administrator.
func (s *Server) sessionPrincipal(ctx context.Context, value string) (*principal, error) {
	sess, err := s.Users.SessionByIDHash(ctx, app.Fingerprint(value))
	if err != nil {
		return nil, err
	}
	if !s.now().Before(sess.ExpiresAt) {
		return nil, app.Errorf(app.EUNAUTHORIZED, "session expired")
	}
	u, err := s.Users.User(ctx, sess.UserID)
	if err != nil {
		return nil, err
	}
	return &principal{user: u, sess: sess, tenantID: u.TenantID, provider: u.IsProvider()}, nil
}

// SessionUser is the signed-in administrator as the web interface sees it.
type SessionUser struct {
	ID       string   `json:"id"`
	Email    string   `json:"email"`
	TenantID string   `json:"tenantId,omitempty" doc:"Empty for provider administrators, who manage every tenant."`
	Provider bool     `json:"provider"`
	Edition  string   `json:"edition" enum:"standard,provider"`
	Version  string   `json:"version"`
	Scopes   []string `json:"scopes" doc:"The scopes an API key can carry, for the key form."`
}

type sessionBody struct {
	User      SessionUser `json:"user"`
	CSRFToken string      `json:"csrfToken" doc:"Send as X-CSRF-Token with every unsafe request."`
}

type sessionOutput struct {
	SetCookie http.Cookie `header:"Set-Cookie"`
	Body      sessionBody
}

type signInInput struct {
	Body struct {
		Email    string `json:"email" maxLength:"254"`
		Password string `json:"password" maxLength:"1024"`
	}
}

func (s *Server) userView(u *app.User) SessionUser {
	scopes := make([]string, len(app.AllScopes))
	for i, sc := range app.AllScopes {
		scopes[i] = string(sc)
	}
	return SessionUser{ID: u.ID, Email: u.Email, TenantID: u.TenantID, Provider: u.IsProvider(), Edition: s.opts.Edition,
		Version: s.opts.Version, Scopes: scopes}
}

// createSession signs an administrator in. Failures are one message whether
// the account exists or not, take the same time, are limited per IP and per
// account, and are audited.
func (s *Server) createSession(ctx context.Context, in *signInInput) (*sessionOutput, error) {
	st := stateFrom(ctx)
	email, _ := app.NormalizeEmail(in.Body.Email)
	if email == "" {
		email = in.Body.Email
	}
	now := s.now()
	if blocked, wait := s.logins.blocked(st.ip, email, now); blocked {
		return nil, newProblem(app.ERATELIMITED, fmt.Sprintf("Too many failed sign-ins; try again in %d s.", wait)).
			withHeader("Retry-After", strconv.Itoa(wait))
	}
	u, err := s.Users.UserByEmail(ctx, email)
	hash := app.DummyPasswordHash()
	if err == nil {
		hash = u.PasswordHash
	} else if app.ErrorCode(err) != app.ENOTFOUND {
		return nil, err
	}
	if !app.CheckPassword(hash, in.Body.Password) || u == nil {
		s.logins.failed(st.ip, email, now)
		s.auditSystem(ctx, app.ActorUser, "", email, "", "session.create", http.StatusUnauthorized)
		return nil, newProblem(app.EUNAUTHORIZED, "The e-mail address or password is not correct.")
	}
	return s.startSession(ctx, u)
}

func (s *Server) startSession(ctx context.Context, u *app.User) (*sessionOutput, error) {
	value := app.RandomToken(43)
	now := s.now()
	sess := &app.Session{IDHash: app.Fingerprint(value), UserID: u.ID, CSRFToken: app.RandomToken(32), CreatedAt: now,
		ExpiresAt: now.Add(s.opts.SessionTTL)}
	if err := s.Users.CreateSession(ctx, sess); err != nil {
		return nil, err
	}
	s.auditSystem(ctx, app.ActorUser, u.ID, u.Email, u.TenantID, "session.create", http.StatusOK)
	return &sessionOutput{
		SetCookie: http.Cookie{Name: sessionCookie, Value: value, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode,
			Secure: s.opts.SecureCookies, Expires: sess.ExpiresAt, MaxAge: int(s.opts.SessionTTL.Seconds())},
		Body: sessionBody{User: s.userView(u), CSRFToken: sess.CSRFToken},
	}, nil
}

// auditSystem writes an audit row for a public operation (sign-in, setup)
// whose actor is known only from what was sent.
func (s *Server) auditSystem(ctx context.Context, typ, id, name, tenant, action string, status int) {
	st := stateFrom(ctx)
	e := &app.AuditEntry{At: app.At(s.now()), ActorType: typ, ActorID: id, ActorName: truncate(name, 254), TenantID: tenant,
		Action: action, Target: "/api/v1/session", Status: status, IP: st.ip, RequestID: st.id}
	if err := s.Audit.WriteAudit(context.WithoutCancel(ctx), e); err != nil {
		s.opts.Logger.Error("audit write failed", "error", err)
	}
}

type sessionGetOutput struct{ Body sessionBody }

func (s *Server) getSession(ctx context.Context, _ *struct{}) (*sessionGetOutput, error) {
	p := principalFrom(ctx)
	return &sessionGetOutput{Body: sessionBody{User: s.userView(p.user), CSRFToken: p.sess.CSRFToken}}, nil
}

type signOutOutput struct {
	SetCookie http.Cookie `header:"Set-Cookie"`
}

func (s *Server) deleteSession(ctx context.Context, _ *struct{}) (*signOutOutput, error) {
	p := principalFrom(ctx)
	if err := s.Users.DeleteSession(ctx, p.sess.IDHash); err != nil {
		return nil, err
	}
	return &signOutOutput{SetCookie: http.Cookie{Name: sessionCookie, Value: "", Path: "/", HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: s.opts.SecureCookies, MaxAge: -1}}, nil
}

type setupStateOutput struct {
	Body struct {
		Open bool `json:"open" doc:"True while no administrator exists and setup can be completed."`
	}
}

func (s *Server) setupOpen(ctx context.Context) (bool, error) {
	if s.opts.SetupToken == "" {
		return false, nil
	}
	n, err := s.Users.CountUsers(ctx)
	return n == 0, err
}

func (s *Server) getSetup(ctx context.Context, _ *struct{}) (*setupStateOutput, error) {
	open, err := s.setupOpen(ctx)
	out := &setupStateOutput{}
	out.Body.Open = open
	return out, err
}

type setupInput struct {
	Body struct {
		Token    string `json:"token" maxLength:"256"`
		Email    string `json:"email" maxLength:"254"`
		Password string `json:"password" maxLength:"1024"`
	}
}

// createSetup creates the first (provider) administrator with the one-time
// token printed by serve, and signs it in.
func (s *Server) createSetup(ctx context.Context, in *setupInput) (*sessionOutput, error) {
	open, err := s.setupOpen(ctx)
	if err != nil {
		return nil, err
	}
	if !open || subtle.ConstantTimeCompare([]byte(in.Body.Token), []byte(s.opts.SetupToken)) != 1 {
		return nil, huma.Error403Forbidden("Setup is closed or the setup link is not valid; use `backstop admin create-user`.")
	}
	email, err := app.NormalizeEmail(in.Body.Email)
	if err != nil {
		return nil, err
	}
	if err := app.ValidatePassword(in.Body.Password); err != nil {
		return nil, err
	}
	u := &app.User{Email: email, PasswordHash: app.HashPassword(in.Body.Password)}
	if err := s.Users.CreateUser(ctx, u); err != nil {
		return nil, err
	}
	return s.startSession(ctx, u)
}
