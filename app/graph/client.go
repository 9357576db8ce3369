package graph

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Default base URLs (the global cloud). National clouds and tests set
// their own.
const (
	DefaultGraphURL = "https://graph.microsoft.com/v1.0"
	DefaultLoginURL = "https://login.microsoftonline.com"
)

// Config is one Microsoft 365 tenant's client.
type Config struct {
	GraphURL      string // base including the version, e.g. https://graph.microsoft.com/v1.0
	LoginURL      string // e.g. https://login.microsoftonline.com
	AzureTenantID string
	ClientID      string
	ClientSecret  string
	HTTP          *http.Client // nil: a client with sane timeouts
	// Limits is the appliance-wide budget shared by every tenant's client;
	// nil gives the client its own (DefaultMaxConcurrency).
	Limits *Limits
	// PerMailbox is the most requests in flight per mailbox (Outlook's
	// documented limit is 4; default 4).
	PerMailbox int
	// MaxRetries bounds retries of one request after 429/503/504/5xx and
	// connection errors (default 6).
	MaxRetries int
	// MaxRetryAfter caps how long one Retry-After is waited in process; a
	// longer one ends the request with a *Error whose RetryAfter says how
	// long (the job is then retried later). Default 5 minutes.
	MaxRetryAfter time.Duration
}

// DefaultMaxConcurrency is the default appliance-wide total of requests in
// flight (graph.max_concurrency).
const DefaultMaxConcurrency = 256

// SharePointConcurrency is the most drive requests (including downloads
// and upload chunks) in flight per tenant; DirectoryConcurrency the most
// directory requests.
const (
	SharePointConcurrency = 8
	DirectoryConcurrency  = 8
)

// Limits is the appliance-wide total of Graph requests in flight.
type Limits struct{ sem chan struct{} }

// NewLimits returns a budget of maxConcurrency requests in flight
// (DefaultMaxConcurrency when ≤ 0).
func NewLimits(maxConcurrency int) *Limits {
	if maxConcurrency <= 0 {
		maxConcurrency = DefaultMaxConcurrency
	}
	return &Limits{sem: make(chan struct{}, maxConcurrency)}
}

// Client talks to one tenant. Safe for concurrent use; one per source, kept
// for the process's life so its token and per-mailbox limits are shared.
type Client struct {
	cfg    Config
	http   *http.Client
	limits *Limits

	now     func() time.Time
	backoff time.Duration // first retry delay without Retry-After

	tokenLock chan struct{} // single flight of token fetches
	tokenMu   sync.Mutex
	token     string
	tokenExp  time.Time // when to fetch a new one

	scopesMu sync.Mutex
	scopes   map[Scope]*scopeState
}

// New checks cfg (absolute http(s) URLs) and returns a client.
func New(cfg Config) (*Client, error) {
	if cfg.GraphURL == "" {
		cfg.GraphURL = DefaultGraphURL
	}
	if cfg.LoginURL == "" {
		cfg.LoginURL = DefaultLoginURL
	}
	for _, u := range []*string{&cfg.GraphURL, &cfg.LoginURL} {
		if err := checkBaseURL(*u); err != nil {
			return nil, err
		}
		*u = strings.TrimRight(*u, "/")
	}
	if cfg.AzureTenantID == "" || cfg.ClientID == "" || cfg.ClientSecret == "" {
		return nil, errors.New("graph: tenant id, client id and client secret are required")
	}
	if cfg.PerMailbox <= 0 {
		cfg.PerMailbox = 4
	}
	if cfg.MaxRetries <= 0 {
		cfg.MaxRetries = 6
	}
	if cfg.MaxRetryAfter <= 0 {
		cfg.MaxRetryAfter = 5 * time.Minute
	}
	c := &Client{
		cfg:       cfg,
		http:      cfg.HTTP,
		limits:    cfg.Limits,
		now:       time.Now,
		backoff:   time.Second,
		tokenLock: make(chan struct{}, 1),
		scopes:    make(map[Scope]*scopeState),
	}
	if c.http == nil {
		c.http = defaultHTTPClient()
	}
	if c.limits == nil {
		c.limits = NewLimits(0)
	}
	return c, nil
}

func checkBaseURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("graph: %q is not an absolute http(s) URL", s)
	}
	return nil
}

// defaultHTTPClient has no overall timeout (downloads of large files take
// long) but bounds connecting and waiting for headers.
func defaultHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   15 * time.Second,
		ResponseHeaderTimeout: 5 * time.Minute,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}}
}

// AzureTenantID is the tenant the client signs in to.
func (c *Client) AzureTenantID() string { return c.cfg.AzureTenantID }

// Scope names whose throttling budget a request spends.
type Scope string

// Scopes: one mailbox (Outlook's per-mailbox limits), the tenant's
// directory, and the tenant's SharePoint/OneDrive budget (one Retry-After
// fence for every drive of the tenant).
const (
	ScopeDirectory  Scope = "directory"
	ScopeSharePoint Scope = "sharepoint"
)

const mailboxPrefix = "mailbox:"

// Mailbox is the scope of requests on one user's mailbox.
func Mailbox(userID string) Scope { return Scope(mailboxPrefix + userID) }

// Request is one HTTP request. URL is absolute (a nextLink, an upload URL)
// or relative to GraphURL ("/users/x/messages").
type Request struct {
	Method string
	URL    string
	Header http.Header
	Body   []byte
	// NoAuth leaves out the Authorization header (pre-authenticated
	// download and upload URLs must not get it).
	NoAuth bool
}

// Do sends req within scope's limits, retrying 429/503/504/5xx (waiting
// Retry-After, or backing off) and refreshing the token once after a 401.
// A final non-2xx answer is an *Error; the caller closes the body of a
// returned response. The response holds its scope's slot until its body
// is closed.
func (c *Client) Do(ctx context.Context, scope Scope, req *Request) (*http.Response, error) {
	st := c.scope(scope)
	refreshed := false
	for attempt := 0; ; attempt++ {
		release, err := c.acquire(ctx, st)
		if err != nil {
			return nil, err
		}
		resp, sentToken, err := c.send(ctx, scope, req)
		if err != nil {
			release()
			if ctx.Err() != nil || !retryableTransport(err) || attempt >= c.cfg.MaxRetries {
				return nil, err
			}
			if err := sleep(ctx, c.backoffFor(attempt)); err != nil {
				return nil, err
			}
			continue
		}
		if resp.StatusCode < 400 {
			resp.Body = &releasingBody{ReadCloser: resp.Body, release: release}
			return resp, nil
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		gerr := parseError(resp.StatusCode, resp.Header, body, c.now())
		if retryableStatus(resp.StatusCode) && gerr.RetryAfter > 0 {
			// Fence before giving the slot back, so no queued request of
			// the scope slips out in between.
			st.fence(c.now().Add(gerr.RetryAfter))
		}
		release()

		switch {
		case resp.StatusCode == http.StatusUnauthorized && !req.NoAuth && !refreshed &&
			gerr.HasCode("InvalidAuthenticationToken"):
			refreshed = true
			c.dropToken(sentToken)
			attempt-- // a refreshed token is not a retry of the budget
		case !retryableStatus(resp.StatusCode) || attempt >= c.cfg.MaxRetries:
			return nil, gerr
		case gerr.RetryAfter > c.cfg.MaxRetryAfter:
			return nil, gerr
		case gerr.RetryAfter > 0:
			// acquire waits for the fence set above.
		default:
			if err := sleep(ctx, c.backoffFor(attempt)); err != nil {
				return nil, err
			}
		}
	}
}

// send builds and sends one attempt of req; it returns the token it used.
func (c *Client) send(ctx context.Context, scope Scope, req *Request) (*http.Response, string, error) {
	u := req.URL
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		u = c.cfg.GraphURL + u
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	hr, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(req.Body))
	if err != nil {
		return nil, "", fmt.Errorf("graph: %w", err)
	}
	if req.Body == nil {
		hr.Body, hr.GetBody = nil, nil
	}
	for k, v := range req.Header {
		hr.Header[k] = append([]string(nil), v...)
	}
	hr.Header.Set("User-Agent", "Backstop")
	var token string
	if !req.NoAuth {
		if token, err = c.Token(ctx); err != nil {
			return nil, "", err
		}
		hr.Header.Set("Authorization", "Bearer "+token)
		if strings.HasPrefix(string(scope), mailboxPrefix) {
			addPrefer(hr.Header, `IdType="ImmutableId"`)
		}
	}
	resp, err := c.http.Do(hr)
	return resp, token, err
}

// addPrefer adds a preference to the one Prefer header (RFC 7240 allows a
// list), so a server reading only the first Prefer line sees them all.
func addPrefer(h http.Header, pref string) {
	if old := h.Get("Prefer"); old != "" {
		pref = old + ", " + pref
	}
	h.Set("Prefer", pref)
}

func retryableStatus(status int) bool {
	switch status {
	case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// retryableTransport reports a failure to get an answer at all (reset,
// refused, timeout), as opposed to a request that cannot be built.
func retryableTransport(err error) bool {
	var ue *url.Error
	return errors.As(err, &ue)
}

// backoffFor is exponential from c.backoff with ±25 % jitter, capped at a
// minute.
func (c *Client) backoffFor(attempt int) time.Duration {
	d := c.backoff << min(attempt, 6)
	d = min(d, time.Minute)
	return d - d/4 + time.Duration(rand.Int64N(int64(d/2)+1))
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// releasingBody gives the request's slots back when the caller closes it.
type releasingBody struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}

// JSON sends in (nil: no body) as JSON and decodes a 2xx answer into out
// (nil: discarded).
func (c *Client) JSON(ctx context.Context, scope Scope, method, url string, header http.Header, in, out any) error {
	req := &Request{Method: method, URL: url, Header: header.Clone()}
	if req.Header == nil {
		req.Header = http.Header{}
	}
	req.Header.Set("Accept", "application/json")
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("graph: encoding %s %s: %w", method, url, err)
		}
		req.Body = b
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(ctx, scope, req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil || resp.StatusCode == http.StatusNoContent {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("graph: decoding %s %s: %w", method, url, err)
	}
	return nil
}
