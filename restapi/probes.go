package restapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/julienschmidt/httprouter"
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// healthz answers while the process serves.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz checks the database (a read and the writer), that the data
// directory takes a synced write, and that the default storage target was
// usable (state ok) at its last check, the state GET /storage shows.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	checks, ready := s.readiness(r.Context())
	if !ready {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "not_ready", "checks": checks})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "checks": checks})
}

// Ready reports what /readyz answers, without a request (the updater asks
// it before it declares an update done).
func (s *Server) Ready(ctx context.Context) bool {
	_, ready := s.readiness(ctx)
	return ready
}

func (s *Server) readiness(ctx context.Context) (map[string]string, bool) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	checks := map[string]string{"database": "ok", "storage": "ok"}
	ready := true
	if s.opts.NotReady {
		checks["database"], ready = "failing", false
	}
	// Anonymous callers learn which check fails, not why: the reasons name
	// paths and internals, and go to the log instead.
	if err := s.Ping(ctx); err != nil {
		checks["database"], ready = "failing", false
		s.opts.Logger.Error("readiness: database check failed", slog.Any("error", err))
	}
	if err := checkWritable(s.opts.DataDir); err != nil {
		checks["storage"], ready = "failing", false
		s.opts.Logger.Error("readiness: the data directory takes no write", slog.Any("error", err))
	} else if s.Storage != nil {
		if err := s.Storage.Usable(ctx); err != nil {
			checks["storage"], ready = "failing", false
			s.opts.Logger.Error("readiness: the default storage target is not usable", slog.Any("error", err))
		}
	}
	return checks, ready
}

func checkWritable(dir string) error {
	f, err := os.CreateTemp(dir, ".readyz-*")
	if err != nil {
		return err
	}
	name := f.Name()
	defer os.Remove(name)
	if _, err := f.Write([]byte("ok")); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
