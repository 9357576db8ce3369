package restapi

import (
	"math/rand/v2"
	"testing"
	"time"
)

// The ring grows on demand: a raised limit must cost nothing until used,
// and the window must stay exact while the ring grows and wraps.
func TestRateLimiterGrowsAndStaysExact(t *testing.T) {
	const limit = 100
	l := newRateLimiter(limit, 10*time.Second)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, remaining, _ := l.allow("k", now); remaining != limit-1 || len(l.keys["k"].times) > 16 {
		t.Fatalf("first use: remaining %d, ring of %d", remaining, len(l.keys["k"].times))
	}
	// 99 more at 50 ms spacing: all allowed, then the 101st is refused.
	for i := 1; i < limit; i++ {
		if ok, _, _ := l.allow("k", now.Add(time.Duration(i)*50*time.Millisecond)); !ok {
			t.Fatalf("request %d refused", i+1)
		}
	}
	at := now.Add(limit * 50 * time.Millisecond) // 5 s
	if ok, remaining, reset := l.allow("k", at); ok || remaining != 0 || reset != 5 {
		t.Fatalf("101st: ok %v remaining %d reset %d, want refused, 0, 5", ok, remaining, reset)
	}
	if n := len(l.keys["k"].times); n != limit {
		t.Fatalf("ring grew to %d, want exactly the limit %d", n, limit)
	}
	// Once the first 20 requests leave the window, exactly 20 slots free,
	// across the wrap of the ring.
	at = now.Add(10*time.Second + 19*50*time.Millisecond)
	for i := 0; i < 20; i++ {
		if ok, _, _ := l.allow("k", at); !ok {
			t.Fatalf("slot %d after expiry refused", i)
		}
	}
	if ok, _, _ := l.allow("k", at); ok {
		t.Fatal("a 21st slot was allowed")
	}
	// A huge limit allocates only what is used.
	big := newRateLimiter(1_000_000_000, time.Minute)
	for i := 0; i < 1000; i++ {
		big.allow("k", now.Add(time.Duration(i)*time.Millisecond))
	}
	if n := len(big.keys["k"].times); n > 2048 {
		t.Fatalf("1000 requests under a limit of 1e9 hold a ring of %d", n)
	}
}

// compact keeps exactly the times still in the window: the same requests
// are allowed and refused afterwards, rings hold no slack, idle keys go.
func TestRateLimiterCompactKeepsTheWindow(t *testing.T) {
	const limit = 50
	l := newRateLimiter(limit, 10*time.Second)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 40 { // 40 requests at 100 ms spacing: a ring of 64 after doubling
		l.allow("busy", now.Add(time.Duration(i)*100*time.Millisecond))
	}
	l.allow("idle", now)
	at := now.Add(10*time.Second + 50*time.Millisecond) // "idle" and the first busy request left the window
	l.compact(at)
	if _, ok := l.keys["idle"]; ok {
		t.Fatal("a key with nothing in its window was kept")
	}
	if r := l.keys["busy"]; r == nil || r.n != 39 || len(r.times) != 39 || r.head != 0 {
		t.Fatalf("busy ring after compact: %+v", r)
	}
	// 11 more fit (39 + 11 = 50), the 12th does not; the ring grows again.
	for i := range 11 {
		if ok, _, _ := l.allow("busy", at); !ok {
			t.Fatalf("request %d after compact refused", i+1)
		}
	}
	if ok, _, reset := l.allow("busy", at); ok || reset != 1 {
		t.Fatalf("51st in the window: ok %v reset %d, want refused, 1 s", ok, reset)
	}
}

// A key in use for longer than 4-byte millisecond offsets reach (49 days)
// keeps an exact window: the ring counts from a newer base instead.
func TestRateLimiterOffsetsRebase(t *testing.T) {
	l := newRateLimiter(3, 10*time.Second)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const step = 5 * time.Second // two in every window
	for i := 0; time.Duration(i)*step < 60*24*time.Hour; i++ {
		ok, remaining, _ := l.allow("k", now.Add(time.Duration(i)*step))
		if want := 1; !ok || (i > 0 && remaining != want) {
			t.Fatalf("request %d (day %.1f): ok %v remaining %d, want allowed with %d left", i, float64(i)*step.Hours()/24, ok, remaining, want)
		}
	}
	r := l.keys["k"]
	if newest := r.at(r.n - 1); newest-r.base > 1<<31 {
		t.Fatalf("offsets grew to %d ms", newest-r.base)
	}
	// The window is still exact at the end: a third request 1 ms later
	// fits, a fourth does not.
	end := now.Add(60*24*time.Hour - step + time.Millisecond)
	if ok, _, _ := l.allow("k", end); !ok {
		t.Fatal("third in the window refused")
	}
	if ok, _, _ := l.allow("k", end); ok {
		t.Fatal("fourth in the window allowed")
	}
}

// A key used thousands of times a second under a raised limit keeps a
// bounded ring (entries per slot, not per request), and the window stays
// strict: no span of the window ever holds more than the limit, and a
// request is refused only when the window and one slot before it hold the
// limit. Checked against the exact count of what was allowed.
func TestRateLimiterBoundedAndStrict(t *testing.T) {
	const limit, window = 20_000, 10 * time.Second
	l := newRateLimiter(limit, window)
	rng := rand.New(rand.NewPCG(1, 2))
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var allowed []int64 // Unix ms of every allowed request
	lo, loSlack := 0, 0 // first index inside the window, and inside the window plus a slot
	refused := 0
	for i := 0; i < 300_000; i++ {
		gap := time.Duration(rng.IntN(400)) * time.Microsecond // ~5,000 a second: far over 2,000 a second
		if rng.IntN(20_000) == 0 {
			gap = time.Duration(rng.IntN(8000)) * time.Millisecond // now and then a pause
		}
		now = now.Add(gap)
		t0 := now.UnixMilli()
		for lo < len(allowed) && t0-allowed[lo] >= window.Milliseconds() {
			lo++
		}
		for loSlack < len(allowed) && t0-allowed[loSlack] >= window.Milliseconds()+l.slotMS {
			loSlack++
		}
		ok, remaining, _ := l.allow("k", now)
		r := l.keys["k"]
		if len(r.times) > l.maxEntries() || l.maxEntries() > windowSlots+2 {
			t.Fatalf("request %d: a ring of %d entries (at most %d)", i, len(r.times), l.maxEntries())
		}
		if remaining != limit-r.total {
			t.Fatalf("request %d: remaining %d, the ring holds %d", i, remaining, r.total)
		}
		if ok {
			if held := len(allowed) - lo; held >= limit {
				t.Fatalf("request %d allowed with %d already in the window", i, held)
			}
			allowed = append(allowed, t0)
		} else {
			refused++
			if held := len(allowed) - loSlack; held < limit {
				t.Fatalf("request %d refused with only %d in the window and a slot", i, held)
			}
		}
	}
	if refused == 0 || len(allowed) < 2*limit {
		t.Fatalf("the load did not exercise the limit: %d allowed, %d refused", len(allowed), refused)
	}
}
