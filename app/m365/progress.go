package m365

import (
	"sync"
	"time"

	"backstop/app"
)

// progressReporter calls the job's progress function at most every
// 200 ms, plus at phase changes and at the end. Safe for concurrent use.
type progressReporter struct {
	fn     Progress
	callMu sync.Mutex
	mu     sync.Mutex
	p      app.JobProgress
	last   time.Time
}

func newProgress(fn Progress) *progressReporter { return &progressReporter{fn: fn} }

func (r *progressReporter) phase(p string) {
	r.mu.Lock()
	r.p.Phase = p
	r.mu.Unlock()
	r.flush()
}

func (r *progressReporter) addTotals(items, bytes int64) {
	r.mu.Lock()
	r.p.ItemsTotal += items
	r.p.BytesTotal += bytes
	r.mu.Unlock()
}

func (r *progressReporter) addDone(items, bytes int64) {
	r.mu.Lock()
	r.p.ItemsDone += items
	r.p.BytesDone += bytes
	if r.p.ItemsDone > r.p.ItemsTotal {
		r.p.ItemsTotal = r.p.ItemsDone
	}
	due := time.Since(r.last) > 200*time.Millisecond
	r.mu.Unlock()
	if due {
		r.flush()
	}
}

func (r *progressReporter) flush() {
	if r.fn == nil {
		return
	}
	r.callMu.Lock()
	defer r.callMu.Unlock()
	r.mu.Lock()
	p := r.p
	r.last = time.Now()
	r.mu.Unlock()
	r.fn(p)
}
