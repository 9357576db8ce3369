package app

import (
	"sync"
	"time"
)

// ProgressReporter hands a job's progress to fn at most every 200 ms, plus
// at phase changes and on Flush; the percentage follows from the items
// done and their total (a total below what is done is raised to it). Safe
// for concurrent use; fn is called by one goroutine at a time. The engines
// (IMAP, Microsoft 365) report through it.
type ProgressReporter struct {
	fn     func(JobProgress)
	callMu sync.Mutex // one call of fn at a time
	mu     sync.Mutex
	p      JobProgress
	last   time.Time
}

// NewProgressReporter reports to fn (nil: nowhere).
func NewProgressReporter(fn func(JobProgress)) *ProgressReporter { return &ProgressReporter{fn: fn} }

// Phase sets the phase and reports at once.
func (r *ProgressReporter) Phase(p string) {
	r.mu.Lock()
	r.p.Phase = p
	r.mu.Unlock()
	r.Flush()
}

// SetTotals sets the items and bytes expected.
func (r *ProgressReporter) SetTotals(items, bytes int64) {
	r.mu.Lock()
	r.p.ItemsTotal, r.p.BytesTotal = items, bytes
	r.mu.Unlock()
}

// AddTotals adds to the items and bytes expected.
func (r *ProgressReporter) AddTotals(items, bytes int64) {
	r.mu.Lock()
	r.p.ItemsTotal += items
	r.p.BytesTotal += bytes
	r.mu.Unlock()
}

// AddDone counts items and bytes done, reporting if the last report is
// older than 200 ms.
func (r *ProgressReporter) AddDone(items, bytes int64) {
	r.mu.Lock()
	r.p.ItemsDone += items
	r.p.BytesDone += bytes
	due := time.Since(r.last) > 200*time.Millisecond
	r.mu.Unlock()
	if due {
		r.Flush()
	}
}

// Flush reports now.
func (r *ProgressReporter) Flush() {
	if r.fn == nil {
		return
	}
	r.mu.Lock()
	p := r.p
	if p.ItemsDone > p.ItemsTotal {
		p.ItemsTotal = p.ItemsDone
	}
	if p.ItemsTotal > 0 {
		p.Percent = int(p.ItemsDone * 100 / p.ItemsTotal)
	}
	r.last = time.Now()
	r.mu.Unlock()
	r.callMu.Lock()
	r.fn(p)
	r.callMu.Unlock()
}
