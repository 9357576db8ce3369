package jobs

import (
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"backstop/app"
)

// Broker fans job progress out to stream subscribers in process, so that
// any number of streams cost no database reads after their first snapshot.
//
// One hub per job holds the job's current state and a short ring of recent
// events with increasing ids. Publishing appends to the ring and signals
// each subscriber's one-slot ready channel without blocking; subscribers
// read the ring at their own pace. A subscriber whose position fell out of
// the ring gets a fresh snapshot instead of the events it missed, so a slow
// client never holds up the job or costs more than its own cursor.
//
// Event ids come from one process-wide sequence seeded with the start time
// in microseconds: ids increase within a process and across restarts (as
// long as fewer than a million events a second were published), so a
// Last-Event-ID from before a restart is recognised as too old.
type Broker struct {
	now      app.Clock
	ringSize int
	linger   time.Duration
	seq      atomic.Int64

	mu        sync.Mutex
	hubs      map[string]*hub
	lastSweep time.Time
}

// NewBroker returns a broker keeping ringSize events per job and the hubs
// of ended jobs for linger after their end (for late resumes).
func NewBroker(now app.Clock, ringSize int, linger time.Duration) *Broker {
	if now == nil {
		now = app.SystemClock
	}
	ringSize = max(ringSize, 2)
	b := &Broker{now: now, ringSize: ringSize, linger: linger, hubs: map[string]*hub{}}
	b.seq.Store(now().UnixMicro())
	return b
}

var _ app.JobFeed = (*Broker)(nil)

type hub struct {
	mu         sync.Mutex
	job        *app.Job
	jobData    []byte // encoded job, for snapshot events
	pos        int64  // id of the newest event, or the hub's creation id
	floor      int64  // a cursor below this missed evicted events
	ring       []app.JobStreamEvent
	preEnd     int64 // pos before the end event was appended
	endID      int64 // id of the end event; 0 while running
	endedAt    time.Time
	subs       map[*stream]struct{}
	fromFollow bool // created for a subscriber, not by the runner
}

func (b *Broker) nextID() int64 { return b.seq.Add(1) }

func (b *Broker) newHub(j *app.Job) *hub {
	id := b.nextID()
	h := &hub{job: j, pos: id, floor: id, subs: map[*stream]struct{}{}}
	h.jobData, _ = json.Marshal(j)
	if app.JobTerminal(j.State) {
		// A hub for a job that ended before anyone watched: its history is
		// just the end, so snapshots are followed by it.
		h.preEnd, h.endedAt = id, b.now()
		h.endID = b.nextID()
		h.pos = h.endID
		h.ring = append(h.ring, app.JobStreamEvent{ID: h.endID, Type: app.StreamEnd, Data: h.jobData})
	}
	return h
}

// Publish records the job's new state: a state event when the state
// changed (and the end event when it is final), else a progress event when
// the progress changed. It never blocks on subscribers.
func (b *Broker) Publish(j *app.Job) {
	j = cloneJob(j)
	b.mu.Lock()
	h := b.hubs[j.ID]
	if h == nil {
		h = b.newHub(j)
		b.hubs[j.ID] = h
		b.mu.Unlock()
		if app.JobTerminal(j.State) {
			b.sweep()
		}
		return
	}
	b.mu.Unlock()

	h.mu.Lock()
	if h.endID != 0 {
		h.mu.Unlock()
		return // the end is final; late reports change nothing
	}
	old := h.job
	h.job = j
	h.jobData, _ = json.Marshal(j)
	switch {
	case old.State != j.State:
		data, _ := json.Marshal(struct {
			State string `json:"state"`
		}{j.State})
		b.appendLocked(h, app.StreamState, data)
		if app.JobTerminal(j.State) {
			h.preEnd = h.pos
			b.appendLocked(h, app.StreamEnd, h.jobData)
			h.endID, h.endedAt = h.pos, b.now()
		}
	case old.Progress != j.Progress:
		data, _ := json.Marshal(struct {
			State    string          `json:"state"`
			Progress app.JobProgress `json:"progress"`
		}{j.State, j.Progress})
		b.appendLocked(h, app.StreamProgress, data)
	}
	for s := range h.subs {
		s.signal()
	}
	ended := h.endID != 0
	h.mu.Unlock()
	if ended {
		b.sweep()
	}
}

func (b *Broker) appendLocked(h *hub, typ string, data []byte) {
	id := b.nextID()
	if len(h.ring) == b.ringSize {
		h.floor = h.ring[0].ID
		copy(h.ring, h.ring[1:])
		h.ring = h.ring[:len(h.ring)-1]
	}
	h.ring = append(h.ring, app.JobStreamEvent{ID: id, Type: typ, Data: data})
	h.pos = id
}

// Current returns the latest published state of a job, if a hub holds it.
func (b *Broker) Current(id string) (*app.Job, bool) {
	b.mu.Lock()
	h := b.hubs[id]
	b.mu.Unlock()
	if h == nil {
		return nil, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return cloneJob(h.job), true
}

// Follow implements app.JobFeed.
func (b *Broker) Follow(j *app.Job, lastEventID int64) (app.JobStream, bool) {
	b.sweep()
	b.mu.Lock()
	h := b.hubs[j.ID]
	if h == nil {
		// The stored state is current: every change of a job this process
		// runs is published (creating the hub) before anyone can read it.
		h = b.newHub(cloneJob(j))
		h.fromFollow = true
		b.hubs[j.ID] = h
	}
	h.mu.Lock()
	b.mu.Unlock()
	defer h.mu.Unlock()
	if h.endID != 0 && lastEventID >= h.endID && lastEventID <= h.pos {
		return nil, true
	}
	s := &stream{h: h, b: b, ready: make(chan struct{}, 1), needSnapshot: true}
	if lastEventID > 0 && lastEventID >= h.floor && lastEventID <= h.pos {
		s.cursor, s.needSnapshot = lastEventID, false
	}
	h.subs[s] = struct{}{}
	s.signal()
	return s, false
}

// Subscribers counts the open streams of a job (for tests and metrics).
func (b *Broker) Subscribers(id string) int {
	b.mu.Lock()
	h := b.hubs[id]
	b.mu.Unlock()
	if h == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// sweep forgets hubs nobody watches whose job ended more than linger ago,
// and hubs made for a subscriber of a job still queued (the runner's next
// publish recreates them). It runs at most every few seconds.
func (b *Broker) sweep() {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.Sub(b.lastSweep) < 5*time.Second {
		return
	}
	b.lastSweep = now
	for id, h := range b.hubs {
		h.mu.Lock()
		idle := len(h.subs) == 0
		drop := idle && ((h.endID != 0 && now.Sub(h.endedAt) > b.linger) || (h.fromFollow && h.job.State == app.JobQueued))
		h.mu.Unlock()
		if drop {
			delete(b.hubs, id)
		}
	}
}

// stream is one subscriber's cursor into a hub.
type stream struct {
	h            *hub
	b            *Broker
	ready        chan struct{}
	cursor       int64
	needSnapshot bool
}

func (s *stream) signal() {
	select {
	case s.ready <- struct{}{}:
	default: // already signalled; the reader will see everything pending
	}
}

func (s *stream) Ready() <-chan struct{} { return s.ready }

func (s *stream) Take() ([]app.JobStreamEvent, bool) {
	h := s.h
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []app.JobStreamEvent
	if !s.needSnapshot && s.cursor < h.floor {
		s.needSnapshot = true // fell behind the ring: resynchronise
	}
	if s.needSnapshot {
		s.needSnapshot = false
		at := h.pos
		if h.endID != 0 {
			at = h.preEnd // the snapshot precedes the end event
		}
		out = append(out, app.JobStreamEvent{ID: at, Type: app.StreamSnapshot, Data: h.jobData})
		s.cursor = at
	}
	for _, e := range h.ring {
		if e.ID > s.cursor {
			out = append(out, e)
			s.cursor = e.ID
		}
	}
	return out, h.endID != 0 && s.cursor >= h.endID
}

func (s *stream) Close() {
	s.h.mu.Lock()
	delete(s.h.subs, s)
	s.h.mu.Unlock()
}

func cloneJob(j *app.Job) *app.Job {
	c := *j
	c.ItemCauses = append([]app.ItemCause{}, j.ItemCauses...) // never nil: the wire form is a list
	return &c
}
