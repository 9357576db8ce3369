package graph

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"
)

// scopeState is one scope's throttling state: its slots and its fence.
type scopeState struct {
	sem chan struct{}

	mu        sync.Mutex
	notBefore time.Time
	changed   chan struct{} // closed and replaced when the fence moves
}

func (c *Client) scope(s Scope) *scopeState {
	c.scopesMu.Lock()
	defer c.scopesMu.Unlock()
	st := c.scopes[s]
	if st == nil {
		n := DirectoryConcurrency
		switch {
		case strings.HasPrefix(string(s), mailboxPrefix):
			n = c.cfg.PerMailbox
		case s == ScopeSharePoint:
			n = SharePointConcurrency
		}
		st = &scopeState{sem: make(chan struct{}, n), changed: make(chan struct{})}
		c.scopes[s] = st
	}
	return st
}

// fence moves the scope's "not before" time later (never earlier).
func (st *scopeState) fence(t time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if t.After(st.notBefore) {
		st.notBefore = t
		close(st.changed)
		st.changed = make(chan struct{})
	}
}

func (st *scopeState) fenceAt() (time.Time, <-chan struct{}) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.notBefore, st.changed
}

// waitFence returns once the scope's fence has passed, or a *Error 429
// when it is further away than maxWait.
func (c *Client) waitFence(ctx context.Context, st *scopeState) error {
	for {
		at, changed := st.fenceAt()
		wait := at.Sub(c.now())
		if wait <= 0 {
			return nil
		}
		if wait > c.cfg.MaxRetryAfter {
			return &Error{Status: http.StatusTooManyRequests, Code: "TooManyRequests",
				Message: "scope is throttled by an earlier Retry-After", RetryAfter: wait}
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-changed:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		t.Stop()
	}
}

// acquire waits for the scope's fence, a slot of the scope and a slot of
// the appliance, in that order; the fence is checked again once both are
// held so a request that queued while the scope got throttled waits too.
func (c *Client) acquire(ctx context.Context, st *scopeState) (release func(), err error) {
	for {
		if err := c.waitFence(ctx, st); err != nil {
			return nil, err
		}
		select {
		case st.sem <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		select {
		case c.limits.sem <- struct{}{}:
		case <-ctx.Done():
			<-st.sem
			return nil, ctx.Err()
		}
		release = func() { <-c.limits.sem; <-st.sem }
		if at, _ := st.fenceAt(); !at.After(c.now()) {
			return release, nil
		}
		release()
	}
}
