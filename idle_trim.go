package main

import (
	"context"
	"net/http"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// idleTrimmer gives memory back to the operating system once the appliance
// has been quiet for a while. Go's heap keeps the pages a burst of requests
// grew it to (an endpoint listing allocates ~20 MB transiently) and returns
// them only slowly, and the endpoint cache holds ~1 KB per endpoint. After
// `quiet` without an HTTP request starting or ending, the trimmer runs each
// release function (dropping caches that are rebuilt on demand) and then
// debug.FreeOSMemory, a forced GC that returns every free page, and then
// gives back the executable's own pages (releaseExecutablePages). It does so
// once per quiet period: the next request re-arms it. Background work
// (cron, webhook delivery) does not count as activity; a trim during it
// costs one GC and is otherwise harmless.
type idleTrimmer struct {
	quiet   time.Duration
	release []func()
	now     func() time.Time
	// pageOut gives back the executable's own pages after the GC, and
	// pageIn restores the usual read-ahead when requests come again
	// (releaseExecutablePages, useExecutablePages; exe_pages_linux.go).
	pageOut func() int64
	pageIn  func()
	// asleep is set by a trim and cleared by the next request, which
	// undoes what the trim changed for idleness: the read-ahead of the
	// executable and the GC percentage (busyGC holds the one to restore).
	asleep atomic.Bool
	busyGC int

	last    atomic.Int64 // Unix nanoseconds of the latest request start or end
	trimmed int64        // the value of last when the latest trim ran; only the trimming goroutine uses it
	trims   atomic.Int64 // how many trims ran (for tests)

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// idleGCPercent is the GC percentage while the appliance is idle.
const idleGCPercent = 10

func newIdleTrimmer(quiet time.Duration, release ...func()) *idleTrimmer {
	t := &idleTrimmer{quiet: quiet, release: release, now: time.Now,
		pageOut: releaseExecutablePages, pageIn: useExecutablePages}
	t.last.Store(t.now().UnixNano())
	t.trimmed = -1
	return t
}

// Track wraps h so that every request re-arms the trimmer.
func (t *idleTrimmer) Track(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.touch()
		defer t.touch() // a long request (a stream, an upload) counts until it ends
		if t.asleep.Load() && t.asleep.CompareAndSwap(true, false) {
			debug.SetGCPercent(t.busyGC)
			t.pageIn()
		}
		h.ServeHTTP(w, r)
	})
}

func (t *idleTrimmer) touch() { t.last.Store(t.now().UnixNano()) }

// maybeTrim trims if the quiet period has passed since the latest request
// and no trim ran since; it reports whether it trimmed. Only one goroutine
// may call it.
func (t *idleTrimmer) maybeTrim() bool {
	last := t.last.Load()
	if last == t.trimmed || t.now().UnixNano()-last < int64(t.quiet) {
		return false
	}
	t.trimmed = last
	for _, f := range t.release {
		f()
	}
	// Two collections: the first moves what sync.Pools hold (the HTTP
	// server's bufio readers and writers, upload buffers) to their victim
	// caches, the second, FreeOSMemory's, frees them and returns every free
	// page.
	runtime.GC()
	debug.FreeOSMemory()
	t.pageOut()
	// Idle, the background work (timers, the webhook dispatcher, the
	// change-log pruner) still allocates a little; at the usual GOGC the
	// heap would double before the next collection. A collection per 10 %
	// of growth costs next to nothing at that rate and keeps the idle
	// footprint where the trim left it.
	if !t.asleep.Load() {
		t.busyGC = debug.SetGCPercent(idleGCPercent)
		t.asleep.Store(true)
	}
	t.trims.Add(1)
	return true
}

// Settle gives back what background work (the ten-minute schedule syncs)
// took while the appliance is idle since a trim: the same release functions
// and collection, without paging the executable out again. While requests
// come, it does nothing; the next trim will.
func (t *idleTrimmer) Settle() {
	if !t.asleep.Load() {
		return
	}
	for _, f := range t.release {
		f()
	}
	debug.FreeOSMemory()
}

// Open starts checking every quarter of the quiet period.
func (t *idleTrimmer) Open() {
	ctx, cancel := context.WithCancel(context.Background())
	t.cancel = cancel
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		tick := time.NewTicker(t.quiet / 4)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				t.maybeTrim()
			}
		}
	}()
}

// Close stops the trimmer and waits for a trim in progress.
func (t *idleTrimmer) Close() {
	if t.cancel != nil {
		t.cancel()
	}
	t.wg.Wait()
}
