package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"time"

	"backstop/agentapi/wire"
)

// Client calls the appliance's /agent/v1 API.
type Client struct {
	Server     string // base URL, e.g. https://backup.example.com
	EndpointID string
	Secret     string
	HTTP       *http.Client
}

// APIError is a refusal by the appliance (any non-2xx answer).
type APIError struct {
	Status int
	Code   string
	Detail string
}

func (e *APIError) Error() string {
	if e.Detail != "" {
		return fmt.Sprintf("appliance refused (%d %s): %s", e.Status, e.Code, e.Detail)
	}
	return fmt.Sprintf("appliance refused (%d %s)", e.Status, e.Code)
}

// IsUnauthorized reports whether err is the appliance refusing the
// endpoint's credentials (revoked endpoint, rotated secret).
func IsUnauthorized(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Status == http.StatusUnauthorized
}

// isPermanent reports whether resending the same request cannot help: the
// appliance understood and refused it (4xx other than 408/429).
func isPermanent(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Status >= 400 && e.Status < 500 &&
		e.Status != http.StatusRequestTimeout && e.Status != http.StatusTooManyRequests
}

func newClient(s *State) *Client {
	return &Client{Server: s.Server, EndpointID: s.EndpointID, Secret: s.Secret, HTTP: &http.Client{Timeout: 30 * time.Second}}
}

// do sends a JSON request and decodes a JSON answer into out (if non-nil).
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.Server, "/")+wire.Prefix+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "backstop-agent/"+Version)
	if c.EndpointID != "" {
		req.Header.Set("Authorization", wire.AuthScheme+" "+c.EndpointID+":"+c.Secret)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var e wire.Error
		_ = json.Unmarshal(raw, &e)
		return &APIError{Status: resp.StatusCode, Code: e.Code, Detail: e.Detail}
	}
	if out != nil && resp.StatusCode != http.StatusNoContent {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("%s %s: unreadable answer: %w", method, path, err)
		}
	}
	return nil
}

// Enroll exchanges a one-time token for the endpoint's identity.
func (c *Client) Enroll(ctx context.Context, req wire.EnrollRequest) (*wire.EnrollResponse, error) {
	var out wire.EnrollResponse
	return &out, c.do(ctx, http.MethodPost, "/enroll", req, &out)
}

// Config fetches the endpoint's configuration.
func (c *Client) Config(ctx context.Context) (wire.Config, error) {
	var out wire.Config
	err := c.do(ctx, http.MethodGet, "/config", nil, &out)
	return out, err
}

// Heartbeat reports the agent alive and returns waiting commands.
func (c *Client) Heartbeat(ctx context.Context, req wire.HeartbeatRequest) (*wire.HeartbeatResponse, error) {
	var out wire.HeartbeatResponse
	return &out, c.do(ctx, http.MethodPost, "/heartbeat", req, &out)
}

// StartRun registers a run.
func (c *Client) StartRun(ctx context.Context, req wire.RunStart) (*wire.RunStarted, error) {
	var out wire.RunStarted
	return &out, c.do(ctx, http.MethodPost, "/runs", req, &out)
}

// Progress reports a run's progress.
func (c *Client) Progress(ctx context.Context, runID string, p wire.Progress) error {
	return c.do(ctx, http.MethodPost, "/runs/"+runID+"/progress", p, nil)
}

// Finish reports a run's end; the appliance accepts a repeat of the same
// report as a no-op.
func (c *Client) Finish(ctx context.Context, f wire.Finish) (*wire.FinishResult, error) {
	var out wire.FinishResult
	return &out, c.do(ctx, http.MethodPost, "/runs/"+f.Run.RunID+"/finish", f, &out)
}

// Update asks whether the appliance offers this agent another build; the
// answer's Available is false when it does not (204).
func (c *Client) Update(ctx context.Context) (*wire.Update, error) {
	q := url.Values{wire.UpdateQueryOS: {runtime.GOOS}, wire.UpdateQueryArch: {runtime.GOARCH}, wire.UpdateQueryVersion: {Version}}
	var out wire.Update
	return &out, c.do(ctx, http.MethodGet, "/update?"+q.Encode(), nil, &out)
}
