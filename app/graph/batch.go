package graph

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// BatchRequest is one request of a JSON batch (URL relative to the
// version root, e.g. "/users/x/mailboxSettings").
type BatchRequest struct {
	ID        string            `json:"id"`
	Method    string            `json:"method"`
	URL       string            `json:"url"`
	Headers   map[string]string `json:"headers,omitempty"`
	Body      json.RawMessage   `json:"body,omitempty"`
	DependsOn []string          `json:"dependsOn,omitempty"`
}

// BatchResponse is one answer of a JSON batch. Body is the answer's JSON;
// a non-JSON answer (which Graph sends base64-encoded) holds the decoded
// bytes.
type BatchResponse struct {
	ID      string            `json:"id"`
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    json.RawMessage   `json:"body,omitempty"`
}

// Err is nil for a 2xx answer and the *Error of the answer otherwise.
func (r *BatchResponse) Err() error {
	if r.Status >= 200 && r.Status < 300 {
		return nil
	}
	return parseError(r.Status, r.header(), r.Body, time.Now())
}

func (r *BatchResponse) header() http.Header {
	h := make(http.Header, len(r.Headers))
	for k, v := range r.Headers {
		h.Set(k, v)
	}
	return h
}

// MaxBatch is the most requests Graph takes in one $batch.
const MaxBatch = 20

// Batch sends up to MaxBatch requests in one POST /$batch and returns the
// answers in request order. Inner 429/503 answers are retried (after their
// Retry-After, which fences scope) within the client's retry budget;
// other inner failures are returned as they are.
func (c *Client) Batch(ctx context.Context, scope Scope, reqs []BatchRequest) ([]BatchResponse, error) {
	if len(reqs) > MaxBatch {
		return nil, fmt.Errorf("graph: %d requests in one batch (at most %d)", len(reqs), MaxBatch)
	}
	index := make(map[string]int, len(reqs))
	for i, r := range reqs {
		if _, dup := index[r.ID]; dup || r.ID == "" {
			return nil, fmt.Errorf("graph: batch request ids must be unique and set (%q)", r.ID)
		}
		index[r.ID] = i
	}
	out := make([]BatchResponse, len(reqs))
	pending := reqs
	st := c.scope(scope)
	for attempt := 0; len(pending) > 0; attempt++ {
		answers, err := c.postBatch(ctx, scope, pending)
		if err != nil {
			return nil, err
		}
		var again []BatchRequest
		var wait time.Duration
		for _, a := range answers {
			i, ok := index[a.ID]
			if !ok {
				return nil, fmt.Errorf("graph: batch answered unknown id %q", a.ID)
			}
			out[i] = a
			if (a.Status == http.StatusTooManyRequests || a.Status == http.StatusServiceUnavailable) && attempt < c.cfg.MaxRetries {
				again = append(again, reqs[i])
				wait = max(wait, parseRetryAfter(a.header().Get("Retry-After"), c.now()))
			}
		}
		for _, r := range pending {
			if out[index[r.ID]].ID == "" {
				return nil, fmt.Errorf("graph: batch left request %q unanswered", r.ID)
			}
		}
		if len(again) == 0 {
			break
		}
		if wait > c.cfg.MaxRetryAfter {
			st.fence(c.now().Add(wait))
			break // the answers keep their 429 and Retry-After
		}
		if wait > 0 {
			st.fence(c.now().Add(wait))
		} else if err := sleep(ctx, c.backoffFor(attempt)); err != nil {
			return nil, err
		}
		pending = withoutDoneDependencies(again)
	}
	return out, nil
}

// withoutDoneDependencies drops dependsOn entries naming requests that are
// not resent (they already succeeded).
func withoutDoneDependencies(reqs []BatchRequest) []BatchRequest {
	resent := make(map[string]bool, len(reqs))
	for _, r := range reqs {
		resent[r.ID] = true
	}
	out := make([]BatchRequest, len(reqs))
	for i, r := range reqs {
		r.DependsOn = nil
		for _, d := range reqs[i].DependsOn {
			if resent[d] {
				r.DependsOn = append(r.DependsOn, d)
			}
		}
		out[i] = r
	}
	return out
}

func (c *Client) postBatch(ctx context.Context, scope Scope, reqs []BatchRequest) ([]BatchResponse, error) {
	var resp struct {
		Responses []BatchResponse `json:"responses"`
	}
	in := struct {
		Requests []BatchRequest `json:"requests"`
	}{reqs}
	if err := c.JSON(ctx, scope, http.MethodPost, "/$batch", nil, in, &resp); err != nil {
		return nil, err
	}
	for i := range resp.Responses {
		decodeBatchBody(&resp.Responses[i])
	}
	return resp.Responses, nil
}

// decodeBatchBody turns a base64 string body of a non-JSON answer into its
// bytes (JSON batching encodes every non-JSON body so).
func decodeBatchBody(r *BatchResponse) {
	ct := strings.ToLower(r.header().Get("Content-Type"))
	if len(r.Body) == 0 || r.Body[0] != '"' || ct == "" || strings.Contains(ct, "json") {
		return
	}
	var s string
	if json.Unmarshal(r.Body, &s) != nil {
		return
	}
	if b, err := base64.StdEncoding.DecodeString(s); err == nil {
		r.Body = b
	}
}
