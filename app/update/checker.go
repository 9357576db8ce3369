// Package update is the update checker: it asks GitHub's releases API for
// the newest release of the configured channel and caches the answer through
// app.VersionCheckService, from which the status call builds its version
// object without ever waiting for the network.
//
// The check is off on a fresh installation (SPEC rule 1). It runs only while
// settings.updateCheck is on, and then:
//
//   - within a minute of being turned on or of a channel change (settings are
//     polled every 15 s, so the delay is at most one poll interval);
//   - again a day after the last successful check;
//   - an hour after a failed check (network trouble is usually passing);
//   - never before the time a rate-limit answer allows (Retry-After, or
//     X-RateLimit-Reset when the remaining count is 0, else one minute).
package update

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"backstop/app"
)

// Options configure a Checker. Zero durations take the defaults named on
// each field.
type Options struct {
	APIURL     string // GitHub REST API base, config update.api_url
	Repository string // owner/name, config update.repository
	Version    string // running version, sent as User-Agent backstop/<version>; default app.Version

	HTTPClient *http.Client  // default: a plain client with a 15 s timeout
	Now        app.Clock     // default app.SystemClock
	Logger     *slog.Logger  // default slog.Default()
	PollEvery  time.Duration // how often settings are read; default 15 s
	CheckEvery time.Duration // between successful checks; default 24 h
	RetryEvery time.Duration // after a failed check; default 1 h
}

// Checker is the update-check component. Open starts its goroutine; Close
// stops it and waits.
type Checker struct {
	settings app.SettingsService
	versions app.VersionCheckService
	opts     Options
	gh       *githubClient
	log      *slog.Logger

	cancel context.CancelFunc
	wg     sync.WaitGroup

	// Owned by the loop goroutine (or by a test calling poll directly).
	seenChannel   string    // channel read at the previous poll
	channelSwitch bool      // the channel changed and has not been checked since
	notBefore     time.Time // rate limit: no request before this time
}

// New returns a stopped Checker reading settings and writing the cache.
func New(settings app.SettingsService, versions app.VersionCheckService, opts Options) *Checker {
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 15 * time.Second}
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
	if opts.PollEvery <= 0 {
		opts.PollEvery = 15 * time.Second
	}
	if opts.CheckEvery <= 0 {
		opts.CheckEvery = 24 * time.Hour
	}
	if opts.RetryEvery <= 0 {
		opts.RetryEvery = time.Hour
	}
	return &Checker{
		settings: settings, versions: versions, opts: opts,
		log: opts.Logger.With("component", "update"),
		gh: &githubClient{
			apiURL: strings.TrimRight(opts.APIURL, "/"), repository: opts.Repository,
			userAgent: "backstop/" + opts.Version, http: opts.HTTPClient, now: opts.Now,
		},
	}
}

// Open starts polling: once at once, then every PollEvery. It returns
// immediately; no request is made while the check is off.
func (c *Checker) Open() error {
	if c.cancel != nil {
		return errors.New("update: checker already open")
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.run(ctx)
	}()
	return nil
}

// Close stops the checker and waits for it. A request in flight is
// abandoned and its (absent) result is not stored.
func (c *Checker) Close() error {
	if c.cancel != nil {
		c.cancel()
	}
	c.wg.Wait()
	return nil
}

func (c *Checker) run(ctx context.Context) {
	t := time.NewTicker(c.opts.PollEvery)
	defer t.Stop()
	for {
		c.poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// poll reads the settings and the cache and runs a check when one is due.
// It reports whether a request was made.
func (c *Checker) poll(ctx context.Context) bool {
	s, err := c.settings.Settings(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Error("reading settings failed", slog.Any("error", err))
		}
		return false
	}
	if c.seenChannel != "" && s.UpdateChannel != c.seenChannel {
		c.channelSwitch = true
	}
	c.seenChannel = s.UpdateChannel
	if !s.UpdateCheck {
		return false
	}
	last, err := c.versions.VersionCheck(ctx, s.UpdateChannel)
	if err != nil && app.ErrorCode(err) != app.ENOTFOUND {
		if ctx.Err() == nil {
			c.log.Error("reading the update-check cache failed", slog.Any("error", err))
		}
		return false
	}
	if !c.due(c.opts.Now(), s, last) {
		return false
	}
	c.check(ctx, s.UpdateChannel)
	return true
}

// due decides whether a check of the settings' channel runs at now, given
// the cached result of that channel (nil when there is none).
func (c *Checker) due(now time.Time, s *app.Settings, last *app.VersionCheck) bool {
	switch {
	case !s.UpdateCheck, now.Before(c.notBefore):
		return false
	case c.channelSwitch, last == nil:
		return true
	case s.UpdateCheckEnabledAt != nil && last.CheckedAt.Before(*s.UpdateCheckEnabledAt):
		return true // turned on (again) since the cached check
	case last.CheckedAt.After(now):
		return true // the clock went back; do not wait for it to catch up
	case last.CheckError != "":
		return !now.Before(last.CheckedAt.Add(c.opts.RetryEvery))
	}
	return !now.Before(last.CheckedAt.Add(c.opts.CheckEvery))
}

// check asks GitHub and stores the result for the channel.
func (c *Checker) check(ctx context.Context, channel string) {
	o := c.gh.latest(ctx, channel)
	if ctx.Err() != nil {
		return // shutting down: an interrupted request is not a failed check
	}
	c.channelSwitch = false
	if !o.retryAt.IsZero() {
		c.notBefore = o.retryAt
	}
	logOutcome(c.log, channel, o)
	vc := &app.VersionCheck{Channel: channel, CheckedAt: c.opts.Now(), CheckError: o.err}
	if r := o.release; r != nil {
		vc.LatestTag, vc.Latest, vc.ReleaseURL = r.TagName, strings.TrimPrefix(r.TagName, "v"), r.HTMLURL
		if r.PublishedAt != nil {
			vc.PublishedAt = app.Ptr(r.PublishedAt.UTC())
		}
		c.log.Info("update check done", slog.String("channel", channel), slog.String("latest", vc.Latest),
			slog.String("running", c.opts.Version))
	}
	if err := c.versions.SaveVersionCheck(ctx, vc); err != nil && ctx.Err() == nil {
		c.log.Error("saving the update check failed", slog.Any("error", err))
	}
}
