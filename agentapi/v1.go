// Package agentapi serves what agents and install commands call on the
// appliance: the agent API under /agent/v1 (this file and v1_*.go), the
// install script and binaries under /install (install.go), and, in
// subpackage resticrepo, the endpoints' append-only restic repositories.
//
// The agent API is plain JSON over net/http, not part of the integration
// API's OpenAPI description: its only client is the agent of the same
// release or a neighbouring one (see package wire on compatibility).
//
// Authentication: enroll takes a one-time token; every other call carries
// "Authorization: Endpoint <endpoint id>:<secret>" (or HTTP basic auth with
// the same pair). The secret is stored as its SHA-256 only and compared in
// constant time; the endpoint is read on every request, so a revocation
// refuses the next call. Every refusal is 401 with one body, whatever the
// reason (unknown endpoint, wrong secret, revoked).
package agentapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"backstop/agentapi/wire"
	"backstop/app"
)

// Services are the app services the agent API is a front for.
type Services struct {
	Endpoints  app.EndpointService
	Enrollment app.EnrollmentService
	Agents     app.AgentService
	Jobs       app.JobService
}

// Options are the agent API's settings, fixed at start-up.
type Options struct {
	// PublicURL is the appliance's address as agents reach it; empty means
	// the address of each request.
	PublicURL string
	// DataDir is the appliance's data directory (repository passwords live
	// in DataDir/agent/keys, install files in DataDir/install).
	DataDir string
	Now     app.Clock
	Logger  *slog.Logger
	// JobChanged, if set, is told every job state or progress the agents
	// report (the SSE broker's Publish).
	JobChanged func(*app.Job)
	// JobEnded, if set, is told once of each job an agent's run ended
	// (after JobChanged; never for a repeated finish report). Metrics
	// observe durations here. It must not block.
	JobEnded func(*app.Job)
	// Install provides the agent binaries offered by GET /agent/v1/update.
	Install *Install
}

// Handler serves /agent/v1.
type Handler struct {
	svc  Services
	opts Options
	mux  *http.ServeMux
}

// New returns the /agent/v1 handler.
func New(svc Services, opts Options) *Handler {
	if opts.Now == nil {
		opts.Now = app.SystemClock
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	h := &Handler{svc: svc, opts: opts, mux: http.NewServeMux()}
	h.routes()
	return h
}

// routes is the agent API's table of contents.
func (h *Handler) routes() {
	h.mux.HandleFunc("POST /agent/v1/enroll", h.enroll)
	h.mux.HandleFunc("GET /agent/v1/config", h.authed(h.config))
	h.mux.HandleFunc("POST /agent/v1/heartbeat", h.authed(h.heartbeat))
	h.mux.HandleFunc("POST /agent/v1/runs", h.authed(h.startRun))
	h.mux.HandleFunc("POST /agent/v1/runs/{id}/progress", h.authed(h.progress))
	h.mux.HandleFunc("POST /agent/v1/runs/{id}/finish", h.authed(h.finish))
	h.mux.HandleFunc("GET /agent/v1/update", h.authed(h.update))
	h.mux.HandleFunc("/agent/v1/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, app.ENOTFOUND, "no such agent API operation")
	})
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	h.mux.ServeHTTP(w, r)
}

// seenEvery bounds lastSeenAt writes: any authenticated call is contact, but
// progress reports every 2 s need not each write the endpoint row.
const seenEvery = 30 * time.Second

type endpointHandler func(w http.ResponseWriter, r *http.Request, e *app.Endpoint)

// authed authenticates the endpoint and records the contact.
func (h *Handler) authed(next endpointHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		e, err := h.authenticate(r)
		if err != nil {
			if app.ErrorCode(err) == app.EUNAUTHORIZED {
				w.Header().Set("WWW-Authenticate", `Basic realm="backstop-agent"`)
				writeError(w, http.StatusUnauthorized, app.EUNAUTHORIZED, "endpoint credentials are not valid (unknown endpoint, wrong secret, or revoked)")
				return
			}
			h.internal(w, "authenticate", err)
			return
		}
		now := h.opts.Now()
		if e.LastSeenAt == nil || now.Sub(*e.LastSeenAt) >= seenEvery {
			e, err = h.svc.Endpoints.UpdateEndpoint(r.Context(), e.ID, func(e *app.Endpoint) error {
				e.LastSeenAt = &now
				return nil
			})
			if err != nil {
				h.internal(w, "record contact", err)
				return
			}
		}
		next(w, r, e)
	}
}

var errBadCredentials = app.Errorf(app.EUNAUTHORIZED, "invalid endpoint credentials")

// authenticate returns the active endpoint whose id and secret the request
// carries.
func (h *Handler) authenticate(r *http.Request) (*app.Endpoint, error) {
	id, secret, ok := r.BasicAuth()
	if !ok {
		scheme, value, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		if !strings.EqualFold(scheme, wire.AuthScheme) {
			return nil, errBadCredentials
		}
		id, secret, ok = strings.Cut(strings.TrimSpace(value), ":")
	}
	if !ok || !app.HasPrefix(id, app.PrefixEndpoint) || len(id) > 64 || secret == "" {
		return nil, errBadCredentials
	}
	e, err := h.svc.Endpoints.Endpoint(r.Context(), id)
	if app.ErrorCode(err) == app.ENOTFOUND {
		return nil, errBadCredentials
	} else if err != nil {
		return nil, err
	}
	got := sha256.Sum256([]byte(secret))
	want, err := hex.DecodeString(e.SecretFingerprint)
	if err != nil || subtle.ConstantTimeCompare(got[:], want) != 1 || e.Status != app.EndpointActive {
		return nil, errBadCredentials
	}
	return e, nil
}

// config answers GET /agent/v1/config.
func (h *Handler) config(w http.ResponseWriter, r *http.Request, e *app.Endpoint) {
	writeJSON(w, http.StatusOK, configFor(e))
}

func configFor(e *app.Endpoint) wire.Config {
	name := e.DisplayName
	if name == "" {
		name = e.Hostname
	}
	return wire.Config{
		EndpointID: e.ID, DisplayName: name, Profile: e.Profile, Schedule: e.Schedule,
		Paths: nonNil(e.Paths), Excludes: nonNil(e.Excludes),
		HeartbeatSeconds: 60, ProgressSeconds: 2, SampleFiles: 20,
	}
}

// configVersion fingerprints the config so an agent refetches only changes.
func configVersion(c wire.Config) string {
	b, _ := json.Marshal(c)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// heartbeat records what the agent reports about its machine and answers
// the commands waiting for it (those it is not already running).
func (h *Handler) heartbeat(w http.ResponseWriter, r *http.Request, e *app.Endpoint) {
	var in wire.HeartbeatRequest
	if !readJSON(w, r, &in) {
		return
	}
	if msg := checkPlatform(in.OS, in.Arch); msg != "" {
		writeError(w, http.StatusUnprocessableEntity, app.EINVALID, msg)
		return
	}
	now := h.opts.Now()
	e, err := h.svc.Endpoints.UpdateEndpoint(r.Context(), e.ID, func(e *app.Endpoint) error {
		e.LastSeenAt = &now
		e.OS, e.Arch = in.OS, in.Arch
		if in.Hostname != "" {
			e.Hostname = clip(in.Hostname, 255)
		}
		if in.AgentVersion != "" {
			e.AgentVersion = clip(in.AgentVersion, 64)
		}
		return nil
	})
	if err != nil {
		h.internal(w, "heartbeat", err)
		return
	}
	cmds, err := h.svc.Agents.PendingAgentCommands(r.Context(), e.ID, now)
	if err != nil {
		h.internal(w, "pending commands", err)
		return
	}
	running := map[string]bool{}
	for _, id := range in.RunningCommandIDs {
		running[id] = true
	}
	out := wire.HeartbeatResponse{Commands: []wire.Command{}, ConfigVersion: configVersion(configFor(e))}
	for _, c := range cmds {
		if running[c.ID] {
			continue
		}
		out.Commands = append(out.Commands, wire.Command{ID: c.ID, Kind: c.Kind, SnapshotID: c.Restore.SnapshotID,
			Include: c.Restore.Items, Target: c.Restore.Destination})
	}
	writeJSON(w, http.StatusOK, out)
}

// checkPlatform returns why os/arch are not a supported platform, or "".
func checkPlatform(os, arch string) string {
	if os != "linux" && os != "darwin" {
		return "os must be linux or darwin"
	}
	if arch != "amd64" && arch != "arm64" {
		return "arch must be amd64 or arm64"
	}
	return ""
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// maxBody bounds agent requests: a finish report with its sampled files is
// a few KiB.
const maxBody = 1 << 20

// readJSON decodes the request body into v, answering 400/413 itself.
// Unknown fields are accepted: a newer agent may send more.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(v)
	var tooLarge *http.MaxBytesError
	switch {
	case err == nil:
		return true
	case errors.As(err, &tooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", "request body over 1 MiB")
	default:
		writeError(w, http.StatusBadRequest, "bad_request", "malformed JSON: "+err.Error())
	}
	return false
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(struct {
		Type string `json:"type"`
		wire.Error
	}{"urn:backstop:problem:" + code, wire.Error{Status: status, Code: code, Detail: detail}})
}

// appError answers an app error with its status; internal errors are logged
// and answered without detail.
func (h *Handler) appError(w http.ResponseWriter, op string, err error) {
	switch app.ErrorCode(err) {
	case app.ENOTFOUND:
		writeError(w, http.StatusNotFound, app.ENOTFOUND, app.ErrorMessage(err))
	case app.ECONFLICT:
		writeError(w, http.StatusConflict, app.ECONFLICT, app.ErrorMessage(err))
	case app.EINVALID:
		writeError(w, http.StatusUnprocessableEntity, app.EINVALID, app.ErrorMessage(err))
	case app.EUNAUTHORIZED:
		writeError(w, http.StatusUnauthorized, app.EUNAUTHORIZED, app.ErrorMessage(err))
	default:
		h.internal(w, op, err)
	}
}

func (h *Handler) internal(w http.ResponseWriter, op string, err error) {
	h.opts.Logger.Error("agent API request failed", slog.String("op", op), slog.Any("error", err))
	writeError(w, http.StatusInternalServerError, app.EINTERNAL, "internal error")
}

func (h *Handler) publish(ctx context.Context, jobID string) {
	if h.opts.JobChanged == nil || h.svc.Jobs == nil {
		return
	}
	if j, err := h.svc.Jobs.Job(ctx, jobID); err == nil {
		h.opts.JobChanged(j)
	}
}
