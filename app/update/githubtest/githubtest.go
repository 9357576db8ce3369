// Package githubtest is a local stand-in for the part of GitHub's REST API
// the update checker uses, for tests: it listens on 127.0.0.1 and follows
// GitHub's documented wire format (API version 2022-11-28):
//
//   - GET /repos/{owner}/{repo}/releases/latest: the most recent
//     non-prerelease, non-draft release by created_at; 404 when there is none.
//   - GET /repos/{owner}/{repo}/releases?per_page=N&page=P: releases, newest
//     first (default 30, max 100 a page). Drafts are listed only to callers
//     with push access, which ListDrafts models.
//   - Every answer carries x-ratelimit-limit, -remaining, -used, -reset
//     (UTC epoch seconds) and -resource. Past the primary limit the answer
//     is 403 with x-ratelimit-remaining 0; a secondary limit is 429 with
//     retry-after. Errors are JSON {"message", "documentation_url", "status"}.
//   - GET /repos/{owner}/{repo}/releases/tags/{tag}: one release by tag.
//   - A release's assets are listed with a browser_download_url the fake
//     serves itself (GET /download/{tag}/{name}, application/octet-stream).
//   - A request without User-Agent is refused with 403, as GitHub does.
package githubtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Release is one release of the fake repository.
type Release struct {
	Tag         string
	Draft       bool
	Prerelease  bool
	CreatedAt   time.Time
	PublishedAt time.Time // zero for a draft (null on the wire)
	// Assets are the release's files by name (a binary, SHA256SUMS,
	// SHA256SUMS.sig, …).
	Assets map[string][]byte
}

// Server is the fake API. Change its fields under Lock/Unlock (or through
// the setters) while it runs.
type Server struct {
	*httptest.Server

	mu         sync.Mutex
	repo       string // owner/name that exists; others are 404
	releases   []Release
	listDrafts bool
	limit      int       // primary rate limit per window (GitHub: 60 an hour unauthenticated)
	used       int       // requests counted in the current window
	reset      time.Time // end of the current window
	secondary  int       // when > 0, answer 429 with retry-after of this many seconds
	failStatus int       // when set, answer this status (e.g. 500, 503)
	hold       chan struct{}
	requests   []*http.Request
	now        func() time.Time
}

// New starts a fake serving repo (owner/name) with the given releases.
// now is its clock for rate-limit windows (nil: wall clock).
func New(repo string, now func() time.Time, releases ...Release) *Server {
	if now == nil {
		now = time.Now
	}
	s := &Server{repo: repo, releases: releases, limit: 60, now: now}
	// Set s.Server before it serves: handlers read s.URL, and a request
	// from another process carries no happens-before edge to this write.
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.Start()
	return s
}

// SetReleases replaces the releases.
func (s *Server) SetReleases(rs ...Release) { s.mu.Lock(); s.releases = rs; s.mu.Unlock() }

// SetListDrafts makes the list include drafts (a caller with push access).
func (s *Server) SetListDrafts(v bool) { s.mu.Lock(); s.listDrafts = v; s.mu.Unlock() }

// ExhaustPrimaryLimit uses up the primary rate limit (60 requests) until
// resetIn from now on the fake's clock; then a fresh hourly window starts.
func (s *Server) ExhaustPrimaryLimit(resetIn time.Duration) {
	s.mu.Lock()
	s.used, s.reset = s.limit, s.now().Add(resetIn)
	s.mu.Unlock()
}

// SetSecondaryLimit makes every request answer 429 with retry-after
// seconds; 0 turns it off.
func (s *Server) SetSecondaryLimit(retryAfterSeconds int) {
	s.mu.Lock()
	s.secondary = retryAfterSeconds
	s.mu.Unlock()
}

// SetFailure makes every request answer the status (0 turns it off).
func (s *Server) SetFailure(status int) { s.mu.Lock(); s.failStatus = status; s.mu.Unlock() }

// Hold makes requests wait until Release is called; it simulates a slow
// or hanging GitHub.
func (s *Server) Hold() { s.mu.Lock(); s.hold = make(chan struct{}); s.mu.Unlock() }

// Release lets held requests through.
func (s *Server) Release() {
	s.mu.Lock()
	if s.hold != nil {
		close(s.hold)
		s.hold = nil
	}
	s.mu.Unlock()
}

// Requests returns the requests received so far (headers and URL only).
func (s *Server) Requests() []*http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// ReleaseURL is the html_url the fake gives a tag.
func (s *Server) ReleaseURL(tag string) string {
	return "https://github.com/" + s.repo + "/releases/tag/" + tag
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, r.Clone(r.Context()))
	hold := s.hold
	s.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-r.Context().Done():
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()

	now := s.now()
	if !now.Before(s.reset) {
		s.used, s.reset = 0, now.Add(time.Hour)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("X-GitHub-Api-Version-Selected", "2022-11-28")
	h.Set("X-GitHub-Media-Type", "github.v3; format=json")
	h.Set("X-RateLimit-Limit", strconv.Itoa(s.limit))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(s.reset.Unix(), 10))
	h.Set("X-RateLimit-Resource", "core")
	if r.UserAgent() == "" {
		// GitHub refuses such requests before counting them.
		h.Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, "Request forbidden by administrative rules. Please make sure your request has a User-Agent header (https://docs.github.com/en/rest/overview/resources-in-the-rest-api#user-agent-required). Check https://developer.github.com for other possible causes.\n")
		return
	}
	if s.used >= s.limit {
		h.Set("X-RateLimit-Remaining", "0")
		h.Set("X-RateLimit-Used", strconv.Itoa(s.used))
		writeError(w, http.StatusForbidden, "API rate limit exceeded for 127.0.0.1. (But here's the good news: Authenticated requests get a higher rate limit. Check out the documentation for more details.)",
			"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api")
		return
	}
	s.used++
	h.Set("X-RateLimit-Remaining", strconv.Itoa(s.limit-s.used))
	h.Set("X-RateLimit-Used", strconv.Itoa(s.used))
	if s.secondary > 0 {
		h.Set("Retry-After", strconv.Itoa(s.secondary))
		writeError(w, http.StatusTooManyRequests, "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
			"https://docs.github.com/free-pro-team@latest/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits")
		return
	}
	if s.failStatus != 0 {
		writeError(w, s.failStatus, http.StatusText(s.failStatus), "https://docs.github.com/rest")
		return
	}

	prefix := "/repos/" + s.repo + "/releases"
	path := strings.ToLower(r.URL.Path) // owner and name are not case sensitive
	switch {
	case r.Method != http.MethodGet:
		writeError(w, http.StatusNotFound, "Not Found", "https://docs.github.com/rest")
	case path == strings.ToLower(prefix)+"/latest":
		s.serveLatest(w)
	case path == strings.ToLower(prefix):
		s.serveList(w, r)
	case strings.HasPrefix(path, strings.ToLower(prefix)+"/tags/"):
		s.serveTag(w, r.URL.Path[len(prefix+"/tags/"):])
	case strings.HasPrefix(r.URL.Path, "/download/"):
		s.serveAsset(w, strings.TrimPrefix(r.URL.Path, "/download/"))
	default:
		writeError(w, http.StatusNotFound, "Not Found", "https://docs.github.com/rest/releases/releases#get-the-latest-release")
	}
}

func (s *Server) serveLatest(w http.ResponseWriter) {
	var best *Release
	for i := range s.releases {
		r := &s.releases[i]
		if !r.Draft && !r.Prerelease && (best == nil || r.CreatedAt.After(best.CreatedAt)) {
			best = r
		}
	}
	if best == nil {
		writeError(w, http.StatusNotFound, "Not Found", "https://docs.github.com/rest/releases/releases#get-the-latest-release")
		return
	}
	_ = json.NewEncoder(w).Encode(s.wire(best, 1))
}

func (s *Server) serveTag(w http.ResponseWriter, tag string) {
	for i := range s.releases {
		if r := &s.releases[i]; r.Tag == tag && (!r.Draft || s.listDrafts) {
			_ = json.NewEncoder(w).Encode(s.wire(r, i+1))
			return
		}
	}
	writeError(w, http.StatusNotFound, "Not Found", "https://docs.github.com/rest/releases/releases#get-a-release-by-tag-name")
}

func (s *Server) serveAsset(w http.ResponseWriter, tagAndName string) {
	tag, name, _ := strings.Cut(tagAndName, "/")
	for _, r := range s.releases {
		if b, ok := r.Assets[name]; ok && r.Tag == tag {
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Content-Length", strconv.Itoa(len(b)))
			_, _ = w.Write(b)
			return
		}
	}
	writeError(w, http.StatusNotFound, "Not Found", "https://docs.github.com/rest/releases/assets")
}

func (s *Server) serveList(w http.ResponseWriter, r *http.Request) {
	perPage, page := 30, 1
	if v, err := strconv.Atoi(r.URL.Query().Get("per_page")); err == nil && v > 0 {
		perPage = min(v, 100)
	}
	if v, err := strconv.Atoi(r.URL.Query().Get("page")); err == nil && v > 0 {
		page = v
	}
	var visible []*Release
	for i := range s.releases {
		if rel := &s.releases[i]; !rel.Draft || s.listDrafts {
			visible = append(visible, rel)
		}
	}
	slices.SortStableFunc(visible, func(a, b *Release) int { return b.CreatedAt.Compare(a.CreatedAt) })
	out := []map[string]any{}
	for i := (page - 1) * perPage; i < len(visible) && i < page*perPage; i++ {
		out = append(out, s.wire(visible[i], i+1))
	}
	_ = json.NewEncoder(w).Encode(out)
}

// wire is GitHub's release object, with the fields a client may meet.
func (s *Server) wire(r *Release, id int) map[string]any {
	api := s.URL + "/repos/" + s.repo + "/releases/" + strconv.Itoa(id)
	var published any
	if !r.Draft && !r.PublishedAt.IsZero() {
		published = r.PublishedAt.UTC().Format(time.RFC3339)
	}
	assets := []any{}
	names := make([]string, 0, len(r.Assets))
	for name := range r.Assets {
		names = append(names, name)
	}
	slices.Sort(names)
	for i, name := range names {
		assets = append(assets, map[string]any{
			"url": api + "/assets/" + strconv.Itoa(i+1), "id": i + 1, "name": name, "label": "", "state": "uploaded",
			"content_type": "application/octet-stream", "size": len(r.Assets[name]),
			"browser_download_url": s.URL + "/download/" + r.Tag + "/" + name,
		})
	}
	return map[string]any{
		"url": api, "assets_url": api + "/assets", "upload_url": "https://uploads.github.com/repos/" + s.repo + "/releases/" + strconv.Itoa(id) + "/assets{?name,label}",
		"html_url": s.ReleaseURL(r.Tag), "id": id, "node_id": "RE_kwDO" + strconv.Itoa(id),
		"author":   map[string]any{"login": "octocat", "id": 1, "type": "User", "site_admin": false},
		"tag_name": r.Tag, "target_commitish": "main", "name": r.Tag, "draft": r.Draft, "prerelease": r.Prerelease,
		"created_at": r.CreatedAt.UTC().Format(time.RFC3339), "published_at": published, "assets": assets,
		"tarball_url": s.URL + "/repos/" + s.repo + "/tarball/" + r.Tag, "zipball_url": s.URL + "/repos/" + s.repo + "/zipball/" + r.Tag,
		"body": "## What's changed\n\n* Fixes and improvements.",
	}
}

func writeError(w http.ResponseWriter, status int, message, docs string) {
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": message, "documentation_url": docs, "status": strconv.Itoa(status)})
}
