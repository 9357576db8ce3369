package agentapi

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"backstop/agentapi/wire"
	"backstop/app"
)

// Repository passwords. The appliance generates each endpoint's restic
// password and must keep it in plaintext: it runs restic itself against the
// repository for restore tests (verify runs) and retention. It is kept in a
// 0600 file, DataDir/agent/keys/<endpoint id>, rather than encrypted in the
// database: a key to decrypt it would have to sit in the same data
// directory and would protect nothing, while a plain file keeps the
// password out of the database (which is copied for support cases and read
// by the admin commands) and can be handed to restic as --password-file.

// RepositoryPasswordFile is where the appliance keeps an endpoint's restic
// repository password: the seam for verify runs and retention.
func RepositoryPasswordFile(dataDir, endpointID string) string {
	return filepath.Join(dataDir, "agent", "keys", endpointID)
}

// RepositoryDir is the endpoint's restic repository on the appliance.
func RepositoryDir(dataDir, endpointID string) string {
	return filepath.Join(dataDir, "agent", "restic", endpointID)
}

// repositoryPassword returns the endpoint's password, creating it on first
// use. An existing password is never replaced: the repository is encrypted
// with it.
func (h *Handler) repositoryPassword(endpointID string) (string, error) {
	path := RepositoryPasswordFile(h.opts.DataDir, endpointID)
	if b, err := os.ReadFile(path); err == nil {
		return strings.TrimSpace(string(b)), nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	pw := app.RandomToken(48)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) { // a concurrent enrollment of the same endpoint won
		return h.repositoryPassword(endpointID)
	} else if err != nil {
		return "", err
	}
	if _, err := f.WriteString(pw + "\n"); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", err
	}
	return pw, f.Close()
}

// baseURL is the appliance's address as the agent reaches it.
func (h *Handler) baseURL(r *http.Request) string {
	if h.opts.PublicURL != "" {
		return strings.TrimRight(h.opts.PublicURL, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// enroll answers POST /agent/v1/enroll: it consumes the one-time token,
// creates the endpoint (or completes the one the token was made for), and
// returns the endpoint's secret (shown once), repository and config.
func (h *Handler) enroll(w http.ResponseWriter, r *http.Request) {
	var in wire.EnrollRequest
	if !readJSON(w, r, &in) {
		return
	}
	// The token's form is checked before any lookup: garbage costs nothing.
	if !strings.HasPrefix(in.Token, "bse_") || len(in.Token) > 100 {
		writeError(w, http.StatusUnauthorized, app.EUNAUTHORIZED, "enrollment token is not valid (expected the bse_… token from the appliance)")
		return
	}
	if msg := checkPlatform(in.OS, in.Arch); msg != "" {
		writeError(w, http.StatusUnprocessableEntity, app.EINVALID, msg)
		return
	}
	if in.Profile != "" && in.Profile != app.ProfileServer && in.Profile != app.ProfileClient {
		writeError(w, http.StatusUnprocessableEntity, app.EINVALID, "profile must be server or client")
		return
	}
	if strings.TrimSpace(in.Hostname) == "" {
		writeError(w, http.StatusUnprocessableEntity, app.EINVALID, "hostname is required")
		return
	}
	tok, err := h.svc.Enrollment.ConsumeEnrollmentToken(r.Context(), app.Fingerprint(in.Token), h.opts.Now())
	if err != nil {
		h.appError(w, "consume token", err) // unknown, used or expired: 401 saying which
		return
	}
	secret := "bss_" + app.RandomToken(40)
	profile := tok.Profile
	if in.Profile != "" {
		profile = in.Profile
	}
	apply := func(e *app.Endpoint) {
		e.Hostname, e.OS, e.Arch = clip(strings.TrimSpace(in.Hostname), 255), in.OS, in.Arch
		e.AgentVersion, e.Profile, e.SecretFingerprint = clip(in.AgentVersion, 64), profile, app.Fingerprint(secret)
		if len(in.Paths) > 0 {
			e.Paths = in.Paths
		}
	}
	var e *app.Endpoint
	if tok.EndpointID != "" {
		e, err = h.svc.Endpoints.UpdateEndpoint(r.Context(), tok.EndpointID, func(e *app.Endpoint) error {
			if e.Status != app.EndpointActive {
				return app.Errorf(app.EUNAUTHORIZED, "the endpoint this token was made for is revoked")
			}
			apply(e)
			return nil
		})
	} else {
		e = &app.Endpoint{ID: app.NewID(app.PrefixEndpoint), TenantID: tok.TenantID, Status: app.EndpointActive,
			Schedule: app.DefaultEndpointSchedule, CreatedAt: h.opts.Now()}
		apply(e)
		err = h.svc.Endpoints.CreateEndpoint(r.Context(), e)
	}
	if err != nil {
		h.appError(w, "enroll endpoint", err)
		return
	}
	pw, err := h.repositoryPassword(e.ID)
	if err != nil {
		h.internal(w, "repository password", err)
		return
	}
	writeJSON(w, http.StatusCreated, wire.EnrollResponse{
		EndpointID: e.ID, Secret: secret,
		Repository: wire.Repository{URL: fmt.Sprintf("rest:%s/agent/restic/%s/", h.baseURL(r), e.ID), Password: pw},
		Config:     configFor(e),
	})
}
