// Package resticcmd runs the restic command line on the appliance against
// one endpoint's repository directory, with the appliance's copy of its
// password: verify runs read it, retention prunes it. restic writes nothing
// outside the run's temporary directory.
package resticcmd

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"backstop/app"
)

// Repo is one repository as the appliance runs restic on it.
type Repo struct {
	Bin          string
	Dir          string // the repository directory
	PasswordFile string
	Tmp          string // the run's temporary directory: TMPDIR, cache home, working directory
	// Flags come before every command's arguments (e.g. --no-lock).
	Flags []string
	// WaitDelay is how long restic may take to stop after SIGTERM before
	// it is killed, when the context ends.
	WaitDelay time.Duration
	// ToolFailure is the failure code when restic cannot be run at all.
	ToolFailure string
}

// MaxOutput bounds what is kept of restic's stdout: enough for the JSON
// restic prints here. Of stderr the first 64 KiB are kept.
const MaxOutput = 4 << 20

// Result is one finished restic process.
type Result struct {
	Exit   int
	Stdout []byte
	Stderr []byte
}

// Run starts restic with args and waits. err is non-nil only when restic
// could not be run at all (an *app.FailureError with r.ToolFailure) or ctx
// ended; a non-zero exit is in Result.Exit.
func (r *Repo) Run(ctx context.Context, args ...string) (*Result, error) {
	cmd := exec.CommandContext(ctx, r.Bin, append(append([]string{}, r.Flags...), args...)...)
	cmd.Env = r.Env()
	cmd.Dir = r.Tmp
	stdout, stderr := &limitedBuffer{max: MaxOutput}, &limitedBuffer{max: 64 << 10}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// Ask restic to stop cleanly (it removes its lock); kill it if it lingers.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = r.WaitDelay
	err := cmd.Run()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	res := &Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		res.Exit = exit.ExitCode()
	default:
		step := Command(args)
		return nil, &app.FailureError{Code: r.ToolFailure, Params: map[string]any{"tool": "restic", "step": step},
			Step: step, Err: err}
	}
	return res, nil
}

// Command is the restic command among args: the first that is not a flag.
func Command(args []string) string {
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			return a
		}
	}
	return ""
}

// Env is the caller's environment without any RESTIC_* that could point
// restic elsewhere, plus the repository, the password file, and TMPDIR and
// the cache home inside the run's temporary directory.
func (r *Repo) Env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RESTIC_") && !strings.HasPrefix(kv, "TMPDIR=") && !strings.HasPrefix(kv, "XDG_CACHE_HOME=") {
			env = append(env, kv)
		}
	}
	return append(env, "RESTIC_REPOSITORY="+r.Dir, "RESTIC_PASSWORD_FILE="+r.PasswordFile,
		"TMPDIR="+r.Tmp, "XDG_CACHE_HOME="+filepath.Join(r.Tmp, "cache"), "RESTIC_PROGRESS_FPS=1")
}

// Tail returns the last non-blank lines of restic's output, for failure
// details (a blank line would end the details at redaction).
func Tail(b []byte) string {
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

// RemoveStale removes the temporary directories dir/prefix* that a
// crashed run left behind. Call it before the runner starts.
func RemoveStale(dir, prefix string) error {
	dirs, err := filepath.Glob(filepath.Join(dir, prefix+"*"))
	if err != nil {
		return err
	}
	for _, d := range dirs {
		if err := os.RemoveAll(d); err != nil {
			return err
		}
	}
	return nil
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
