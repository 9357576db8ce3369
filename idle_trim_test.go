package main

import (
	"net/http"
	"net/http/httptest"
	"runtime/debug"
	"sync"
	"testing"
	"time"
)

// The trimmer releases once per quiet period, only after the period has
// passed since the latest request, and a request re-arms it.
func TestIdleTrimmerTrimsOncePerQuietPeriod(t *testing.T) {
	var mu sync.Mutex
	clock := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	released := 0
	tr := newIdleTrimmer(30*time.Second, func() { released++ })
	tr.now = now
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	gcPercent := func() int { p := debug.SetGCPercent(0); debug.SetGCPercent(p); return p }
	pagedOut, pagedIn := 0, 0
	tr.pageOut = func() int64 { pagedOut++; return 1 }
	tr.pageIn = func() { pagedIn++ }
	tr.last.Store(now().UnixNano())
	h := tr.Track(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { advance(time.Second) }))
	request := func() { h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil)) }

	advance(29 * time.Second)
	if tr.maybeTrim() {
		t.Fatal("trimmed before the quiet period passed")
	}
	advance(time.Second)
	if !tr.maybeTrim() || released != 1 || pagedOut != 1 {
		t.Fatalf("no trim after 30 s of quiet (released %d, paged out %d)", released, pagedOut)
	}
	if p := gcPercent(); p != idleGCPercent {
		t.Fatalf("GC percent %d while idle, want %d", p, idleGCPercent)
	}
	tr.Settle() // background work while idle: released again, not paged out again
	if released != 2 || pagedOut != 1 {
		t.Fatalf("Settle while idle: released %d, paged out %d; want 2, 1", released, pagedOut)
	}
	released = 1
	advance(time.Hour)
	if tr.maybeTrim() || released != 1 {
		t.Fatal("trimmed again without a request in between")
	}
	request() // starts now, ends a second later: the quiet period counts from its end
	if pagedIn != 1 {
		t.Fatalf("read-ahead restored %d times by the first request after a trim, want once", pagedIn)
	}
	if p := gcPercent(); p != 100 {
		t.Fatalf("GC percent %d after a request, want the 100 of before the trim", p)
	}
	if tr.Settle(); released != 1 {
		t.Fatal("Settle released memory while requests come")
	}
	advance(29 * time.Second)
	if tr.maybeTrim() {
		t.Fatal("trimmed 29 s after a request ended")
	}
	advance(time.Second)
	if !tr.maybeTrim() || released != 2 || tr.trims.Load() != 2 || pagedOut != 2 {
		t.Fatalf("no trim after the request's quiet period (released %d, paged out %d)", released, pagedOut)
	}
	request()
	request()
	if pagedIn != 2 {
		t.Fatalf("read-ahead restored %d times after two trims, want twice", pagedIn)
	}
}
