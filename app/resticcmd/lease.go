package resticcmd

import (
	"context"
	"sync"
)

// Leases lets one of the appliance's own runs at a time work on an
// endpoint's repository: a verify run and a retention prune of the same
// endpoint never overlap. Verify reads without a restic lock (so that it
// never makes an agent backup fail), which restic's exclusive prune lock
// therefore cannot see; the lease is what keeps packs from vanishing under
// a verify. Agent backups are kept apart from a prune by restic's own
// repository lock, not by a lease.
//
// The zero value is ready to use; a nil *Leases grants every lease at once
// (no serialisation), for callers that run alone.
type Leases struct {
	// OnWait, if set, is called when Acquire has to wait for the holder
	// of the endpoint's lease (tests use it to see a run waiting).
	OnWait func(endpointID, holder, heldBy string)

	mu   sync.Mutex
	held map[string]*lease
}

type lease struct {
	holder string
	done   chan struct{}
}

// Acquire waits until the endpoint's repository is free of the
// appliance's other runs, then takes it for holder ("verify",
// "retention"). It returns ctx's error if ctx ends first, without the
// lease. The caller must call release exactly once; later calls do
// nothing. Waiters are not queued in order: whichever wakes first wins.
func (l *Leases) Acquire(ctx context.Context, endpointID, holder string) (release func(), err error) {
	if l == nil {
		return func() {}, nil
	}
	for {
		l.mu.Lock()
		cur, busy := l.held[endpointID]
		if !busy {
			if l.held == nil {
				l.held = map[string]*lease{}
			}
			mine := &lease{holder: holder, done: make(chan struct{})}
			l.held[endpointID] = mine
			l.mu.Unlock()
			var once sync.Once
			return func() {
				once.Do(func() {
					l.mu.Lock()
					delete(l.held, endpointID)
					l.mu.Unlock()
					close(mine.done)
				})
			}, nil
		}
		l.mu.Unlock()
		if l.OnWait != nil {
			l.OnWait(endpointID, holder, cur.holder)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-cur.done:
		}
	}
}

// Holder returns who holds the endpoint's lease, or "".
func (l *Leases) Holder(endpointID string) string {
	if l == nil {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur, ok := l.held[endpointID]; ok {
		return cur.holder
	}
	return ""
}
