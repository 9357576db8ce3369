package restapi

import (
	"sync"
	"time"
)

// rateLimiter is a strict rolling window per key: a request is allowed when
// fewer than limit requests were allowed in the preceding window. Unlike a
// token bucket it never starts full: 600 per 10 minutes means at most 600 in
// any 10-minute span. State is in memory; a restart forgets it.
//
// Each key keeps a ring of the times of its allowed requests in the window,
// to the millisecond, as 4-byte offsets from a base. Requests within one
// slot (a 1024th of the window: 586 ms of the default 10 minutes) share an
// entry that holds their count and the time of the latest of them, and
// leave the window together when that one does. So the window stays strict
// (a request is remembered for at most one slot longer than it must be),
// and a key costs at most 8 bytes per slot, ~8 KB, however high the limit
// is raised and however fast it is used; the ring grows on demand, so an
// unused allowance costs nothing.
type rateLimiter struct {
	limit  int
	window time.Duration
	slotMS int64 // window / windowSlots, rounded up to the millisecond
	mu     sync.Mutex
	keys   map[string]*ring
	calls  int
}

// windowSlots is how many slots a window has (see rateLimiter).
const windowSlots = 1024

type ring struct {
	base   int64    // Unix milliseconds the offsets count from
	times  []uint32 // per entry, the latest of its requests, in ms after base; oldest entry at head
	counts []uint32 // per entry, how many requests it holds
	head   int
	n      int // entries
	total  int // requests in the window: the sum of the entries' counts
}

// at is the Unix millisecond of the i-th oldest entry.
func (r *ring) at(i int) int64 { return r.base + int64(r.times[(r.head+i)%len(r.times)]) }

// push appends an entry for the time t (Unix ms, not before the newest);
// the ring has room.
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
	j := (r.head + r.n) % len(r.times)
	r.times[j], r.counts[j] = uint32(t-r.base), 1
	r.n++
	r.total++
}

// resize copies the entries into a new ring of size (at least r.n), oldest first.
func (r *ring) resize(size int) {
	times, counts := make([]uint32, size), make([]uint32, size)
	for i := 0; i < r.n; i++ {
		j := (r.head + i) % len(r.times)
		times[i], counts[i] = r.times[j], r.counts[j]
	}
	r.times, r.counts, r.head = times, counts, 0
}

// maxEntries is the most entries a ring needs: one per request up to the
// limit, and never more than the slots a window can touch.
func (l *rateLimiter) maxEntries() int {
	return min(l.limit, int(l.window.Milliseconds()/l.slotMS)+2)
}

// grow makes room for one more entry, keeping the order (oldest first).
func (l *rateLimiter) grow(r *ring) { r.resize(min(l.maxEntries(), max(16, 2*len(r.times)))) }

// sweepEvery bounds the map: every so many calls, keys whose whole window
// has passed are dropped (a flood of distinct IPs cannot grow it forever).
const sweepEvery = 4096

func newRateLimiter(limit int, window time.Duration) *rateLimiter {
	return &rateLimiter{limit: limit, window: window, slotMS: max(1, (window.Milliseconds()+windowSlots-1)/windowSlots), keys: map[string]*ring{}}
}

// expire drops the entries that left the window; the caller holds l.mu.
func (l *rateLimiter) expire(r *ring, now int64) {
	for r.n > 0 && now-r.at(0) >= l.window.Milliseconds() {
		r.total -= int(r.counts[r.head])
		r.head = (r.head + 1) % len(r.times)
		r.n--
	}
}

// resetSeconds is the time until the oldest entry leaves the window, at least 1.
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
	if r.total < l.limit {
		if r.n > 0 {
			t = max(t, r.at(r.n-1)) // a wall clock stepped back: the times stay in order
		}
		if r.n > 0 && r.at(r.n-1)/l.slotMS == t/l.slotMS {
			// The same slot as the newest entry: it now ends at t.
			j := (r.head + r.n - 1) % len(r.times)
			r.times[j] = uint32(t - r.base)
			r.counts[j]++
			r.total++
		} else {
			if r.n == len(r.times) {
				l.grow(r)
			}
			r.push(t)
		}
		ok = true
	}
	return ok, l.limit - r.total, l.resetSeconds(r, t)
}

// compact drops the entries that left the window and the keys with none,
// and shrinks every ring to the entries it holds, so an idle appliance
// keeps what the window needs and no more (grow doubles).
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
	return r.total >= l.limit, l.resetSeconds(r, t)
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
