package protect

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"

	"backstop/app"
	"backstop/app/graph"
	"backstop/app/m365"
)

// Microsoft 365 sources (CONTRACT §13): one tenant's app registration. The
// client secret is sealed; creation and a new secret are checked with a
// token request and one read of /subscribedSkus (m365.Check) before
// anything is saved. One *graph.Client per source is kept for the process's
// life (its token and per-mailbox limits are shared by every job of the
// source) and rebuilt when the source's settings or secret change.

var (
	guidPattern   = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	domainPattern = regexp.MustCompile(`^([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?\.)+[a-zA-Z]{2,63}$`)
)

// cachedClient is a source's client and the settings it was built from.
type cachedClient struct {
	key    string
	client *graph.Client
}

func validateM365(s app.M365Settings) error {
	switch {
	case !guidPattern.MatchString(s.AzureTenantID) && !domainPattern.MatchString(s.AzureTenantID):
		return app.FieldError("azureTenantId", "azureTenantId must be the Microsoft Entra tenant id (a GUID) or one of its domains (contoso.onmicrosoft.com)")
	case !guidPattern.MatchString(s.ClientID):
		return app.FieldError("clientId", "clientId must be the app registration's application (client) id, a GUID")
	}
	for field, u := range map[string]string{"graphUrl": s.GraphURL, "loginUrl": s.LoginURL} {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" || p.User != nil {
			return app.FieldError(field, "%s must be an absolute http or https URL", field)
		}
	}
	return nil
}

func (m *Manager) createM365(ctx context.Context, spec app.SourceSpec) (*app.Source, error) {
	s := spec.M365
	s.AzureTenantID, s.ClientID = strings.TrimSpace(s.AzureTenantID), strings.ToLower(strings.TrimSpace(s.ClientID))
	s.GraphURL, s.LoginURL = strings.TrimRight(strings.TrimSpace(s.GraphURL), "/"), strings.TrimRight(strings.TrimSpace(s.LoginURL), "/")
	if s.GraphURL == "" {
		s.GraphURL = graph.DefaultGraphURL
	}
	if s.LoginURL == "" {
		s.LoginURL = graph.DefaultLoginURL
	}
	s.AutoProtect = spec.AutoProtect == nil || *spec.AutoProtect
	if err := validateM365(s); err != nil {
		return nil, err
	}
	if spec.ClientSecret == "" {
		return nil, app.FieldError("clientSecret", "clientSecret must not be empty")
	}
	if err := app.ValidateSchedule(spec.Schedule); err != nil {
		return nil, err
	}
	if m.cfg.M365.ConsentURL != nil {
		s.ConsentURL = m.cfg.M365.ConsentURL(s.LoginURL, s.AzureTenantID, s.ClientID)
	}
	name := strings.TrimSpace(spec.DisplayName)
	if name == "" {
		name = "Microsoft 365 " + s.AzureTenantID
	}
	c, err := m.newClient(s, spec.ClientSecret)
	if err != nil {
		return nil, err
	}
	if err := m.checkM365(ctx, c, s, spec.ClientSecret); err != nil {
		return nil, err
	}
	src := &app.Source{ID: app.NewID(app.PrefixSource), TenantID: spec.TenantID, Kind: app.SourceM365, DisplayName: name,
		State: app.SourceOK, CreatedAt: m.cfg.Now(), Schedule: spec.Schedule, M365: s}
	src.SealedSecret = m.cfg.Box.Seal(src.ID, spec.ClientSecret)
	if err := m.cfg.Sources.CreateSource(ctx, src, nil, nil); err != nil {
		return nil, err
	}
	m.clientsMu.Lock()
	m.clients[src.ID] = cachedClient{key: clientKey(src), client: c}
	m.clientsMu.Unlock()
	m.log.Info("source created", "source_id", src.ID, "tenant_id", src.TenantID, "kind", src.Kind)
	// The directory is read right away, so the users show (and, under
	// autoProtect, get their objects) without waiting for the hourly sync.
	if _, err := m.SubmitSync(ctx, src, app.TriggerWeb); err != nil {
		m.log.Warn("queueing the first directory sync failed", "source_id", src.ID, "error", err)
	}
	m.changed()
	return src, nil
}

// updateM365 applies a PATCH of a Microsoft 365 source: display name,
// client secret (checked first), autoProtect, schedule, disabled.
func (m *Manager) updateM365(ctx context.Context, cur *app.Source, u app.SourceUpdate) (*app.Source, error) {
	switch {
	case u.Host != nil:
		return nil, app.FieldError("host", "host is a setting of IMAP sources")
	case u.Port != nil:
		return nil, app.FieldError("port", "port is a setting of IMAP sources")
	case u.Security != nil:
		return nil, app.FieldError("security", "security is a setting of IMAP sources")
	case u.Password != nil:
		return nil, app.FieldError("password", "a Microsoft 365 source has a clientSecret, not a password")
	case u.TrustFingerprint != nil:
		return nil, app.FieldError("trustFingerprint", "trustFingerprint is a setting of IMAP sources")
	case u.DisplayName != nil && strings.TrimSpace(*u.DisplayName) == "":
		return nil, app.FieldError("displayName", "displayName must not be blank")
	case u.ClientSecret != nil && *u.ClientSecret == "":
		return nil, app.FieldError("clientSecret", "clientSecret must not be empty")
	}
	if u.Schedule != nil {
		if err := app.ValidateSchedule(*u.Schedule); err != nil {
			return nil, err
		}
	}
	if u.ClientSecret != nil {
		c, err := m.newClient(cur.M365, *u.ClientSecret)
		if err != nil {
			return nil, err
		}
		if err := m.checkM365(ctx, c, cur.M365, *u.ClientSecret); err != nil {
			return nil, err
		}
	}
	out, err := m.cfg.Sources.UpdateSource(ctx, cur.ID, func(src *app.Source) error {
		if u.DisplayName != nil {
			src.DisplayName = strings.TrimSpace(*u.DisplayName)
		}
		if u.Schedule != nil {
			src.Schedule = *u.Schedule
		}
		if u.Disabled != nil {
			src.Disabled = *u.Disabled
		}
		if u.AutoProtect != nil {
			src.M365.AutoProtect = *u.AutoProtect
		}
		if u.ClientSecret != nil {
			src.SealedSecret = m.cfg.Box.Seal(src.ID, *u.ClientSecret)
			src.State, src.LastError = app.SourceOK, ""
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	m.forgetClient(cur.ID)
	m.changed()
	return out, nil
}

// clientKey identifies what a source's client was built from: a change of
// settings or secret makes a new one.
func clientKey(src *app.Source) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00", src.M365.AzureTenantID, src.M365.ClientID, src.M365.GraphURL, src.M365.LoginURL)
	h.Write(src.SealedSecret)
	return hex.EncodeToString(h.Sum(nil))
}

func (m *Manager) newClient(s app.M365Settings, secret string) (*graph.Client, error) {
	c, err := m.cfg.M365.NewClient(graph.Config{GraphURL: s.GraphURL, LoginURL: s.LoginURL, AzureTenantID: s.AzureTenantID,
		ClientID: s.ClientID, ClientSecret: secret, Limits: m.cfg.GraphLimits})
	if err != nil {
		return nil, app.FieldError("graphUrl", "%s", app.RedactText(strings.ReplaceAll(err.Error(), secret, "[redacted]")))
	}
	return c, nil
}

// Client returns the source's Graph client, building it (with the sealed
// secret opened) the first time and after the source changed.
func (m *Manager) Client(src *app.Source) (*graph.Client, error) {
	if src.Kind != app.SourceM365 {
		return nil, app.Errorf(app.EINVALID, "source %s is not a Microsoft 365 source", src.ID)
	}
	key := clientKey(src)
	m.clientsMu.Lock()
	defer m.clientsMu.Unlock()
	if cc, ok := m.clients[src.ID]; ok && cc.key == key {
		return cc.client, nil
	}
	secret, err := m.cfg.Box.Open(src.ID, src.SealedSecret)
	if err != nil {
		return nil, fmt.Errorf("opening the source's sealed client secret: %w", err)
	}
	c, err := m.newClient(src.M365, secret)
	if err != nil {
		return nil, err
	}
	m.clients[src.ID] = cachedClient{key: key, client: c}
	return c, nil
}

func (m *Manager) forgetClient(id string) {
	m.clientsMu.Lock()
	delete(m.clients, id)
	m.clientsMu.Unlock()
}

// checkM365 runs the engine's check and turns its failure into the 422 the
// API answers: the AADSTS reason of a refused sign-in, the missing
// permission with the admin-consent link, or an unreachable service. The
// secret never appears in the message.
func (m *Manager) checkM365(ctx context.Context, c *graph.Client, s app.M365Settings, secret string) error {
	if m.cfg.M365.Check == nil {
		return &app.Error{Code: app.ESOURCECHECK, Message: "The sign-in could not be checked: the Microsoft 365 engine is not built into this binary."}
	}
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	err := m.cfg.M365.Check(ctx, c)
	if err == nil {
		return nil
	}
	return m365CheckError(err, s, secret, ctx.Err() != nil)
}

func m365CheckError(err error, s app.M365Settings, secret string, timedOut bool) error {
	redact := func(t string) string {
		if secret != "" {
			t = strings.ReplaceAll(t, secret, "[redacted]")
		}
		return app.RedactText(t)
	}
	var ae *graph.AuthError
	var fe *app.FailureError
	var ne net.Error
	switch {
	case errors.As(err, &ae):
		return &app.Error{Code: app.ESOURCEAUTH, Field: "clientSecret",
			Message: "Microsoft Entra refused the app's sign-in to tenant " + s.AzureTenantID + ": " + redact(ae.Reason())}
	case errors.As(err, &fe) && fe.Code == "graph.auth_failed":
		return &app.Error{Code: app.ESOURCEAUTH, Field: "clientSecret",
			Message: "Microsoft Entra refused the app's sign-in to tenant " + s.AzureTenantID + ": " + redact(causeText(err))}
	case consentMissing(err):
		perm := strings.Join(m365.Permissions, ", ")
		if fe != nil {
			if p, ok := fe.Params["permission"].(string); ok && p != "" {
				perm = p
			}
		}
		msg := "The app registration lacks admin consent for the application permission " + perm + "."
		if s.ConsentURL != "" {
			msg += " An administrator of the customer's tenant grants it at " + s.ConsentURL
		}
		return &app.Error{Code: app.ESOURCECHECK, Field: "clientId", Message: msg}
	case timedOut || errors.As(err, &ne) || (errors.As(err, &fe) && fe.Code == "graph.connection_failed"):
		return &app.Error{Code: app.ESOURCEUNREACHABLE, Field: "graphUrl",
			Message: "Microsoft 365 (" + s.LoginURL + ", " + s.GraphURL + ") could not be reached: " + redact(causeText(err))}
	}
	return &app.Error{Code: app.ESOURCECHECK, Message: "The Microsoft 365 check of tenant " + s.AzureTenantID + " failed: " + redact(causeText(err))}
}

func causeText(err error) string {
	var fe *app.FailureError
	if errors.As(err, &fe) && fe.Err != nil {
		return fe.Err.Error()
	}
	return err.Error()
}

// consentMissing reports a refusal for want of admin consent: the engine's
// graph.consent_missing, or Graph's 403 Authorization_RequestDenied /
// ErrorAccessDenied.
func consentMissing(err error) bool {
	var fe *app.FailureError
	if errors.As(err, &fe) && fe.Code == "graph.consent_missing" {
		return true
	}
	var ge *graph.Error
	if !errors.As(err, &ge) {
		return false
	}
	for _, c := range append([]string{ge.Code}, ge.Inner...) {
		if strings.EqualFold(c, "Authorization_RequestDenied") || strings.EqualFold(c, "ErrorAccessDenied") {
			return true
		}
	}
	return ge.Status == 403
}

// GraphClient returns the Graph client of the m365 source sourceID (the
// cached one, see Client); not found and not-m365 are app errors.
func (m *Manager) GraphClient(ctx context.Context, sourceID string) (*graph.Client, error) {
	src, err := m.cfg.Sources.Source(ctx, sourceID)
	if err != nil {
		return nil, err
	}
	return m.Client(src)
}
