package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"backstop/agentapi/wire"
)

// Restic runs the restic command line against the endpoint's repository.
// It supports restic 0.14 (Debian 12) up to current releases: the JSON
// messages it reads are those every version prints, newer fields are used
// when present, and a short snapshot id is resolved to the full one.
type Restic struct {
	Path       string
	Repository wire.Repository
	// User and Password authenticate to the appliance's REST repository
	// (endpoint id and secret). They travel in the environment, never argv,
	// so other users cannot read them from the process list.
	User, Secret string
	// Stderr, if set, also receives restic's stderr (interactive runs).
	Stderr io.Writer
}

// RunError is a restic run that did not succeed. Interrupted runs (the
// agent was told to stop) are not failures (SPEC rule 3).
type RunError struct {
	Failure     wire.Failure
	Interrupted bool
}

func (e *RunError) Error() string {
	if e.Interrupted {
		return "interrupted"
	}
	return e.Failure.Code + ": " + e.Failure.Message
}

// FindRestic returns the restic binary to use: the configured path, then the
// state directory's restic, then PATH. Failing that it returns a RunError
// with code agent.tool_missing.
func FindRestic(configured, stateDir string) (string, error) {
	var tried []string
	if configured != "" {
		if p, err := exec.LookPath(configured); err == nil {
			return p, nil
		}
		tried = append(tried, configured)
	}
	if stateDir != "" {
		p := filepath.Join(stateDir, "restic")
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
		tried = append(tried, p)
	}
	if p, err := exec.LookPath("restic"); err == nil {
		return p, nil
	}
	tried = append(tried, "restic on PATH")
	return "", &RunError{Failure: wire.Failure{
		Code: "agent.tool_missing", Step: "prepare",
		Message: "restic was not found (tried " + strings.Join(tried, ", ") + ")",
		Params:  map[string]string{"tool": "restic"},
	}}
}

// env is the process environment for restic: the caller's, minus any
// RESTIC_* that could point it elsewhere, plus the repository and password.
func (r *Restic) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RESTIC_") {
			env = append(env, kv)
		}
	}
	return append(env,
		"RESTIC_REPOSITORY="+repositoryURL(r.Repository.URL, r.User, r.Secret),
		"RESTIC_PASSWORD="+r.Repository.Password,
		// Status lines twice a second are enough for a report every 2 s;
		// restic's default for --json is 60 a second.
		"RESTIC_PROGRESS_FPS=2",
	)
}

// repositoryURL puts the endpoint credentials into a rest: URL (restic 0.14
// reads REST credentials only from the URL).
func repositoryURL(repo, user, secret string) string {
	rest, ok := strings.CutPrefix(repo, "rest:")
	if !ok || user == "" {
		return repo
	}
	u, err := url.Parse(rest)
	if err != nil {
		return repo
	}
	u.User = url.UserPassword(user, secret)
	return "rest:" + u.String()
}

// message is any JSON line restic prints; fields of every message type and
// every version are merged, absent ones stay zero.
type message struct {
	Type string `json:"message_type"`
	// status (backup and restore)
	PercentDone   float64 `json:"percent_done"`
	TotalFiles    int64   `json:"total_files"`
	FilesDone     int64   `json:"files_done"`
	FilesRestored int64   `json:"files_restored"`
	TotalBytes    int64   `json:"total_bytes"`
	BytesDone     int64   `json:"bytes_done"`
	BytesRestored int64   `json:"bytes_restored"`
	ErrorCount    int64   `json:"error_count"`
	// summary (backup)
	FilesNew            int64   `json:"files_new"`
	FilesChanged        int64   `json:"files_changed"`
	FilesUnmodified     int64   `json:"files_unmodified"`
	DirsNew             int64   `json:"dirs_new"`
	DataAdded           int64   `json:"data_added"`
	TotalFilesProcessed int64   `json:"total_files_processed"`
	TotalBytesProcessed int64   `json:"total_bytes_processed"`
	TotalDuration       float64 `json:"total_duration"`
	SnapshotID          string  `json:"snapshot_id"`
	// error (restic ≥ 0.15 prints these as JSON)
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
	During string `json:"during"`
	Item   string `json:"item"`
}

// BackupResult is what a finished backup produced.
type BackupResult struct {
	SnapshotID string // full id
	Stats      wire.Stats
	Partial    bool // restic exit 3: snapshot made without some unreadable files
}

// Backup backs up paths and resolves the snapshot's full id. onProgress is
// called for every status line.
func (r *Restic) Backup(ctx context.Context, paths, excludes []string, onProgress func(wire.Progress)) (*BackupResult, error) {
	args := []string{"backup", "--json"}
	for _, x := range excludes {
		args = append(args, "--exclude", x)
	}
	args = append(args, paths...)
	var summary *message
	var errorCount int64
	exit, stderr, err := r.run(ctx, "backup", args, func(m *message) {
		switch m.Type {
		case "status":
			errorCount = max(errorCount, m.ErrorCount)
			phase := "uploading"
			if m.TotalFiles == 0 && m.FilesDone == 0 {
				phase = "scanning"
			}
			if onProgress != nil {
				onProgress(wire.Progress{Phase: phase, Percent: m.PercentDone * 100, FilesDone: m.FilesDone,
					FilesTotal: m.TotalFiles, BytesDone: m.BytesDone, BytesTotal: m.TotalBytes})
			}
		case "error":
			errorCount++
		case "summary":
			summary = m
		}
	})
	if err != nil {
		return nil, err
	}
	if exit != 0 && exit != 3 {
		return nil, &RunError{Failure: classify(exit, stderr, "backup")}
	}
	if summary == nil || summary.SnapshotID == "" {
		return nil, &RunError{Failure: wire.Failure{Code: "agent.backup_failed", Step: "backup", ExitCode: exit,
			Message: "restic finished without reporting a snapshot", Details: tail(stderr)}}
	}
	res := &BackupResult{Partial: exit == 3, Stats: wire.Stats{
		FilesNew: summary.FilesNew, FilesChanged: summary.FilesChanged, FilesUnmodified: summary.FilesUnmodified,
		DirsNew: summary.DirsNew, DataAdded: summary.DataAdded, FilesProcessed: summary.TotalFilesProcessed,
		BytesProcessed: summary.TotalBytesProcessed, ErrorCount: errorCount, DurationSeconds: summary.TotalDuration,
	}}
	res.SnapshotID, err = r.ResolveSnapshot(ctx, summary.SnapshotID)
	return res, err
}

// ResolveSnapshot returns the full 64-character id of a snapshot given by a
// prefix (restic 0.14's summary carries only the short id) or "latest".
func (r *Restic) ResolveSnapshot(ctx context.Context, id string) (string, error) {
	if len(id) == 64 {
		return id, nil
	}
	var out bytes.Buffer
	exit, stderr, err := r.exec(ctx, "resolve", []string{"snapshots", "--json", id}, &out)
	if err != nil {
		return "", err
	}
	if exit != 0 {
		return "", &RunError{Failure: classify(exit, stderr, "resolve")}
	}
	var snaps []struct {
		ID   string    `json:"id"`
		Time time.Time `json:"time"`
	}
	if err := json.Unmarshal(out.Bytes(), &snaps); err != nil || len(snaps) == 0 {
		return "", &RunError{Failure: wire.Failure{Code: "agent.backup_failed", Step: "resolve",
			Message: "cannot resolve snapshot " + id, Details: tail(stderr)}}
	}
	best := snaps[0]
	for _, s := range snaps[1:] { // "latest" lists one per host/path group: take the newest
		if s.Time.After(best.Time) {
			best = s
		}
	}
	return best.ID, nil
}

// Restore restores a snapshot (an id or "latest") into target, "/" meaning
// the original paths; include limits it to some paths.
func (r *Restic) Restore(ctx context.Context, snapshot, target string, include []string, onProgress func(wire.Progress)) error {
	if target == "" {
		target = "/"
	}
	args := []string{"restore", "--json", snapshot, "--target", target}
	for _, p := range include {
		args = append(args, "--include", p)
	}
	exit, stderr, err := r.run(ctx, "restore", args, func(m *message) {
		if m.Type == "status" && onProgress != nil {
			onProgress(wire.Progress{Phase: "restoring", Percent: m.PercentDone * 100, FilesDone: m.FilesRestored,
				FilesTotal: m.TotalFiles, BytesDone: m.BytesRestored, BytesTotal: m.TotalBytes})
		}
	})
	if err != nil {
		return err
	}
	if exit != 0 {
		return &RunError{Failure: classify(exit, stderr, "restore")}
	}
	return nil
}

// EnsureRepository creates the repository unless it exists already.
func (r *Restic) EnsureRepository(ctx context.Context) error {
	exit, stderr, err := r.exec(ctx, "prepare", []string{"cat", "config"}, io.Discard)
	if err != nil || exit == 0 {
		return err
	}
	if f := classify(exit, stderr, "prepare"); f.Code != "restic.repository_missing" {
		return &RunError{Failure: f}
	}
	exit, stderr, err = r.exec(ctx, "prepare", []string{"init"}, io.Discard)
	if err != nil || exit == 0 {
		return err
	}
	return &RunError{Failure: classify(exit, stderr, "prepare")}
}

// Version returns restic's version line ("restic 0.14.0 compiled with …").
func (r *Restic) Version(ctx context.Context) string {
	var out bytes.Buffer
	if exit, _, err := r.exec(ctx, "version", []string{"version"}, &out); err != nil || exit != 0 {
		return ""
	}
	return strings.TrimSpace(out.String())
}

// run execs restic and feeds each JSON line of stdout (and of stderr, where
// newer versions print error messages) to onMessage.
func (r *Restic) run(ctx context.Context, step string, args []string, onMessage func(*message)) (int, string, error) {
	pr, pw := io.Pipe()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			var m message
			if line := sc.Bytes(); len(line) > 0 && line[0] == '{' && json.Unmarshal(line, &m) == nil {
				onMessage(&m)
			}
		}
		io.Copy(io.Discard, pr)
	}()
	exit, stderr, err := r.exec(ctx, step, args, pw)
	pw.Close()
	wg.Wait()
	return exit, stderr, err
}

// exec runs restic with args, writing stdout to out. It returns the exit
// code and the tail of stderr. A cancelled ctx sends restic SIGINT, which it
// handles by removing its lock, and yields an interrupted RunError; a
// missing binary yields agent.tool_missing.
func (r *Restic) exec(ctx context.Context, step string, args []string, out io.Writer) (int, string, error) {
	if ctx.Err() != nil {
		return 0, "", &RunError{Interrupted: true}
	}
	cmd := exec.CommandContext(ctx, r.Path, args...)
	cmd.Env = r.env()
	cmd.Stdout = out
	stderr := &tailBuffer{max: 16 << 10}
	cmd.Stderr = stderr
	if r.Stderr != nil {
		cmd.Stderr = io.MultiWriter(stderr, r.Stderr)
	}
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second // then killed
	err := cmd.Run()
	if ctx.Err() != nil {
		return 0, stderr.String(), &RunError{Interrupted: true}
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, stderr.String(), nil
	case errors.As(err, &ee):
		return ee.ExitCode(), stderr.String(), nil
	case errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrPermission):
		return 0, "", &RunError{Failure: wire.Failure{Code: "agent.tool_missing", Step: step,
			Message: fmt.Sprintf("restic cannot be run (%s): %v", r.Path, err), Params: map[string]string{"tool": "restic"}}}
	}
	return 0, stderr.String(), &RunError{Failure: wire.Failure{Code: "agent.backup_failed", Step: step, Message: err.Error()}}
}

// classify turns a restic exit into a cause code. restic ≥ 0.17 has
// distinct exit codes; 0.14 exits 1 for everything, so its messages are
// matched as a fallback.
func classify(exit int, stderr, step string) wire.Failure {
	f := wire.Failure{ExitCode: exit, Step: step, Details: tail(stderr), Params: map[string]string{"exitCode": fmt.Sprint(exit)}}
	low := strings.ToLower(stderr)
	has := func(subs ...string) bool {
		for _, s := range subs {
			if strings.Contains(low, s) {
				return true
			}
		}
		return false
	}
	switch {
	case exit == 12 || has("wrong password or no key found"):
		f.Code, f.Message = "restic.wrong_password", "the repository password is wrong (no key matches)"
	case has("401 unauthorized", "unauthorized"): // before "missing": 0.14 reports a refused config read as missing too
		f.Code, f.Message = "restic.repository_refused", "the appliance refused the endpoint's repository credentials"
	case exit == 10 || has("is there a repository at the following location", "repository does not exist", "unable to open config file"):
		f.Code, f.Message = "restic.repository_missing", "the repository does not exist"
	case exit == 11 || has("unable to create lock", "repository is already locked", "failed to lock"):
		f.Code, f.Message = "restic.lock_failed", "the repository is locked by another process"
	case has("no space left on device", "insufficient storage", "507"):
		f.Code, f.Message = "storage.full", "the appliance's storage is full"
	case has("all target directories/files do not exist", "all source directories/files do not exist"):
		f.Code, f.Message = "restic.source_missing", "none of the configured backup paths exist"
	case has("connection refused", "no such host", "i/o timeout", "network is unreachable", "connection reset"):
		f.Code, f.Message = "restic.repository_unreachable", "the appliance's repository cannot be reached"
	case step == "restore":
		f.Code, f.Message = "agent.restore_failed", fmt.Sprintf("restic restore failed with exit code %d", exit)
	default:
		f.Code, f.Message = "agent.backup_failed", fmt.Sprintf("restic %s failed with exit code %d", step, exit)
	}
	return f
}

// tail returns the last lines of restic's stderr for a support case, with
// the repository credentials removed.
func tail(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	out := strings.Join(lines, "\n")
	if i := strings.Index(out, "://"); i >= 0 { // rest:http://user:secret@host
		if at := strings.Index(out[i:], "@"); at > 0 && !strings.ContainsAny(out[i:i+at], " \n") {
			out = out[:i+3] + "***" + out[i+at:]
		}
	}
	return out
}

// tailBuffer keeps the last max bytes written.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
