package graph

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Token returns a valid access token, fetching one with the client
// credentials grant when none is cached or it expires within 5 minutes.
// A refused client is an *AuthError.
func (c *Client) Token(ctx context.Context) (string, error) {
	if tok := c.cachedToken(); tok != "" {
		return tok, nil
	}
	select { // one fetch at a time; the others then find it cached
	case c.tokenLock <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	defer func() { <-c.tokenLock }()
	if tok := c.cachedToken(); tok != "" {
		return tok, nil
	}
	tok, lifetime, err := c.fetchToken(ctx)
	if err != nil {
		return "", err
	}
	// Refresh 5 minutes before expiry; short-lived tokens at half-life.
	margin := min(5*time.Minute, lifetime/2)
	c.tokenMu.Lock()
	c.token, c.tokenExp = tok, c.now().Add(lifetime-margin)
	c.tokenMu.Unlock()
	return tok, nil
}

func (c *Client) cachedToken() string {
	c.tokenMu.Lock()
	defer c.tokenMu.Unlock()
	if c.token != "" && c.now().Before(c.tokenExp) {
		return c.token
	}
	return ""
}

// dropToken forgets tok after Graph refused it (unless a newer one is
// already cached).
func (c *Client) dropToken(tok string) {
	c.tokenMu.Lock()
	defer c.tokenMu.Unlock()
	if c.token == tok {
		c.token = ""
	}
}

// tokenScope is the Graph resource's ".default" scope: scheme and host of
// GraphURL (national clouds have their own).
func (c *Client) tokenScope() string {
	u, _ := url.Parse(c.cfg.GraphURL) // checked in New
	return u.Scheme + "://" + u.Host + "/.default"
}

func (c *Client) fetchToken(ctx context.Context) (string, time.Duration, error) {
	form := url.Values{
		"client_id":     {c.cfg.ClientID},
		"client_secret": {c.cfg.ClientSecret},
		"scope":         {c.tokenScope()},
		"grant_type":    {"client_credentials"},
	}
	endpoint := c.cfg.LoginURL + "/" + url.PathEscape(c.cfg.AzureTenantID) + "/oauth2/v2.0/token"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return "", 0, fmt.Errorf("graph: token request: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return "", 0, fmt.Errorf("graph: token request: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", 0, fmt.Errorf("graph: token request: %w", err)
	}
	if resp.StatusCode >= 400 && resp.StatusCode < 500 {
		return "", 0, parseAuthError(resp.StatusCode, body)
	}
	if resp.StatusCode != http.StatusOK {
		return "", 0, fmt.Errorf("graph: token endpoint answered %d", resp.StatusCode)
	}
	var ok struct {
		AccessToken string          `json:"access_token"`
		ExpiresIn   json.RawMessage `json:"expires_in"` // a number, or a string in older endpoints
	}
	if err := json.Unmarshal(body, &ok); err != nil || ok.AccessToken == "" {
		return "", 0, fmt.Errorf("graph: token endpoint answered without an access_token")
	}
	secs, err := strconv.Atoi(strings.Trim(string(ok.ExpiresIn), `"`))
	if err != nil || secs <= 0 {
		secs = 3599
	}
	return ok.AccessToken, time.Duration(secs) * time.Second, nil
}

// AuthError is a refused token request: the AADSTS codes and the reason.
type AuthError struct {
	Status      int
	Err         string // OAuth error, e.g. invalid_client
	Codes       []int  // error_codes, e.g. 7000215
	Description string // error_description (first line)
}

var aadstsCode = regexp.MustCompile(`AADSTS(\d+)`)

func parseAuthError(status int, body []byte) *AuthError {
	var raw struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
		Codes       []int  `json:"error_codes"`
	}
	e := &AuthError{Status: status}
	if json.Unmarshal(body, &raw) != nil {
		e.Description = firstLine(string(body))
		return e
	}
	e.Err, e.Codes, e.Description = raw.Error, raw.Codes, firstLine(raw.Description)
	if len(e.Codes) == 0 {
		if m := aadstsCode.FindStringSubmatch(raw.Description); m != nil {
			n, _ := strconv.Atoi(m[1])
			e.Codes = []int{n}
		}
	}
	return e
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	s = strings.TrimSpace(s)
	if len(s) > 300 {
		s = s[:300]
	}
	return s
}

// aadstsReasons are the refusals an administrator can act on
// (learn.microsoft.com/entra/identity-platform/reference-error-codes).
var aadstsReasons = map[int]string{
	7000215: "the client secret is not valid",
	7000222: "the client secret has expired",
	700016:  "the application was not found in the tenant (not consented, or the wrong tenant)",
	90002:   "the tenant was not found (check the tenant id and the cloud)",
	7000112: "the application is disabled",
	53003:   "access was blocked by a Conditional Access policy",
	65001:   "the application has not been consented",
	90094:   "an administrator must grant consent to the application",
	50194:   "the application is single-tenant and cannot sign in to this tenant",
	700023:  "the application is not configured for this tenant",
}

func (e *AuthError) Error() string {
	return fmt.Sprintf("graph: token refused (%d %s): %s", e.Status, e.Err, e.Reason())
}

// Reason is "AADSTS7000215: <what it means>" for the first known code, or
// the description's first sentence.
func (e *AuthError) Reason() string {
	for _, code := range e.Codes {
		if r, ok := aadstsReasons[code]; ok {
			return fmt.Sprintf("AADSTS%d: %s", code, r)
		}
	}
	d := e.Description
	if i := strings.Index(d, ". "); i >= 0 {
		d = d[:i+1]
	}
	if d == "" {
		d = e.Err
	}
	return d
}
