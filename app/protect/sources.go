package protect

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"backstop/app"
	"backstop/app/imapbackup"
)

// checkTimeout bounds the login check at creation and change.
const checkTimeout = 30 * time.Second

// Sources lists sources.
func (m *Manager) Sources(ctx context.Context, f app.SourceFilter) ([]*app.Source, error) {
	return m.cfg.Sources.Sources(ctx, f)
}

// Source returns one source.
func (m *Manager) Source(ctx context.Context, id string) (*app.Source, error) {
	return m.cfg.Sources.Source(ctx, id)
}

// Create checks the login and stores an IMAP source with its protected
// object (kind imap, protected) and its directory entry (imap_account).
func (m *Manager) Create(ctx context.Context, spec app.SourceSpec) (*app.Source, error) {
	switch spec.Kind {
	case app.SourceM365:
		return m.createM365(ctx, spec)
	case app.SourceIMAP:
	default:
		return nil, app.FieldError("kind", "kind must be imap or m365")
	}
	s := spec.IMAP
	s.Host = strings.TrimSpace(s.Host)
	s.Username = strings.TrimSpace(s.Username)
	fp, err := normalizeFingerprint(s.TrustFingerprint)
	if err != nil {
		return nil, err
	}
	s.TrustFingerprint = fp
	if err := validateIMAP(s); err != nil {
		return nil, err
	}
	if spec.Password == "" {
		return nil, app.FieldError("password", "password must not be empty")
	}
	if err := app.ValidateSchedule(spec.Schedule); err != nil {
		return nil, err
	}
	name := strings.TrimSpace(spec.DisplayName)
	if name == "" {
		name = s.Username
	}
	if err := m.check(ctx, imapAccount(s, spec.Password)); err != nil {
		return nil, err
	}
	src := &app.Source{ID: app.NewID(app.PrefixSource), TenantID: spec.TenantID, Kind: app.SourceIMAP, DisplayName: name,
		State: app.SourceOK, CreatedAt: m.cfg.Now(), Schedule: spec.Schedule, IMAP: s}
	src.SealedSecret = m.cfg.Box.Seal(src.ID, spec.Password)
	entry := &app.DirectoryEntry{ID: app.NewID(app.PrefixUser), Kind: app.DirectoryIMAPAccount, ExternalID: src.ID,
		DisplayName: name, Enabled: true, Protected: true, FirstSeenAt: src.CreatedAt, LastSeenAt: src.CreatedAt}
	if strings.Contains(s.Username, "@") {
		entry.Email = s.Username
	}
	obj := &app.ProtectedObject{ID: app.NewID(app.PrefixProtected), Kind: app.ObjectIMAP, SourceKind: app.SourceIMAP,
		DirectoryEntryID: entry.ID, DisplayName: name, Address: s.Username, Protected: true, CreatedAt: src.CreatedAt}
	if err := m.cfg.Sources.CreateSource(ctx, src, []*app.ProtectedObject{obj}, []*app.DirectoryEntry{entry}); err != nil {
		return nil, err
	}
	m.log.Info("source created", "source_id", src.ID, "tenant_id", src.TenantID, "protected_object_id", obj.ID)
	m.changed()
	return src, nil
}

// Update applies a PATCH. A change of host, port, security, password or
// trusted fingerprint is checked with the engine before anything is saved;
// a passing check also sets the source ok again.
func (m *Manager) Update(ctx context.Context, id string, u app.SourceUpdate) (*app.Source, error) {
	cur, err := m.cfg.Sources.Source(ctx, id)
	if err != nil {
		return nil, err
	}
	if cur.Kind == app.SourceM365 {
		return m.updateM365(ctx, cur, u)
	}
	switch {
	case u.ClientSecret != nil:
		return nil, app.FieldError("clientSecret", "an IMAP source has a password, not a clientSecret")
	case u.AutoProtect != nil:
		return nil, app.FieldError("autoProtect", "autoProtect is a setting of Microsoft 365 sources")
	}
	s := cur.IMAP
	reconnect := false
	if u.Host != nil {
		s.Host, reconnect = strings.TrimSpace(*u.Host), true
	}
	if u.Port != nil {
		s.Port, reconnect = *u.Port, true
	}
	if u.Security != nil {
		s.Security, reconnect = *u.Security, true
	}
	if u.TrustFingerprint != nil {
		if s.TrustFingerprint, err = normalizeFingerprint(*u.TrustFingerprint); err != nil {
			return nil, err
		}
		reconnect = true
	}
	if err := validateIMAP(s); err != nil {
		return nil, err
	}
	if u.DisplayName != nil && strings.TrimSpace(*u.DisplayName) == "" {
		return nil, app.FieldError("displayName", "displayName must not be blank")
	}
	if u.Schedule != nil {
		if err := app.ValidateSchedule(*u.Schedule); err != nil {
			return nil, err
		}
	}
	password := ""
	if u.Password != nil {
		if *u.Password == "" {
			return nil, app.FieldError("password", "password must not be empty")
		}
		password, reconnect = *u.Password, true
	}
	if reconnect {
		if password == "" {
			if password, err = m.cfg.Box.Open(cur.ID, cur.SealedSecret); err != nil {
				return nil, err
			}
		}
		if err := m.check(ctx, imapAccount(s, password)); err != nil {
			return nil, err
		}
	}
	out, err := m.cfg.Sources.UpdateSource(ctx, id, func(src *app.Source) error {
		src.IMAP = s
		if u.DisplayName != nil {
			src.DisplayName = strings.TrimSpace(*u.DisplayName)
		}
		if u.Schedule != nil {
			src.Schedule = *u.Schedule
		}
		if u.Disabled != nil {
			src.Disabled = *u.Disabled
		}
		if u.Password != nil {
			src.SealedSecret = m.cfg.Box.Seal(src.ID, *u.Password)
		}
		if reconnect {
			src.State, src.LastError = app.SourceOK, ""
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	m.changed()
	return out, nil
}

// Delete removes a source; its protected objects stay, unprotected, with
// their snapshots, until retention removes them.
func (m *Manager) Delete(ctx context.Context, id string) error {
	if err := m.cfg.Sources.DeleteSource(ctx, id); err != nil {
		return err
	}
	m.forgetClient(id)
	m.changed()
	return nil
}

// check runs the engine's login check and turns its failure into the 422
// the API answers, saying why. The password never appears in the message.
func (m *Manager) check(ctx context.Context, a imapbackup.Account) error {
	if m.cfg.Engine.Check == nil {
		return &app.Error{Code: app.ESOURCECHECK, Message: "The login could not be checked: " + errNoEngine.Error() + "."}
	}
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	err := m.cfg.Engine.Check(ctx, a)
	if err == nil {
		return nil
	}
	return checkError(err, a, ctx.Err() != nil)
}

func checkError(err error, a imapbackup.Account, timedOut bool) error {
	where := net.JoinHostPort(a.Host, fmt.Sprint(a.Port))
	code, field, what := app.ESOURCECHECK, "host", "The login check of "+a.Username+" at "+where+" failed"
	var fe *app.FailureError
	switch {
	case errors.As(err, &fe) && fe.Code == "imap.auth_failed":
		code, field, what = app.ESOURCEAUTH, "password", "The IMAP server "+where+" refused the sign-in of "+a.Username
	case errors.As(err, &fe) && fe.Code == "imap.tls_failed":
		code, field, what = app.ESOURCETLS, "security", "TLS with "+where+" failed (security "+a.Security+")"
	case errors.As(err, &fe) && fe.Code == "imap.connection_failed", timedOut:
		code, field, what = app.ESOURCEUNREACHABLE, "host", "The IMAP server "+where+" could not be reached"
	}
	detail := err.Error()
	if fe != nil && fe.Err != nil {
		detail = fe.Err.Error()
	}
	if a.Password != "" {
		detail = strings.ReplaceAll(detail, a.Password, "[redacted]")
	}
	return &app.Error{Code: code, Message: what + ": " + app.RedactText(detail), Field: field}
}

func imapAccount(s app.IMAPSettings, password string) imapbackup.Account {
	return imapbackup.Account{Host: s.Host, Port: s.Port, Security: s.Security, Username: s.Username, Password: password,
		TrustFingerprint: s.TrustFingerprint}
}

func validateIMAP(s app.IMAPSettings) error {
	switch {
	case s.Host == "" || strings.ContainsAny(s.Host, " /\t\r\n"):
		return app.FieldError("host", "host must be a host name or address")
	case s.Port < 1 || s.Port > 65535:
		return app.FieldError("port", "port must be between 1 and 65535")
	case s.Security != app.SecurityNone && s.Security != app.SecurityStartTLS && s.Security != app.SecurityTLS:
		return app.FieldError("security", "security must be none, starttls or tls")
	case s.Username == "":
		return app.FieldError("username", "username must not be empty")
	case s.TrustFingerprint != "" && s.Security == app.SecurityNone:
		return app.FieldError("trustFingerprint", "a trusted certificate fingerprint needs security starttls or tls")
	}
	return nil
}

// normalizeFingerprint accepts a SHA-256 fingerprint as 64 hex digits, with
// or without colons, in either case, and returns it in lowercase hex.
func normalizeFingerprint(fp string) (string, error) {
	fp = strings.ToLower(strings.ReplaceAll(strings.TrimSpace(fp), ":", ""))
	if fp == "" {
		return "", nil
	}
	if len(fp) != 64 || strings.Trim(fp, "0123456789abcdef") != "" {
		return "", app.FieldError("trustFingerprint", "trustFingerprint must be the certificate's SHA-256: 64 hex digits, colons allowed")
	}
	return fp, nil
}
