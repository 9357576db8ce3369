package retention

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"backstop/app"
	"backstop/app/resticcmd"
)

// restic runs restic against one endpoint's repository as a local
// directory, with the appliance's copy of its password, the way verify
// does. Unlike verify, forget takes restic's exclusive lock: an agent backup
// in progress (which holds a shared lock over the repository server) makes
// it fail at once, and it never deletes anything a running backup may still
// need. The run's temporary directory holds TMPDIR and restic's cache home,
// so nothing is written outside the data directory.
type restic struct{ resticcmd.Repo }

func newRestic(bin, repo, passwordFile, tmp string) *restic {
	return &restic{resticcmd.Repo{Bin: bin, Dir: repo, PasswordFile: passwordFile, Tmp: tmp,
		Flags: []string{"--no-cache"}, WaitDelay: 30 * time.Second, ToolFailure: "retention.tool_failed"}}
}

// result is one finished restic process.
type result = resticcmd.Result

// snapshotIDs lists the full ids of the repository's snapshots. It takes
// no lock: listing is a read and must not wait for a backup.
func (r *restic) snapshotIDs(ctx context.Context) ([]string, error) {
	res, err := r.Run(ctx, "--no-lock", "snapshots", "--json")
	if err != nil {
		return nil, err
	}
	if res.Exit != 0 {
		return nil, r.failure("snapshots", res)
	}
	var snaps []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(res.Stdout, &snaps); err != nil {
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
	return r.Run(ctx, append([]string{"forget", "--prune"}, ResticArgs(p)...)...)
}

// unlock removes stale locks only (restic's default): those of processes
// on this host that are gone, and any older than 30 minutes without a
// refresh. A live backup's lock stays.
func (r *restic) unlock(ctx context.Context) {
	_, _ = r.Run(ctx, "unlock")
}

// locked reports whether restic refused because another process holds a
// lock on the repository.
func locked(res *result) bool {
	return strings.Contains(string(res.Stderr), "repository is already locked")
}

// failure classifies a restic run that failed.
func (r *restic) failure(step string, res *result) error {
	msg := resticcmd.Tail(res.Stderr)
	params := map[string]any{"exitCode": res.Exit}
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
		Err: fmt.Errorf("restic %s exited with %d: %s", step, res.Exit, msg)}
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
