package update

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"backstop/app"
)

// maxAsset bounds a downloaded release file (the binary is far smaller).
const maxAsset = 512 << 20

// UpdaterOptions configure an Updater. Zero values take the defaults named
// on each field.
type UpdaterOptions struct {
	APIURL     string // GitHub REST API base, as for the Checker
	Repository string // owner/name
	Version    string // running version; default app.Version

	Key       ed25519.PublicKey // release key; default ReleaseKey()
	ExePath   string            // the binary to replace; default os.Executable()
	AssetName string            // default AssetName()

	// Ready reports whether this process is ready (what /readyz answers).
	// A new version clears the maintenance record once it is ready.
	Ready func(ctx context.Context) bool
	// Restart is called once the new binary is in place and the record says
	// restarting: it starts the watchdog (run from exe.previous, see
	// docs/updates.md) and ends the process so that the supervisor starts
	// the new binary. Required for an update to run.
	Restart func(exePath string) error

	HTTPClient *http.Client  // default: a client with a 10 min timeout
	Now        app.Clock     // default app.SystemClock
	Logger     *slog.Logger  // default slog.Default()
	PollEvery  time.Duration // how often the record is read; default 5 s
}

// Updater is the component that carries out an announced update: at
// startsAt it downloads the release asset, verifies it (Verify), replaces
// the binary (Replace) and calls Restart, storing each phase in the
// maintenance record. At Open it also settles what a restart left behind:
// the new version clears the record once ready; the old version finding
// restarting knows the watchdog rolled the update back and records failed.
type Updater struct {
	maint app.MaintenanceService
	opts  UpdaterOptions
	gh    *githubClient
	log   *slog.Logger

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewUpdater returns a stopped Updater.
func NewUpdater(maint app.MaintenanceService, opts UpdaterOptions) *Updater {
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 10 * time.Minute}
	}
	if opts.Now == nil {
		opts.Now = app.SystemClock
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Version == "" {
		opts.Version = app.Version
	}
	if opts.AssetName == "" {
		opts.AssetName = AssetName()
	}
	if opts.PollEvery <= 0 {
		opts.PollEvery = 5 * time.Second
	}
	return &Updater{maint: maint, opts: opts, log: opts.Logger.With("component", "updater"),
		gh: &githubClient{apiURL: strings.TrimRight(opts.APIURL, "/"), repository: opts.Repository,
			userAgent: "backstop/" + opts.Version, http: opts.HTTPClient, now: opts.Now}}
}

// Open starts the updater's goroutine and returns at once.
func (u *Updater) Open() error {
	if u.cancel != nil {
		return errors.New("update: updater already open")
	}
	ctx, cancel := context.WithCancel(context.Background())
	u.cancel = cancel
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		u.run(ctx)
	}()
	return nil
}

// Close stops the updater and waits. An update in progress is abandoned
// before the binary is replaced, and its record says failed.
func (u *Updater) Close() error {
	if u.cancel != nil {
		u.cancel()
	}
	u.wg.Wait()
	return nil
}

func (u *Updater) run(ctx context.Context) {
	t := time.NewTicker(u.opts.PollEvery)
	defer t.Stop()
	for {
		if u.Poll(ctx) {
			return // restarting: this process is about to end
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Poll reads the record once and acts on it; it reports whether Restart
// was called. Tests call it directly.
func (u *Updater) Poll(ctx context.Context) bool {
	m, err := u.maint.Maintenance(ctx)
	if app.ErrorCode(err) == app.ENOTFOUND {
		return false
	} else if err != nil {
		if ctx.Err() == nil {
			u.log.Error("reading the maintenance record failed", slog.Any("error", err))
		}
		return false
	}
	switch {
	case m.Phase == app.MaintenanceRestarting && u.opts.Version == m.TargetVersion:
		if u.opts.Ready != nil && u.opts.Ready(ctx) {
			u.log.Info("update done", slog.String("version", u.opts.Version), slog.String("from", m.FromVersion))
			u.store(ctx, func(cur *app.Maintenance) (*app.Maintenance, error) { return nil, nil })
		}
	case m.Phase == app.MaintenanceRestarting:
		msg := fmt.Sprintf("rolled back: version %s was not ready in time; %s was put back", m.TargetVersion, u.opts.Version)
		u.log.Error("update rolled back", slog.String("target", m.TargetVersion))
		u.fail(ctx, msg)
	case m.Phase == app.MaintenanceAnnounced && (m.StartsAt == nil || !u.opts.Now().Before(m.StartsAt.Time)):
		return u.apply(ctx, m.TargetVersion)
	case m.Phase != app.MaintenanceAnnounced && m.Phase != app.MaintenanceFailed:
		// A phase before restarting with no process working on it: this
		// process started while an earlier one was updating.
		u.fail(ctx, "interrupted during "+m.Phase+"; the binary was not replaced")
	}
	return false
}

// apply runs one update; every failure ends in phase failed with the error.
func (u *Updater) apply(ctx context.Context, target string) bool {
	u.log.Info("update starting", slog.String("target", target))
	if u.opts.Restart == nil {
		u.fail(ctx, "this process cannot restart itself")
		return false
	}
	u.phase(ctx, app.MaintenanceDownloading)
	asset, sums, sig, err := u.download(ctx, "v"+target)
	if err != nil {
		u.fail(ctx, err.Error())
		return false
	}
	u.phase(ctx, app.MaintenanceVerifying)
	key := u.opts.Key
	if key == nil {
		if key, err = ReleaseKey(); err != nil {
			u.fail(ctx, err.Error())
			return false
		}
	}
	if err := Verify(asset, sums, sig, key, u.opts.AssetName); err != nil {
		u.fail(ctx, err.Error())
		return false
	}
	u.phase(ctx, app.MaintenanceApplying)
	exe := u.opts.ExePath
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			u.fail(ctx, err.Error())
			return false
		}
	}
	if err := Replace(exe, asset); err != nil {
		u.fail(ctx, err.Error())
		return false
	}
	u.phase(ctx, app.MaintenanceRestarting)
	if err := u.opts.Restart(exe); err != nil {
		if rerr := Rollback(exe); rerr != nil {
			err = fmt.Errorf("%w; rollback: %w", err, rerr)
		}
		u.fail(ctx, "restart: "+err.Error())
		return false
	}
	return true
}

// download fetches the release by tag and its asset, SHA256SUMS and
// SHA256SUMS.sig.
func (u *Updater) download(ctx context.Context, tag string) (asset, sums, sig []byte, err error) {
	owner, name, _ := strings.Cut(u.gh.repository, "/")
	body, o := u.gh.get(ctx, "/repos/"+url.PathEscape(owner)+"/"+url.PathEscape(name)+"/releases/tags/"+url.PathEscape(tag))
	if o.err != "" {
		return nil, nil, nil, fmt.Errorf("update: release %s: %s (%s)", tag, o.err, o.detail)
	}
	var rel struct {
		Assets []struct {
			Name string `json:"name"`
			URL  string `json:"browser_download_url"`
		} `json:"assets"`
	}
	if err := json.Unmarshal(body, &rel); err != nil {
		return nil, nil, nil, fmt.Errorf("update: release %s: %w", tag, err)
	}
	urls := map[string]string{}
	for _, a := range rel.Assets {
		urls[a.Name] = a.URL
	}
	files := make([][]byte, 3)
	for i, n := range []string{u.opts.AssetName, SumsName, SignatureName} {
		if urls[n] == "" {
			return nil, nil, nil, fmt.Errorf("update: release %s has no asset %s", tag, n)
		}
		if files[i], err = u.fetch(ctx, urls[n]); err != nil {
			return nil, nil, nil, fmt.Errorf("update: downloading %s: %w", n, err)
		}
	}
	return files[0], files[1], files[2], nil
}

func (u *Updater) fetch(ctx context.Context, rawURL string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/octet-stream")
	req.Header.Set("User-Agent", u.gh.userAgent)
	resp, err := u.opts.HTTPClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s", resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAsset+1))
	if err == nil && len(b) > maxAsset {
		err = errors.New("larger than 512 MiB")
	}
	return b, err
}

func (u *Updater) phase(ctx context.Context, phase string) {
	u.log.Info("update phase", slog.String("phase", phase))
	u.store(ctx, func(m *app.Maintenance) (*app.Maintenance, error) {
		if m == nil {
			return nil, app.Errorf(app.ECONFLICT, "the update was cancelled")
		}
		m.Phase, m.Error = phase, nil
		return m, nil
	})
}

func (u *Updater) fail(ctx context.Context, msg string) {
	u.log.Error("update failed", slog.String("error", msg))
	u.store(ctx, func(m *app.Maintenance) (*app.Maintenance, error) {
		if m == nil {
			return nil, nil
		}
		m.Phase, m.Error = app.MaintenanceFailed, app.Ptr(msg)
		return m, nil
	})
}

func (u *Updater) store(ctx context.Context, fn func(*app.Maintenance) (*app.Maintenance, error)) {
	// The record must be written even while shutting down: a phase left
	// behind would mislead the next start.
	ctx = context.WithoutCancel(ctx)
	if _, err := u.maint.UpdateMaintenance(ctx, fn); err != nil {
		u.log.Error("saving the maintenance record failed", slog.Any("error", err))
	}
}
