package restapi

import (
	"sync"
	"time"
)

// rateLimiter is a strict rolling window per key: a request is allowed when
// fewer than limit requests were allowed in the preceding window. Unlike a
// token bucket it never starts full: 600 per 10 minutes means at most 600 in
// any 10-minute span. Each key keeps a ring of its allowed request times in
// the window, to the millisecond, as 4-byte offsets from a base, grown on
// demand up to `limit` entries, so a raised limit costs memory only for the
// requests really made. State is in memory; a restart forgets it.
type rateLimiter struct {
	limit  int
	window time.Duration
	mu     sync.Mutex
	keys   map[string]*ring
	calls  int
}

type ring struct {
	base  int64    // Unix milliseconds the offsets count from
	times []uint32 // milliseconds after base of allowed requests, oldest at head; len <= limit
	head  int
	n     int
}

// at is the Unix millisecond of the i-th oldest time.
func (r *ring) at(i int) int64 { return r.base + int64(r.times[(r.head+i)%len(r.times)]) }

// push appends the time t (Unix ms, not before the newest); the ring has room.
func (r *ring) push(t int64) {
	if r.n == 0 {
		r.base = t
	} else if t-r.base >= 1<<31 {
		// Offsets stay far from overflowing: every time in the ring is
		// within the window of t, so counting from the oldest keeps them
		// small.
		oldest := r.at(0)
		for i := 0; i < r.n; i++ {
			j := (r.head + i) % len(r.times)
			r.times[j] = uint32(r.base + int64(r.times[j]) - oldest)
		}
		r.base = oldest
	}
	r.times[(r.head+r.n)%len(r.times)] = uint32(t - r.base)
	r.n++
}

// resize copies the times into a new ring of size (at least r.n), oldest first.
func (r *ring) resize(size int) {
	times := make([]uint32, size)
	for i := 0; i < r.n; i++ {
		times[i] = r.times[(r.head+i)%len(r.times)]
	}
	r.times, r.head = times, 0
}

// grow makes room for one more time, keeping the order (oldest first).
func (l *rateLimiter) grow(r *ring) { r.resize(min(l.limit, max(16, 2*len(r.times)))) }

// sweepEvery bounds the map: every so many calls, keys whose whole window
// has passed are dropped (a flood of distinct IPs cannot grow it forever).
const sweepEvery = 4096

func newRateLimiter(limit int, window time.Duration) *rateLimiter {
	return &rateLimiter{limit: limit, window: window, keys: map[string]*ring{}}
}

// expire drops the times that left the window; the caller holds l.mu.
func (l *rateLimiter) expire(r *ring, now int64) {
	for r.n > 0 && now-r.at(0) >= l.window.Milliseconds() {
		r.head = (r.head + 1) % len(r.times)
		r.n--
	}
}

// resetSeconds is the time until the oldest time leaves the window, at least 1.
func (l *rateLimiter) resetSeconds(r *ring, now int64) int {
	if r.n == 0 {
		return int(l.window / time.Second)
	}
	wait := time.Duration(r.at(0)+l.window.Milliseconds()-now) * time.Millisecond
	return max(1, int((wait+time.Second-1)/time.Second))
}

// allow records a request by key at now. It returns whether it is allowed,
// how many remain in the window after it, and the seconds until the next
// slot frees (for Retry-After and the RateLimit header's t).
func (l *rateLimiter) allow(key string, now time.Time) (ok bool, remaining, reset int) {
	t := now.UnixMilli()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.calls++; l.calls%sweepEvery == 0 {
		for k, r := range l.keys {
			if l.expire(r, t); r.n == 0 {
				delete(l.keys, k)
			}
		}
	}
	r := l.keys[key]
	if r == nil {
		r = &ring{}
		l.keys[key] = r
	}
	l.expire(r, t)
	if r.n < l.limit {
		if r.n == len(r.times) {
			l.grow(r)
		}
		r.push(t)
		ok = true
	}
	return ok, l.limit - r.n, l.resetSeconds(r, t)
}

// compact drops the times that left the window and the keys with none, and
// shrinks every ring to the times it holds, so an idle appliance keeps 4
// bytes per request of the window and no more (grow doubles).
func (l *rateLimiter) compact(now time.Time) {
	t := now.UnixMilli()
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, r := range l.keys {
		if l.expire(r, t); r.n == 0 {
			delete(l.keys, k)
			continue
		}
		if r.n < len(r.times) {
			r.resize(r.n)
		}
	}
}

// full reports, without recording anything, whether key has used its window
// and the seconds until a slot frees.
func (l *rateLimiter) full(key string, now time.Time) (bool, int) {
	t := now.UnixMilli()
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.keys[key]
	if r == nil {
		return false, 0
	}
	l.expire(r, t)
	return r.n >= l.limit, l.resetSeconds(r, t)
}

// loginLimiter limits failed sign-ins per IP and per account: after too many
// failures within 15 minutes, attempts are refused until the oldest failure
// leaves the window.
type loginLimiter struct {
	byIP, byAccount *rateLimiter
}

func newLoginLimiter() *loginLimiter {
	return &loginLimiter{byIP: newRateLimiter(20, 15*time.Minute), byAccount: newRateLimiter(5, 15*time.Minute)}
}

// blocked reports whether attempts are refused now, and for how many seconds.
func (l *loginLimiter) blocked(ip, account string, now time.Time) (bool, int) {
	if full, wait := l.byIP.full(ip, now); full {
		return true, wait
	}
	return l.byAccount.full(account, now)
}

// failed records a failed attempt.
func (l *loginLimiter) failed(ip, account string, now time.Time) {
	l.byIP.allow(ip, now)
	l.byAccount.allow(account, now)
}
