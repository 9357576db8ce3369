// Package resticrepo serves one restic repository per endpoint over restic's
// REST backend protocol (restic's doc/REST_backend.rst), at
// /agent/restic/<endpoint_id>/, append-only for the agent.
//
// The repository of endpoint E lives in <Dir>/<E>/ with restic's own layout
// (config, keys/, locks/, snapshots/, index/, data/<2 hex>/), so the
// appliance can run restic locally against the same directory for verify
// runs and retention.
//
// What the agent may do, and what it is refused:
//
//   - create the repository (POST /?create=true), then write config once;
//   - add keys, locks, snapshots, index and data files, each once; every such
//     file is named by the SHA-256 of its content, and an upload whose
//     content does not match its name is 400. Uploading a stored file again
//     with the same bytes (restic retrying an upload whose answer it lost)
//     is 200 and writes nothing; other bytes under a stored name are 403;
//   - read, HEAD (with Content-Length), ranged GET (206) and list (v1 or v2,
//     chosen by Accept and echoed in Content-Type) everything;
//   - delete locks (a missing lock is 200, so restic's unlock is idempotent);
//   - nothing else: overwriting any file and deleting anything but a lock is
//     403, so `restic forget` and `restic prune` fail with agent credentials.
//
// Every request authenticates with HTTP basic auth endpoint_id:secret, and the
// user name must be the endpoint id in the path, so one endpoint can never
// reach another's repository. Paths are accepted only in restic's exact
// shapes (lower-case hex names, fixed type names): '.', '%', '\' and anything
// else outside [a-z0-9_/] is 400 before any file-system access, and every
// file access goes through an os.Root opened on the endpoint's directory, so
// neither ".." nor a symbolic link can lead outside it.
//
// Uploads are written to a temp file beside their final name, fsynced,
// renamed and the directory fsynced; a failed upload (truncated, oversized,
// hash mismatch, full disk) removes its temp file and leaves nothing behind.
// A full disk answers 507, as does an upload that would exceed the
// per-endpoint quota (checked before writing when the size is announced).
package resticrepo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"backstop/app"
)

// PathPrefix is where the handler is mounted; every path it serves starts
// with it.
const PathPrefix = "/agent/restic/"

// Media types of the two listing formats of the REST protocol.
const (
	mediaTypeV1 = "application/vnd.x.restic.rest.v1"
	mediaTypeV2 = "application/vnd.x.restic.rest.v2"
)

// DefaultMaxFileBytes bounds one uploaded file. restic's pack files are at
// most 128 MiB (--pack-size) and its index files a few MiB, so twice the
// largest pack leaves room without letting one request fill a disk.
const DefaultMaxFileBytes = 256 << 20

// Authenticator checks an endpoint's credentials.
type Authenticator interface {
	// Authenticate returns nil when secret is the current secret of the
	// active endpoint endpointID. It returns an *app.Error with code
	// app.EUNAUTHORIZED or app.ENOTFOUND when the credentials are wrong, the
	// endpoint is unknown or it is revoked; any other error is treated as an
	// internal failure (500), never as a refusal.
	Authenticate(ctx context.Context, endpointID, secret string) error
}

// Options configure a Handler; they are fixed once New returns.
type Options struct {
	// Dir holds one repository directory per endpoint:
	// <data_dir>/agent/restic. It is created when missing.
	Dir string
	// Auth checks every request's basic-auth credentials. Required.
	Auth Authenticator
	// QuotaBytes bounds the bytes stored in each endpoint's repository; 0
	// means no quota.
	QuotaBytes int64
	// MaxFileBytes bounds one upload; 0 means DefaultMaxFileBytes.
	MaxFileBytes int64
	// Logger receives internal errors only (refusals are the caller's
	// business, not the operator's). Nil discards.
	Logger *slog.Logger
}

// Handler serves the repositories. It is safe for concurrent use.
type Handler struct {
	opt Options
	log *slog.Logger

	mu    sync.Mutex
	repos map[string]*repoState

	// wrapTemp, when set, wraps the writer of every upload's temp file: the
	// seam tests use to make the disk run full at a chosen byte.
	wrapTemp func(io.Writer) io.Writer
}

// New returns a handler for the repositories under opt.Dir, creating the
// directory (mode 0700) when it is missing.
func New(opt Options) (*Handler, error) {
	if opt.Dir == "" {
		return nil, errors.New("resticrepo: Options.Dir is required")
	}
	if opt.Auth == nil {
		return nil, errors.New("resticrepo: Options.Auth is required")
	}
	if opt.QuotaBytes < 0 {
		return nil, fmt.Errorf("resticrepo: negative quota %d", opt.QuotaBytes)
	}
	if opt.MaxFileBytes <= 0 {
		opt.MaxFileBytes = DefaultMaxFileBytes
	}
	if err := os.MkdirAll(opt.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("resticrepo: %w", err)
	}
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Handler{opt: opt, log: log, repos: map[string]*repoState{}}, nil
}

// Route returns a handler that sends every request whose path starts with
// PathPrefix to h and every other request to next. Mount the repositories
// with it rather than with an http.ServeMux: the mux would answer a path
// with dot segments or doubled slashes with a redirect to its cleaned form,
// where h answers such a path with 400 before looking at it any further.
func (h *Handler) Route(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, PathPrefix) {
			h.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// target is a parsed request path.
type target struct {
	endpoint string
	kind     string // "" for the repository itself, "config", or one of fileKinds
	name     string // file name; "" for a listing (and for config)
}

// fileKinds are the directories of content-addressed files.
var fileKinds = map[string]bool{"data": true, "keys": true, "locks": true, "snapshots": true, "index": true}

// errBadPath is any path outside restic's shapes; its text is the answer.
var errBadPath = errors.New("invalid repository path")

// parsePath accepts exactly the paths restic uses. Because only [a-z0-9_/]
// may appear, no dot segment, encoded character or backslash survives to
// the file system; the shapes below then pin every segment.
func parsePath(r *http.Request) (target, error) {
	p := r.URL.Path
	if r.URL.RawPath != "" || !strings.HasPrefix(p, PathPrefix) {
		return target{}, errBadPath
	}
	rest := p[len(PathPrefix):]
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '/') {
			return target{}, errBadPath
		}
	}
	parts := strings.Split(rest, "/")
	if len(parts) < 2 || !validEndpointID(parts[0]) {
		return target{}, errBadPath
	}
	t := target{endpoint: parts[0]}
	switch {
	case len(parts) == 2 && parts[1] == "":
		return t, nil
	case len(parts) == 2 && parts[1] == "config":
		t.kind = "config"
		return t, nil
	case len(parts) == 3 && fileKinds[parts[1]] && (parts[2] == "" || validName(parts[2])):
		t.kind, t.name = parts[1], parts[2]
		return t, nil
	}
	return target{}, errBadPath
}

// validEndpointID accepts ids of the app.PrefixEndpoint kind (parsePath has
// already limited the characters).
func validEndpointID(s string) bool {
	return app.HasPrefix(s, app.PrefixEndpoint) && len(s) <= 64
}

// validName accepts restic's file names: 64 lower-case hex digits.
func validName(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// relPath is the file's path inside the repository directory.
func (t target) relPath() string {
	switch {
	case t.kind == "config":
		return "config"
	case t.kind == "data":
		return "data/" + t.name[:2] + "/" + t.name
	default:
		return t.kind + "/" + t.name
	}
}

// ServeHTTP routes a request: path shape (400), credentials (401), method
// (405), then the operation.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t, err := parsePath(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if !h.authenticate(w, r, t.endpoint) {
		return
	}
	st := h.state(t.endpoint)
	switch {
	case t.kind == "":
		if r.Method != http.MethodPost {
			methodNotAllowed(w, "POST")
			return
		}
		h.create(w, r, t, st)
	case t.kind == "config" || t.name != "":
		switch r.Method {
		case http.MethodHead, http.MethodGet:
			h.serveFile(w, r, t, st)
		case http.MethodPost:
			h.save(w, r, t, st)
		case http.MethodDelete:
			h.remove(w, r, t, st)
		default:
			methodNotAllowed(w, "HEAD, GET, POST, DELETE")
		}
	default:
		if r.Method != http.MethodGet {
			methodNotAllowed(w, "GET")
			return
		}
		h.list(w, r, t, st)
	}
}

// authenticate answers 401 and returns false unless the basic-auth user is
// the endpoint in the path and its secret is current.
func (h *Handler) authenticate(w http.ResponseWriter, r *http.Request, endpointID string) bool {
	user, secret, ok := r.BasicAuth()
	if ok && user == endpointID {
		err := h.opt.Auth.Authenticate(r.Context(), user, secret)
		if err == nil {
			return true
		}
		if code := app.ErrorCode(err); code != app.EUNAUTHORIZED && code != app.ENOTFOUND {
			h.internalError(w, r, "authenticate", err)
			return false
		}
	}
	w.Header().Set("WWW-Authenticate", `Basic realm="backstop repository", charset="UTF-8"`)
	http.Error(w, "unauthorized", http.StatusUnauthorized)
	return false
}

// create makes the repository's directories. It is idempotent: the config
// file, written once afterwards, is what makes a repository exist for
// restic, and it can never be replaced.
func (h *Handler) create(w http.ResponseWriter, r *http.Request, t target, st *repoState) {
	if r.URL.Query().Get("create") != "true" {
		http.Error(w, "POST to the repository needs ?create=true", http.StatusBadRequest)
		return
	}
	if err := os.Mkdir(filepath.Join(h.opt.Dir, t.endpoint), 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		h.fsError(w, r, "create repository", err)
		return
	}
	root, err := h.openRepo(t.endpoint)
	if err != nil {
		h.fsError(w, r, "create repository", err)
		return
	}
	defer root.Close()
	dirs := []string{"keys", "locks", "snapshots", "index", "data"}
	for i := 0; i < 256; i++ {
		dirs = append(dirs, fmt.Sprintf("data/%02x", i))
	}
	for _, d := range dirs {
		if err := root.Mkdir(d, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			h.fsError(w, r, "create repository", err)
			return
		}
	}
	st.count(opCreate, 0)
	w.WriteHeader(http.StatusOK)
}

// remove deletes a lock; every other delete is refused. A missing lock is
// 200: restic and its unlock command may remove a lock that another run
// already removed.
func (h *Handler) remove(w http.ResponseWriter, r *http.Request, t target, st *repoState) {
	if t.kind != "locks" {
		st.count(opRefused, 0)
		http.Error(w, "append-only repository: only locks can be deleted", http.StatusForbidden)
		return
	}
	root, err := h.openRepo(t.endpoint)
	if err != nil {
		h.fsError(w, r, "remove lock", err)
		return
	}
	defer root.Close()
	var size int64
	if fi, err := root.Lstat(t.relPath()); err == nil {
		size = fi.Size()
	}
	err = root.Remove(t.relPath())
	switch {
	case err == nil:
		st.release(size)
	case !errors.Is(err, os.ErrNotExist):
		h.fsError(w, r, "remove lock", err)
		return
	}
	st.count(opDelete, 0)
	w.WriteHeader(http.StatusOK)
}

// openRepo opens the endpoint's repository directory as a root that no
// path, ".." or symbolic link, can leave. A missing repository is
// os.ErrNotExist, answered 404 by fsError.
func (h *Handler) openRepo(endpointID string) (*os.Root, error) {
	return os.OpenRoot(filepath.Join(h.opt.Dir, endpointID))
}

// fsError answers a file-system error: 404 for a missing file, 403 for a
// path that a symbolic link leads out of the repository, 507 for a full
// disk or exhausted disk quota, 500 (logged) otherwise.
func (h *Handler) fsError(w http.ResponseWriter, r *http.Request, op string, err error) {
	switch {
	case escapesRoot(err):
		h.log.Warn("symbolic link out of a repository refused", slog.String("path", r.URL.Path))
		http.Error(w, "path leads outside the repository", http.StatusForbidden)
	case errors.Is(err, os.ErrNotExist):
		http.Error(w, "not found", http.StatusNotFound)
	case errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT):
		h.log.Warn("repository storage full", slog.String("op", op), slog.Any("error", err))
		http.Error(w, "insufficient storage", http.StatusInsufficientStorage)
	default:
		h.internalError(w, r, op, err)
	}
}

// escapesRoot reports whether err is os.Root refusing a path that leaves
// the root (through a symbolic link). The os package does not export that
// error, so it is recognised by its fixed text.
func escapesRoot(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && pe.Err != nil && pe.Err.Error() == "path escapes from parent"
}

func (h *Handler) internalError(w http.ResponseWriter, r *http.Request, op string, err error) {
	h.log.Error("repository request failed", slog.String("op", op), slog.String("method", r.Method),
		slog.String("path", r.URL.Path), slog.Any("error", err))
	http.Error(w, "internal error", http.StatusInternalServerError)
}

func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
}
