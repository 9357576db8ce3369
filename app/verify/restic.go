package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"backstop/app"
)

// restic runs the restic command line against one endpoint's repository as
// a local directory (not over HTTP), with the appliance's copy of the
// password. Every call passes --no-lock and --no-cache: the repository is
// append-only and only read here, so taking no lock never makes a
// concurrent agent backup fail on our exclusive check lock, and restic
// writes nothing outside the run's temporary directory (its temporary
// check cache goes to TMPDIR, which points there).
type restic struct {
	bin          string
	repo         string
	passwordFile string
	tmp          string // the run's temporary directory
}

// maxOutput bounds what is kept of restic's stdout and stderr: enough for
// the JSON restic prints here and for the last lines of an error.
const maxOutput = 4 << 20

// result is one finished restic process.
type result struct {
	exit   int
	stdout []byte
	stderr []byte
}

// run starts restic with args and waits. err is non-nil only when restic
// could not be run at all (missing binary) or ctx ended; a non-zero exit is
// in result.exit.
func (r *restic) run(ctx context.Context, args ...string) (*result, error) {
	cmd := exec.CommandContext(ctx, r.bin, append([]string{"--no-lock", "--no-cache"}, args...)...)
	cmd.Env = r.env()
	cmd.Dir = r.tmp
	var stdout, stderr limitedBuffer
	stdout.max, stderr.max = maxOutput, 64<<10
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// Ask restic to stop cleanly first; it is killed if it lingers.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
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
		return nil, toolFailed(args[0], err)
	}
	return res, nil
}

// env is the caller's environment without any RESTIC_* that could point
// restic elsewhere, plus the repository, the password file and a TMPDIR and
// cache home inside the run's temporary directory.
func (r *restic) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RESTIC_") && !strings.HasPrefix(kv, "TMPDIR=") && !strings.HasPrefix(kv, "XDG_CACHE_HOME=") {
			env = append(env, kv)
		}
	}
	return append(env, "RESTIC_REPOSITORY="+r.repo, "RESTIC_PASSWORD_FILE="+r.passwordFile,
		"TMPDIR="+r.tmp, "XDG_CACHE_HOME="+filepath.Join(r.tmp, "cache"), "RESTIC_PROGRESS_FPS=1")
}

// snapshotIDs lists the full ids of the repository's snapshots.
func (r *restic) snapshotIDs(ctx context.Context) ([]string, error) {
	res, err := r.run(ctx, "snapshots", "--json")
	if err != nil {
		return nil, err
	}
	if res.exit != 0 {
		return nil, openFailure(res)
	}
	var snaps []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(res.stdout, &snaps); err != nil {
		return nil, toolFailed("snapshots", fmt.Errorf("reading restic's snapshot list: %w", err))
	}
	ids := make([]string, len(snaps))
	for i, s := range snaps {
		ids[i] = s.ID
	}
	return ids, nil
}

// restore restores the given absolute paths of a snapshot under target.
// Paths are escaped: restic reads --include as a pattern, and a file name
// may hold *, ? or [.
func (r *restic) restore(ctx context.Context, snapshotID, target string, paths []string) (*result, error) {
	args := []string{"restore", snapshotID, "--target", target}
	for _, p := range paths {
		args = append(args, "--include", escapePattern(p))
	}
	return r.run(ctx, args...)
}

// check runs restic's check, reading one subset ("n/t") of the pack files.
func (r *restic) check(ctx context.Context, subset string) (*result, error) {
	return r.run(ctx, "check", "--read-data-subset="+subset)
}

// escapePattern makes a path match only itself as a restic include pattern
// (per-component filepath.Match syntax, where a backslash escapes).
func escapePattern(p string) string {
	var b strings.Builder
	for _, c := range p {
		switch c {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// integrityMarkers are what restic prints when data it read is not what the
// repository promised: evidence of damage, not a failure to run.
var integrityMarkers = []string{
	"ciphertext verification failed",
	"does not match",
	"hash mismatch",
	"not found in index",
	"unexpected EOF",
	"repository contains errors",
	"invalid data returned",
}

// reportsDamage reports whether restic's output names an integrity error.
func reportsDamage(res *result) bool {
	out := string(res.stderr) + "\n" + string(res.stdout)
	for _, m := range integrityMarkers {
		if strings.Contains(out, m) {
			return true
		}
	}
	return false
}

// errRepositoryMissing marks a repository restic cannot find: with a
// snapshot on record, that is lost data.
var errRepositoryMissing = errors.New("restic found no repository")

// openFailure classifies a restic run that could not open the repository.
func openFailure(res *result) error {
	msg := tail(res.stderr)
	switch {
	case strings.Contains(msg, "wrong password or no key found"):
		return app.Fail("restic.wrong_password", map[string]any{"exitCode": res.exit},
			fmt.Errorf("the appliance's password for this repository does not open it: %s", msg))
	case strings.Contains(msg, "unable to open config file"), strings.Contains(msg, "Is there a repository"),
		strings.Contains(msg, "repository does not exist"):
		return fmt.Errorf("%w: %s", errRepositoryMissing, msg)
	}
	return toolFailed("snapshots", fmt.Errorf("restic exited with %d: %s", res.exit, msg))
}

// toolFailed is the cause of a verify the appliance could not carry out.
func toolFailed(step string, err error) error {
	return &app.FailureError{Code: "verify.tool_failed", Params: map[string]any{"tool": "restic", "step": step},
		Step: step, Err: err}
}

// tail returns the last non-blank lines of restic's output, for failure
// details (a blank line would end the details at redaction).
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

// limitedBuffer keeps the first max bytes written and discards the rest, so
// a chatty restic cannot exhaust memory.
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
