package agent

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Self-update (CONTRACT §9, §15): the agent asks GET /agent/v1/update, and
// when the appliance offers another build it downloads it from
// /install/bin/, checks it against /install/SHA256SUMS and the offer's
// sha256, puts it in place of its own executable with one rename, and ends
// with ErrRestart so its service manager (systemd Restart=always, launchd
// KeepAlive) starts the new build, which reports its version at its first
// heartbeat.

// ErrRestart is returned by Run once the executable has been replaced by a
// new build: the process should exit with RestartExitCode and be started
// again by its service manager.
var ErrRestart = errors.New("agent updated itself; restart to run the new build")

// RestartExitCode is the exit status after a self-update (EX_TEMPFAIL):
// not 0, so that a service manager restarting only on failure restarts too.
const RestartExitCode = 75

// DefaultUpdateEvery is how often the daemon asks for a new build (and once
// at start).
const DefaultUpdateEvery = time.Hour

// maxAgentBinary bounds a download: an agent build is tens of MiB.
const maxAgentBinary = 512 << 20

var (
	installBinPath = regexp.MustCompile(`^/install/bin/([A-Za-z0-9][A-Za-z0-9._-]{0,127})$`)
	hexSHA256      = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// SelfUpdate asks the appliance for another build and, when one is offered
// and checks out, replaces the executable with it and returns its version
// and true. The running process keeps running the old build until it exits.
// On any error the executable is left as it was (a partly written
// <exe>.new is removed). Nothing offered (up to date, or pinned) is
// ("", false, nil).
func (a *Agent) SelfUpdate(ctx context.Context) (string, bool, error) {
	offer, err := a.Client.Update(ctx)
	if err != nil {
		return "", false, fmt.Errorf("update check: %w", err)
	}
	if !offer.Available {
		return "", false, nil
	}
	m := installBinPath.FindStringSubmatch(offer.URL)
	want := strings.ToLower(offer.SHA256)
	if m == nil || !hexSHA256.MatchString(want) {
		return "", false, fmt.Errorf("update offer refused: url %q and sha256 %q are not an /install/bin/ file and a SHA-256", offer.URL, offer.SHA256)
	}
	name := m[1]
	base, err := url.Parse(strings.TrimRight(a.Client.Server, "/"))
	if err != nil {
		return "", false, err
	}
	hc := &http.Client{} // no overall timeout: ctx bounds the download
	if a.Client.HTTP != nil {
		hc.Transport = a.Client.HTTP.Transport
	}

	listed, err := fetchSums(ctx, hc, base.JoinPath("/install/SHA256SUMS").String())
	if err != nil {
		return "", false, err
	}
	if got, ok := listed[name]; !ok {
		return "", false, fmt.Errorf("update refused: /install/SHA256SUMS does not list %s", name)
	} else if got != want {
		return "", false, fmt.Errorf("update refused: /install/SHA256SUMS gives %s for %s, the update offer %s", got, name, want)
	}

	exe := a.Executable
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return "", false, err
		}
	}
	if resolved, err := filepath.EvalSymlinks(exe); err == nil {
		exe = resolved // replace the file, not a symlink to it
	}
	if err := downloadVerified(ctx, hc, base.JoinPath("/install/bin", name).String(), want, exe+".new"); err != nil {
		return "", false, err
	}
	if err := os.Rename(exe+".new", exe); err != nil {
		os.Remove(exe + ".new")
		return "", false, fmt.Errorf("update: replace %s: %w", exe, err)
	}
	syncDir(filepath.Dir(exe))
	return offer.Version, true, nil
}

// fetchSums reads a SHA256SUMS file: "<hex>  <name>" (or "<hex> *<name>").
func fetchSums(ctx context.Context, hc *http.Client, u string) (map[string]string, error) {
	resp, err := get(ctx, hc, u)
	if err != nil {
		return nil, fmt.Errorf("update: SHA256SUMS: %w", err)
	}
	defer resp.Body.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 1<<20))
	for sc.Scan() {
		sum, name, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		if ok && hexSHA256.MatchString(strings.ToLower(sum)) {
			out[strings.TrimPrefix(strings.TrimSpace(name), "*")] = strings.ToLower(sum)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("update: SHA256SUMS: %w", err)
	}
	return out, nil
}

// downloadVerified writes u to path (mode 0755, fsynced) when its SHA-256
// is want; otherwise it leaves no file.
func downloadVerified(ctx context.Context, hc *http.Client, u, want, path string) (err error) {
	resp, err := get(ctx, hc, u)
	if err != nil {
		return fmt.Errorf("update: download: %w", err)
	}
	defer resp.Body.Close()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o700)
	if err != nil {
		return fmt.Errorf("update: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(path)
		}
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(resp.Body, maxAgentBinary+1))
	if err != nil {
		return fmt.Errorf("update: download: %w", err)
	}
	if n > maxAgentBinary {
		return fmt.Errorf("update: download larger than %d MiB", maxAgentBinary>>20)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("update refused: the download's SHA-256 is %s, not %s", got, want)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("update: %w", err)
	}
	if err = f.Chmod(0o755); err != nil {
		return fmt.Errorf("update: %w", err)
	}
	if err = f.Close(); err != nil {
		os.Remove(path)
		return fmt.Errorf("update: %w", err)
	}
	return nil
}

func get(ctx context.Context, hc *http.Client, u string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "backstop-agent/"+Version)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return resp, nil
}

// syncDir makes a rename in dir durable; failure only weakens durability.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// updateEvery is the pause between update checks; 0 is never.
func (a *Agent) updateEvery() time.Duration {
	switch {
	case a.UpdateEvery < 0:
		return 0
	case a.UpdateEvery == 0:
		return DefaultUpdateEvery
	}
	return a.UpdateEvery
}

// tryUpdate runs one update check for the daemon and reports whether the
// executable was replaced.
func (a *Agent) tryUpdate(ctx context.Context) bool {
	uctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	version, ok, err := a.SelfUpdate(uctx)
	if err != nil {
		a.Logger.Warn("self-update failed; this build keeps running", slog.Any("error", err))
		return false
	}
	if ok {
		a.Logger.Info("agent updated itself; exiting so the service manager starts the new build",
			slog.String("from", Version), slog.String("to", version))
	}
	return ok
}
