package graphtest

import (
	"net/http"
	"strconv"
	"time"
)

// scopeKind says which throttling budget a request spends.
type scopeKind int

const (
	scopeNone scopeKind = iota
	scopeMailbox
	scopeSharePoint
)

// routed is the outcome of routing a call.
type routed struct {
	h        func(c *call) answer
	role     string
	denied   func(c *call) answer
	notFound func(c *call) answer
	scope    scopeKind
	userID   string // mailbox scope
	cost     int    // SharePoint resource units
}

// mailboxLimits are Outlook's per-app-per-mailbox limits
// (concepts/throttling-limits.md "Outlook service limits": 10,000 requests
// per 10 minutes, 4 concurrent requests).
type mailboxLimits struct {
	inFlight   int
	window     []time.Time // arrivals in the last 10 minutes, oldest first
	retryUntil time.Time   // the latest Retry-After the fake sent
	forced     int
	forcedRA   time.Duration
}

// sharePointBudget is the tenant's resource-unit budget per minute
// (learn.microsoft.com/sharepoint/dev/general-development/
// how-to-avoid-getting-throttled-or-blocked-in-sharepoint-online).
type sharePointBudget struct {
	spent      []spend
	sum        int
	retryUntil time.Time
}

type spend struct {
	at   time.Time
	cost int
}

// Throttle answers the next n requests on the user's mailbox with 429 and
// Retry-After retryAfter (whole seconds, as Graph sends them).
func (s *Server) Throttle(userID string, n int, retryAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.mboxLocked(userID)
	m.forced = n
	m.forcedRA = retryAfter
}

func (s *Server) mboxLocked(userID string) *mailboxLimits {
	m := s.mboxes[userID]
	if m == nil {
		m = &mailboxLimits{}
		s.mboxes[userID] = m
	}
	return m
}

// retryAfterSeconds rounds up to whole seconds (concepts/throttling.md:
// Retry-After is a delay in seconds), at least 1.
func retryAfterSeconds(d time.Duration) int {
	secs := int((d + time.Second - 1) / time.Second)
	if secs < 1 {
		secs = 1
	}
	return secs
}

func (c *call) throttled(code, message string, d time.Duration) answer {
	a := c.errAnswer(http.StatusTooManyRequests, code, message)
	return withHeader(a, "Retry-After", strconv.Itoa(retryAfterSeconds(d)))
}

// admit applies the scope's limits; release must be called when the
// request is done.
func (s *Server) admit(c *call, rt routed) (release func(), a answer, ok bool) {
	switch rt.scope {
	case scopeMailbox:
		return s.admitMailbox(c, rt.userID)
	case scopeSharePoint:
		return s.admitSharePoint(c, rt.cost)
	}
	return func() {}, answer{}, true
}

func (s *Server) admitMailbox(c *call, userID string) (func(), answer, bool) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.mboxLocked(userID)
	// throttling.md: throttled requests still count against the limits.
	cut := now.Add(-10 * time.Minute)
	i := 0
	for i < len(m.window) && m.window[i].Before(cut) {
		i++
	}
	m.window = append(m.window[i:], now)
	if now.Before(m.retryUntil) {
		// A request before the Retry-After we sent has passed: the
		// client did not honour it (throttling.md "wait the number of
		// seconds specified in the Retry-After header").
		s.stats.Violations++
		s.stats.Throttled++
		return nil, c.throttled("ApplicationThrottled", "Application is over its MailboxConcurrency limit.", m.retryUntil.Sub(now)), false
	}
	if m.forced > 0 {
		m.forced--
		ra := time.Duration(retryAfterSeconds(m.forcedRA)) * time.Second
		m.retryUntil = now.Add(ra)
		s.stats.Throttled++
		return nil, c.throttled("ApplicationThrottled", "Application is over its MailboxConcurrency limit.", ra), false
	}
	if m.inFlight >= s.opt.MailboxConcurrency {
		// throttling-limits.md: 4 concurrent requests per app per
		// mailbox; Exchange answers 429 ApplicationThrottled
		// "Application is over its MailboxConcurrency limit.".
		s.stats.Violations++
		s.stats.Throttled++
		m.retryUntil = now.Add(time.Second)
		return nil, c.throttled("ApplicationThrottled", "Application is over its MailboxConcurrency limit.", time.Second), false
	}
	if len(m.window) > s.opt.MailboxRequestsPer10Min {
		// 10,000 requests per 10 minutes per app per mailbox.
		wait := m.window[len(m.window)-s.opt.MailboxRequestsPer10Min-1].Add(10 * time.Minute).Sub(now)
		ra := time.Duration(retryAfterSeconds(wait)) * time.Second
		m.retryUntil = now.Add(ra)
		s.stats.Throttled++
		return nil, c.throttled("ApplicationThrottled", "Application is over its MailboxRequests limit.", ra), false
	}
	m.inFlight++
	if int64(m.inFlight) > s.stats.MaxInFlight {
		s.stats.MaxInFlight = int64(m.inFlight)
	}
	return func() {
		s.mu.Lock()
		m.inFlight--
		s.mu.Unlock()
	}, answer{}, true
}

// admitSharePoint spends cost resource units of the tenant's per-minute
// budget: 1 for a single item, a delta with a token or a download, 2 for
// multi-item reads, a delta without a token and writes (SharePoint
// throttling docs, "Resource units").
func (s *Server) admitSharePoint(c *call, cost int) (func(), answer, bool) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	b := &s.sp
	cut := now.Add(-time.Minute)
	i := 0
	for i < len(b.spent) && b.spent[i].at.Before(cut) {
		b.sum -= b.spent[i].cost
		i++
	}
	b.spent = b.spent[i:]
	if now.Before(b.retryUntil) {
		s.stats.Violations++
		s.stats.Throttled++
		return nil, c.throttled("activityLimitReached", "The request has been throttled", b.retryUntil.Sub(now)), false
	}
	if b.sum+cost > s.opt.SharePointRUPerMinute {
		// Wait until enough spent units leave the window.
		need := b.sum + cost - s.opt.SharePointRUPerMinute
		wait := time.Second
		freed := 0
		for _, sp := range b.spent {
			freed += sp.cost
			if freed >= need {
				wait = sp.at.Add(time.Minute).Sub(now)
				break
			}
		}
		ra := time.Duration(retryAfterSeconds(wait)) * time.Second
		b.retryUntil = now.Add(ra)
		s.stats.Throttled++
		return nil, c.throttled("activityLimitReached", "The request has been throttled", ra), false
	}
	b.spent = append(b.spent, spend{at: now, cost: cost})
	b.sum += cost
	return func() {}, answer{}, true
}
