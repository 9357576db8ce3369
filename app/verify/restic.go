package verify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"backstop/app"
	"backstop/app/resticcmd"
)

// restic runs restic against one endpoint's repository as a local
// directory (not over HTTP), with the appliance's copy of the password.
// Every call passes --no-lock and --no-cache: the repository is
// append-only and only read here, so taking no lock never makes a
// concurrent agent backup fail on our exclusive check lock, and restic
// writes nothing outside the run's temporary directory (its temporary
// check cache goes to TMPDIR, which points there).
type restic struct{ resticcmd.Repo }

func newRestic(bin, repo, passwordFile, tmp string) *restic {
	return &restic{resticcmd.Repo{Bin: bin, Dir: repo, PasswordFile: passwordFile, Tmp: tmp,
		Flags: []string{"--no-lock", "--no-cache"}, WaitDelay: 10 * time.Second, ToolFailure: "verify.tool_failed"}}
}

// result is one finished restic process.
type result = resticcmd.Result

// snapshotIDs lists the full ids of the repository's snapshots.
func (r *restic) snapshotIDs(ctx context.Context) ([]string, error) {
	res, err := r.Run(ctx, "snapshots", "--json")
	if err != nil {
		return nil, err
	}
	if res.Exit != 0 {
		return nil, openFailure(res)
	}
	var snaps []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(res.Stdout, &snaps); err != nil {
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
	return r.Run(ctx, args...)
}

// check runs restic's check, reading one subset ("n/t") of the pack files.
func (r *restic) check(ctx context.Context, subset string) (*result, error) {
	return r.Run(ctx, "check", "--read-data-subset="+subset)
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
	out := string(res.Stderr) + "\n" + string(res.Stdout)
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
	msg := resticcmd.Tail(res.Stderr)
	switch {
	case strings.Contains(msg, "wrong password or no key found"):
		return app.Fail("restic.wrong_password", map[string]any{"exitCode": res.Exit},
			fmt.Errorf("the appliance's password for this repository does not open it: %s", msg))
	case strings.Contains(msg, "unable to open config file"), strings.Contains(msg, "Is there a repository"),
		strings.Contains(msg, "repository does not exist"):
		return fmt.Errorf("%w: %s", errRepositoryMissing, msg)
	}
	return toolFailed("snapshots", fmt.Errorf("restic exited with %d: %s", res.Exit, msg))
}

// toolFailed is the cause of a verify the appliance could not carry out.
func toolFailed(step string, err error) error {
	return &app.FailureError{Code: "verify.tool_failed", Params: map[string]any{"tool": "restic", "step": step},
		Step: step, Err: err}
}
