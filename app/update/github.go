package update

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"backstop/app"
)

// Check errors stored in app.VersionCheck.CheckError. Other non-2xx answers
// are stored as "http_<status>".
const (
	ErrRateLimited = "rate_limited" // 429, or 403 with X-RateLimit-Remaining: 0 or Retry-After
	ErrNotFound    = "not_found"    // 404, or a repository without any usable release
	ErrNetwork     = "network"      // the request did not complete (DNS, connect, TLS, timeout)
	ErrBadResponse = "bad_response" // undecodable JSON or a tag that is not v<major>.<minor>.<patch>[-pre]
)

// maxReleaseBody bounds what is read of an answer: a list of 30 releases
// with long release notes stays well under it.
const maxReleaseBody = 8 << 20

// release is the part of GitHub's release object the check uses
// (GET /repos/{owner}/{repo}/releases/latest, and each item of
// GET /repos/{owner}/{repo}/releases).
type release struct {
	TagName     string     `json:"tag_name"`
	HTMLURL     string     `json:"html_url"`
	Draft       bool       `json:"draft"`
	Prerelease  bool       `json:"prerelease"`
	PublishedAt *time.Time `json:"published_at"` // null for drafts
}

// githubError is GitHub's error body: {"message": ..., "documentation_url": ...}.
type githubError struct {
	Message          string `json:"message"`
	DocumentationURL string `json:"documentation_url"`
}

// outcome is the result of one request to GitHub: the newest release of the
// channel, or the check error and, for rate limits, the earliest time GitHub
// allows the next request.
type outcome struct {
	release *release
	err     string
	detail  string    // for the log: GitHub's message or the transport error
	retryAt time.Time // zero unless rate limited
}

// githubClient asks GitHub's releases REST API for the newest release.
type githubClient struct {
	apiURL     string // e.g. https://api.github.com, no trailing slash
	repository string // owner/name
	userAgent  string
	http       *http.Client
	now        app.Clock
}

// latest returns the newest release of the channel: stable is GitHub's
// "latest release" (newest non-draft, non-prerelease); beta is the highest
// semantic version among the non-draft releases of the first page (30, the
// newest), prereleases included.
func (g *githubClient) latest(ctx context.Context, channel string) outcome {
	owner, name, _ := strings.Cut(g.repository, "/")
	path := "/repos/" + url.PathEscape(owner) + "/" + url.PathEscape(name) + "/releases"
	if channel == "beta" {
		path += "?per_page=30"
	} else {
		path += "/latest"
	}
	body, o := g.get(ctx, path)
	if o.err != "" {
		return o
	}
	if channel != "beta" {
		var r release
		if err := json.Unmarshal(body, &r); err != nil {
			return outcome{err: ErrBadResponse, detail: err.Error()}
		}
		if !validTag(r.TagName) {
			return outcome{err: ErrBadResponse, detail: fmt.Sprintf("tag %q is not v<major>.<minor>.<patch>", r.TagName)}
		}
		return outcome{release: &r}
	}
	var list []release
	if err := json.Unmarshal(body, &list); err != nil {
		return outcome{err: ErrBadResponse, detail: err.Error()}
	}
	var best *release
	for i := range list {
		r := &list[i]
		// A tag outside the scheme (an old "nightly", say) must not fail the
		// whole check; it is simply not a candidate.
		if r.Draft || !validTag(r.TagName) {
			continue
		}
		if best == nil {
			best = r
		} else if c, _ := app.CompareSemver(r.TagName, best.TagName); c > 0 {
			best = r
		}
	}
	switch {
	case best != nil:
		return outcome{release: best}
	case len(list) == 0:
		return outcome{err: ErrNotFound, detail: "the repository has no releases"}
	default:
		return outcome{err: ErrBadResponse, detail: "no release has a tag of the form v<major>.<minor>.<patch>"}
	}
}

// get performs one GET and maps every failure to a check error.
func (g *githubClient) get(ctx context.Context, path string) ([]byte, outcome) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.apiURL+path, nil)
	if err != nil {
		return nil, outcome{err: ErrNetwork, detail: err.Error()}
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	req.Header.Set("User-Agent", g.userAgent)
	resp, err := g.http.Do(req)
	if err != nil {
		return nil, outcome{err: ErrNetwork, detail: err.Error()}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxReleaseBody+1))
	if err != nil {
		return nil, outcome{err: ErrNetwork, detail: err.Error()}
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if len(body) > maxReleaseBody {
			return nil, outcome{err: ErrBadResponse, detail: "answer larger than 8 MiB"}
		}
		return body, outcome{}
	}
	var ge githubError
	_ = json.Unmarshal(body, &ge) // the message is only for the log
	o := outcome{detail: fmt.Sprintf("%s: %s", resp.Status, ge.Message)}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		o.err = ErrNotFound
	case isRateLimited(resp):
		o.err, o.retryAt = ErrRateLimited, g.retryAt(resp.Header)
	default:
		o.err = "http_" + strconv.Itoa(resp.StatusCode)
	}
	return nil, o
}

// isRateLimited follows GitHub's documentation: a primary limit is 403 or
// 429 with x-ratelimit-remaining 0; a secondary limit is 403 or 429, perhaps
// with retry-after. A 429 is a rate limit by definition; a 403 without either
// header is a real refusal (for example a blocked repository).
func isRateLimited(resp *http.Response) bool {
	switch resp.StatusCode {
	case http.StatusTooManyRequests:
		return true
	case http.StatusForbidden:
		return resp.Header.Get("X-RateLimit-Remaining") == "0" || resp.Header.Get("Retry-After") != ""
	}
	return false
}

// minRateLimitWait is GitHub's advice when a rate-limit answer names no time:
// wait at least a minute.
const minRateLimitWait = time.Minute

// retryAt is the earliest time GitHub allows the next request: Retry-After
// (seconds) wins, then X-RateLimit-Reset (UTC epoch seconds) when the
// remaining count is 0, else a minute from now.
func (g *githubClient) retryAt(h http.Header) time.Time {
	now := g.now()
	if s, err := strconv.Atoi(strings.TrimSpace(h.Get("Retry-After"))); err == nil && s >= 0 {
		return now.Add(max(time.Duration(s)*time.Second, time.Second))
	}
	if h.Get("X-RateLimit-Remaining") == "0" {
		if epoch, err := strconv.ParseInt(strings.TrimSpace(h.Get("X-RateLimit-Reset")), 10, 64); err == nil {
			if t := time.Unix(epoch, 0).UTC(); t.After(now) {
				return t
			}
			return now.Add(time.Second)
		}
	}
	return now.Add(minRateLimitWait)
}

// validTag reports whether a tag is v<major>.<minor>.<patch> with an
// optional pre-release part; build metadata is not part of the scheme.
func validTag(tag string) bool {
	return strings.HasPrefix(tag, "v") && !strings.Contains(tag, "+") && app.ValidSemver(tag)
}

// logOutcome records a failed check with GitHub's own message, which the
// stored check error deliberately leaves out.
func logOutcome(l *slog.Logger, channel string, o outcome) {
	if o.err == "" {
		return
	}
	attrs := []any{slog.String("channel", channel), slog.String("check_error", o.err), slog.String("detail", o.detail)}
	if !o.retryAt.IsZero() {
		attrs = append(attrs, slog.Time("retry_at", o.retryAt))
	}
	l.Warn("update check failed", attrs...)
}
