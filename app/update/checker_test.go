package update

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/update/githubtest"
	"backstop/store"
)

const testRepo = "backstop-dev/backstop"

// clock is a manual clock shared by the checker, the store and the fake.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }
func newClock() *clock               { return &clock{t: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)} }
func day(n int) time.Time            { return time.Date(2026, 1, n, 12, 0, 0, 0, time.UTC) }
func rel(tag string, n int) githubtest.Release {
	return githubtest.Release{Tag: tag, CreatedAt: day(n), PublishedAt: day(n).Add(time.Hour)}
}

// countingSettings counts settings reads, so a test can wait for polls.
type countingSettings struct {
	app.SettingsService
	reads atomic.Int64
}

func (c *countingSettings) Settings(ctx context.Context) (*app.Settings, error) {
	c.reads.Add(1)
	return c.SettingsService.Settings(ctx)
}

type fixture struct {
	db    *store.DB
	clk   *clock
	gh    *githubtest.Server
	c     *Checker
	reads *countingSettings
}

func newFixture(t *testing.T, releases ...githubtest.Release) *fixture {
	t.Helper()
	clk := newClock()
	db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "backstop.db"))
	if err != nil {
		t.Fatal(err)
	}
	db.Now = clk.Now
	t.Cleanup(func() { db.Close() })
	gh := githubtest.New(testRepo, clk.Now, releases...)
	t.Cleanup(gh.Close)
	reads := &countingSettings{SettingsService: db}
	c := New(reads, db, Options{
		APIURL: gh.URL, Repository: testRepo, Version: "1.2.0", Now: clk.Now, PollEvery: 5 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	return &fixture{db: db, clk: clk, gh: gh, c: c, reads: reads}
}

// setCheck changes the settings the way PATCH /api/v1/settings does.
func (f *fixture) setCheck(t *testing.T, on bool, channel string) {
	t.Helper()
	now := f.clk.Now()
	_, err := f.db.UpdateSettings(context.Background(), func(s *app.Settings) error {
		if on && !s.UpdateCheck {
			s.UpdateCheckEnabledAt = &now
		}
		s.UpdateCheck, s.UpdateChannel = on, channel
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// status is the version object the status call would show now.
func (f *fixture) status(t *testing.T) app.VersionInfo {
	t.Helper()
	s, err := f.db.Settings(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.db.VersionCheck(context.Background(), s.UpdateChannel)
	if err != nil && app.ErrorCode(err) != app.ENOTFOUND {
		t.Fatal(err)
	}
	return app.BuildVersionInfo("1.2.0", s, c)
}

func (f *fixture) poll(t *testing.T) bool {
	t.Helper()
	return f.c.poll(context.Background())
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestDisabledByDefaultMakesNoRequest(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rel("v1.3.0", 1))
	if err := f.c.Open(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "several polls", func() bool { return f.reads.reads.Load() >= 5 })
	f.c.Close()
	if n := len(f.gh.Requests()); n != 0 {
		t.Fatalf("fresh installation made %d requests to GitHub, want none", n)
	}
	if v := f.status(t); v.UpdateCheck != app.UpdateCheckDisabled || v.Latest != nil || v.UpdateAvailable != nil {
		t.Fatalf("fresh status = %+v, want disabled with nothing known", v)
	}
}

func TestTurningOnChecksAtTheNextPoll(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rel("v1.1.0", 1), rel("v1.3.0", 5))
	if err := f.c.Open(); err != nil {
		t.Fatal(err)
	}
	defer f.c.Close()
	waitFor(t, "a poll while off", func() bool { return f.reads.reads.Load() >= 2 })
	f.gh.Hold() // so that the pending state can be seen
	f.setCheck(t, true, "stable")
	waitFor(t, "the request", func() bool { return len(f.gh.Requests()) == 1 })
	if v := f.status(t); v.UpdateCheck != app.UpdateCheckPending {
		t.Fatalf("while the check runs: updateCheck = %s, want pending", v.UpdateCheck)
	}
	f.gh.Release()
	waitFor(t, "the check", func() bool { return f.status(t).UpdateCheck == app.UpdateCheckOK })
	v := f.status(t)
	if *v.LatestTag != "v1.3.0" || *v.Latest != "1.3.0" || *v.ReleaseURL != f.gh.ReleaseURL("v1.3.0") ||
		!v.PublishedAt.Equal(day(5).Add(time.Hour)) || v.CheckError != nil || v.UpdateAvailable == nil || !*v.UpdateAvailable {
		t.Fatalf("version after check = %+v", v)
	}
	reqs := f.gh.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want exactly 1 (the cache must stop repeats)", len(reqs))
	}
	r := reqs[0]
	if r.URL.Path != "/repos/backstop-dev/backstop/releases/latest" || r.Header.Get("Accept") != "application/vnd.github+json" ||
		r.Header.Get("X-GitHub-Api-Version") != "2022-11-28" || r.Header.Get("User-Agent") != "backstop/1.2.0" {
		t.Fatalf("request %s with headers %v", r.URL, r.Header)
	}
}

func TestDefaultPollKeepsTheMinutePromise(t *testing.T) {
	t.Parallel()
	c := New(nil, nil, Options{APIURL: "http://127.0.0.1:1", Repository: testRepo})
	if c.opts.PollEvery > 30*time.Second || c.opts.CheckEvery != 24*time.Hour || c.opts.HTTPClient.Timeout != 15*time.Second {
		t.Fatalf("defaults: poll %s, check %s, timeout %s", c.opts.PollEvery, c.opts.CheckEvery, c.opts.HTTPClient.Timeout)
	}
}

func TestChecksDailyAfterSuccess(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rel("v1.2.0", 1))
	f.setCheck(t, true, "stable")
	if !f.poll(t) {
		t.Fatal("first poll after turning on made no request")
	}
	if v := f.status(t); v.UpdateCheck != app.UpdateCheckOK || *v.UpdateAvailable {
		t.Fatalf("same version: %+v, want ok and no update", v)
	}
	f.clk.Add(23 * time.Hour)
	if f.poll(t) {
		t.Fatal("checked again within a day")
	}
	f.gh.SetReleases(rel("v1.2.0", 1), rel("v1.2.1", 2))
	f.clk.Add(time.Hour)
	if !f.poll(t) {
		t.Fatal("no check a day after the last")
	}
	if v := f.status(t); *v.Latest != "1.2.1" || !*v.UpdateAvailable || !v.CheckedAt.Equal(f.clk.Now()) {
		t.Fatalf("after the daily check: %+v", v)
	}
}

func TestTurnOffAndOnAgainRechecks(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rel("v1.2.0", 1))
	f.setCheck(t, true, "stable")
	f.poll(t)
	f.clk.Add(time.Minute)
	f.setCheck(t, false, "stable")
	if f.poll(t) {
		t.Fatal("checked while off")
	}
	f.clk.Add(time.Minute)
	f.setCheck(t, true, "stable")
	if v := f.status(t); v.UpdateCheck != app.UpdateCheckPending {
		t.Fatalf("turned on again: %s, want pending until a new check", v.UpdateCheck)
	}
	if !f.poll(t) {
		t.Fatal("turning the check on again did not re-check")
	}
}

func TestRateLimitedRespectsReset(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rel("v1.3.0", 1))
	f.gh.ExhaustPrimaryLimit(2 * time.Hour)
	f.setCheck(t, true, "stable")
	if !f.poll(t) {
		t.Fatal("no check after turning on")
	}
	v := f.status(t)
	if v.UpdateCheck != app.UpdateCheckFailed || v.CheckError == nil || *v.CheckError != ErrRateLimited ||
		v.Latest != nil || v.UpdateAvailable != nil {
		t.Fatalf("rate limited: %+v", v)
	}
	// The ordinary retry after a failure (1 h) must wait for the reset (2 h).
	f.clk.Add(90 * time.Minute)
	if f.poll(t) {
		t.Fatal("asked again before X-RateLimit-Reset")
	}
	f.clk.Add(31 * time.Minute)
	if !f.poll(t) {
		t.Fatal("no retry after the reset")
	}
	if v := f.status(t); v.UpdateCheck != app.UpdateCheckOK || *v.Latest != "1.3.0" {
		t.Fatalf("after the reset: %+v", v)
	}
	if n := len(f.gh.Requests()); n != 2 {
		t.Fatalf("%d requests, want 2", n)
	}
}

func TestSecondaryRateLimitRespectsRetryAfter(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rel("v1.3.0", 1))
	f.gh.SetSecondaryLimit(3 * 3600)
	f.setCheck(t, true, "stable")
	f.poll(t)
	if v := f.status(t); v.CheckError == nil || *v.CheckError != ErrRateLimited {
		t.Fatalf("429: %+v", v)
	}
	f.gh.SetSecondaryLimit(0)
	f.setCheck(t, true, "beta") // even a channel switch waits for Retry-After
	f.clk.Add(2 * time.Hour)
	if f.poll(t) {
		t.Fatal("asked again before Retry-After")
	}
	f.clk.Add(time.Hour)
	if !f.poll(t) {
		t.Fatal("no retry after Retry-After")
	}
}

func TestCheckErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		repo     string
		releases []githubtest.Release
		setup    func(*githubtest.Server)
		want     string
	}{
		{name: "unknown repository", repo: "someone/else", releases: []githubtest.Release{rel("v1.0.0", 1)}, want: ErrNotFound},
		{name: "no release yet", repo: testRepo, want: ErrNotFound},
		{name: "tag outside the scheme", repo: testRepo, releases: []githubtest.Release{rel("release-7", 1)}, want: ErrBadResponse},
		{name: "tag with build metadata", repo: testRepo, releases: []githubtest.Release{rel("v1.3.0+build.5", 1)}, want: ErrBadResponse},
		{name: "server error", repo: testRepo, releases: []githubtest.Release{rel("v1.3.0", 1)},
			setup: func(s *githubtest.Server) { s.SetFailure(http.StatusServiceUnavailable) }, want: "http_503"},
		{name: "network", repo: testRepo, setup: func(s *githubtest.Server) { s.Close() }, want: ErrNetwork},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, tt.releases...)
			f.c.gh.repository = tt.repo
			if tt.setup != nil {
				tt.setup(f.gh)
			}
			f.setCheck(t, true, "stable")
			f.poll(t)
			v := f.status(t)
			if v.UpdateCheck != app.UpdateCheckFailed || v.CheckError == nil || *v.CheckError != tt.want {
				t.Fatalf("version = %+v, want failed with %s", v, tt.want)
			}
			// A failed check is retried after an hour, not a day.
			f.clk.Add(59 * time.Minute)
			if f.poll(t) {
				t.Fatal("retried within the hour")
			}
			f.clk.Add(time.Minute)
			if !f.poll(t) {
				t.Fatal("no retry an hour after the failure")
			}
		})
	}
}

func TestBetaPicksHighestPrerelease(t *testing.T) {
	t.Parallel()
	f := newFixture(t,
		rel("v1.2.0", 1),
		githubtest.Release{Tag: "v1.3.0-beta.10", Prerelease: true, CreatedAt: day(9), PublishedAt: day(9)},
		githubtest.Release{Tag: "v1.3.0-beta.2", Prerelease: true, CreatedAt: day(10), PublishedAt: day(10)}, // newer, lower
		githubtest.Release{Tag: "nightly", Prerelease: true, CreatedAt: day(11), PublishedAt: day(11)},
		githubtest.Release{Tag: "v2.0.0", Draft: true, CreatedAt: day(12)},
	)
	f.gh.SetListDrafts(true) // even a caller that sees drafts must skip them
	f.setCheck(t, true, "beta")
	f.poll(t)
	v := f.status(t)
	if v.UpdateCheck != app.UpdateCheckOK || *v.LatestTag != "v1.3.0-beta.10" || *v.Latest != "1.3.0-beta.10" ||
		!*v.UpdateAvailable || v.Channel != "beta" || !v.PublishedAt.Equal(day(9)) {
		t.Fatalf("beta = %+v", v)
	}
	if r := f.gh.Requests()[0]; r.URL.Path != "/repos/backstop-dev/backstop/releases" || r.URL.Query().Get("per_page") != "30" {
		t.Fatalf("beta asked %s", r.URL)
	}
}

func TestChannelSwitchRechecks(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rel("v1.2.0", 1),
		githubtest.Release{Tag: "v1.3.0-rc.1", Prerelease: true, CreatedAt: day(3), PublishedAt: day(3)})
	f.setCheck(t, true, "stable")
	f.poll(t)
	if v := f.status(t); *v.Latest != "1.2.0" || *v.UpdateAvailable {
		t.Fatalf("stable: %+v", v)
	}
	f.clk.Add(time.Minute)
	f.setCheck(t, true, "beta")
	if v := f.status(t); v.UpdateCheck != app.UpdateCheckPending || v.Channel != "beta" {
		t.Fatalf("just switched: %+v, want pending on beta", v)
	}
	if !f.poll(t) {
		t.Fatal("switching to beta did not re-check")
	}
	if v := f.status(t); *v.Latest != "1.3.0-rc.1" || !*v.UpdateAvailable {
		t.Fatalf("beta: %+v", v)
	}
	// Back to stable: its cached answer is less than a day old, but a
	// switch still re-checks, so the answer is current.
	f.gh.SetReleases(rel("v1.2.0", 1), rel("v1.2.5", 4))
	f.clk.Add(time.Minute)
	f.setCheck(t, true, "stable")
	if !f.poll(t) {
		t.Fatal("switching back to stable did not re-check")
	}
	if v := f.status(t); *v.Latest != "1.2.5" {
		t.Fatalf("stable again: %+v", v)
	}
	if f.poll(t) {
		t.Fatal("checked again without a switch")
	}
}

func TestCloseAbandonsAHangingRequest(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rel("v1.3.0", 1))
	f.gh.Hold()
	defer f.gh.Release()
	f.setCheck(t, true, "stable")
	if err := f.c.Open(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the request", func() bool { return len(f.gh.Requests()) == 1 })
	done := make(chan struct{})
	go func() { f.c.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return while a request hung")
	}
	if v := f.status(t); v.UpdateCheck != app.UpdateCheckPending {
		t.Fatalf("an abandoned request was stored: %+v", v)
	}
}
