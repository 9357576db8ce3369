package retention

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"backstop/app"
)

// restic runs the restic command line against one endpoint's repository as
// a local directory, with the appliance's copy of its password, the way
// verify does. Unlike verify, forget takes restic's exclusive lock: an
// agent backup in progress (which holds a shared lock over the repository
// server) makes it fail at once, and it never deletes anything a running
// backup may still need. The run's temporary directory holds TMPDIR and
// restic's cache home, so nothing is written outside the data directory.
type restic struct {
	bin          string
	repo         string
	passwordFile string
	tmp          string
}

// result is one finished restic process.
type result struct {
	exit   int
	stdout []byte
	stderr []byte
}

// run starts restic with args and waits. err is non-nil only when restic
// could not be run at all or ctx ended; a non-zero exit is in result.exit.
func (r *restic) run(ctx context.Context, args ...string) (*result, error) {
	cmd := exec.CommandContext(ctx, r.bin, append([]string{"--no-cache"}, args...)...)
	cmd.Env = r.env()
	cmd.Dir = r.tmp
	var stdout, stderr limitedBuffer
	stdout.max, stderr.max = 4<<20, 64<<10
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// Ask restic to stop cleanly (it removes its lock); kill it if it lingers.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	res := &result{stdout: stdout.Bytes(), stderr: stderr.Bytes()}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		res.exit = exit.ExitCode()
	default:
		step := ""
		for _, a := range args {
			if !strings.HasPrefix(a, "-") {
				step = a
				break
			}
		}
		return nil, &app.FailureError{Code: "retention.tool_failed", Params: map[string]any{"tool": "restic", "step": step},
			Step: step, Err: err}
	}
	return res, nil
}

// env is the caller's environment without any RESTIC_* that could point
// restic elsewhere, plus the repository, the password file, and TMPDIR and
// the cache home inside the run's temporary directory.
func (r *restic) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RESTIC_") && !strings.HasPrefix(kv, "TMPDIR=") && !strings.HasPrefix(kv, "XDG_CACHE_HOME=") {
			env = append(env, kv)
		}
	}
	return append(env, "RESTIC_REPOSITORY="+r.repo, "RESTIC_PASSWORD_FILE="+r.passwordFile,
		"TMPDIR="+r.tmp, "XDG_CACHE_HOME="+filepath.Join(r.tmp, "cache"), "RESTIC_PROGRESS_FPS=0.2")
}

// snapshotIDs lists the full ids of the repository's snapshots. It takes
// no lock: listing is a read and must not wait for a backup.
func (r *restic) snapshotIDs(ctx context.Context) ([]string, error) {
	res, err := r.run(ctx, "--no-lock", "snapshots", "--json")
	if err != nil {
		return nil, err
	}
	if res.exit != 0 {
		return nil, r.failure("snapshots", res)
	}
	var snaps []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(res.stdout, &snaps); err != nil {
		return nil, &app.FailureError{Code: "retention.tool_failed", Params: map[string]any{"tool": "restic", "step": "snapshots"},
			Step: "snapshots", Err: fmt.Errorf("reading restic's snapshot list: %w", err)}
	}
	ids := make([]string, len(snaps))
	for i, s := range snaps {
		ids[i] = s.ID
	}
	return ids, nil
}

// forget runs `restic forget --prune` with the policy's flags.
func (r *restic) forget(ctx context.Context, p Policy) (*result, error) {
	return r.run(ctx, append([]string{"forget", "--prune"}, ResticArgs(p)...)...)
}

// unlock removes stale locks only (restic's default): those of processes
// on this host that are gone, and any older than 30 minutes without a
// refresh. A live backup's lock stays.
func (r *restic) unlock(ctx context.Context) {
	_, _ = r.run(ctx, "unlock")
}

// locked reports whether restic refused because another process holds a
// lock on the repository.
func locked(res *result) bool {
	return strings.Contains(string(res.stderr), "repository is already locked")
}

// failure classifies a restic run that failed.
func (r *restic) failure(step string, res *result) error {
	msg := tail(res.stderr)
	params := map[string]any{"exitCode": res.exit}
	switch {
	case strings.Contains(msg, "wrong password or no key found"):
		return app.Fail("restic.wrong_password", params, fmt.Errorf("the appliance's password for this repository does not open it: %s", msg))
	case strings.Contains(msg, "unable to open config file"), strings.Contains(msg, "Is there a repository"),
		strings.Contains(msg, "repository does not exist"):
		return app.Fail("restic.repository_missing", params, fmt.Errorf("restic found no repository: %s", msg))
	case strings.Contains(msg, "no space left on device"):
		return app.Fail("storage.full", params, fmt.Errorf("restic %s: %s", step, msg))
	case locked(res):
		return app.Fail("retention.repository_locked", map[string]any{"holder": "restic lock"}, fmt.Errorf("restic %s: %s", step, msg))
	}
	return &app.FailureError{Code: "retention.tool_failed", Params: map[string]any{"tool": "restic", "step": step}, Step: step,
		Err: fmt.Errorf("restic %s exited with %d: %s", step, res.exit, msg)}
}

// dirSize sums the sizes of the regular files under dir.
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a file removed meanwhile
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// tail returns the last non-blank lines of restic's output, for failure
// details.
func tail(b []byte) string {
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	return strings.Join(lines, "\n")
}

// limitedBuffer keeps the first max bytes written and discards the rest.
type limitedBuffer struct {
	bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.Len(); room > 0 {
		l.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
