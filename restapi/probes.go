package restapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/julienschmidt/httprouter"
	"golang.org/x/sys/unix"
)

// minFreeBytes is the free space below which storage counts as full and the
// appliance as not ready: below it, an acknowledged write could fail.
const minFreeBytes = 256 << 20

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

// readyz checks the database (a read and the writer) and that the data
// directory takes a synced write and has free space.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	checks := map[string]string{"database": "ok", "storage": "ok"}
	ready := true
	// Anonymous callers learn which check fails, not why: the reasons name
	// paths and internals, and go to the log instead.
	if err := s.Ping(ctx); err != nil {
		checks["database"], ready = "failing", false
		s.opts.Logger.Error("readiness: database check failed", slog.Any("error", err))
	}
	if err := checkWritable(s.opts.DataDir); err != nil {
		checks["storage"], ready = "failing", false
		s.opts.Logger.Error("readiness: the data directory takes no write", slog.Any("error", err))
	} else if free, _, err := diskSpace(s.opts.DataDir); err != nil || free < minFreeBytes {
		checks["storage"], ready = "failing", false
		s.opts.Logger.Error("readiness: less than 256 MiB free in the data directory", slog.Int64("free_bytes", free))
	}
	if !ready {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "not_ready", "checks": checks})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "checks": checks})
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

// diskSpace returns the free (for unprivileged users) and total bytes of
// the file system holding dir.
func diskSpace(dir string) (free, total int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Clean(dir), &st); err != nil {
		return 0, 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), int64(st.Blocks) * int64(st.Bsize), nil
}
