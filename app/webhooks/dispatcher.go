// Package webhooks delivers Backstop's events to the receivers tenants
// register: the SSRF guard and its HTTP client, secret sealing, request
// signing (X-Service-Signature and Standard Webhooks), the service behind the
// /api/v1/webhooks routes, and the Dispatcher that fans events out and
// attempts deliveries.
package webhooks

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"backstop/app"
)

// Dispatcher is the owned component that turns outbox events into webhook
// deliveries and attempts them.
//
// One scheduler goroutine fans undispatched events out (a delivery per
// subscribed webhook, committed with the event's dispatched mark) and
// claims due deliveries for a bounded pool of workers, at most PerWebhook
// at a time for one webhook, so a receiver that hangs for the full attempt
// timeout holds only its own slots. A single writer commits the outcomes in
// batches and only then frees the claims, so a delivery is never attempted
// twice for one due time. The queue is the database: after a crash or kill
// -9, every pending delivery is attempted again (an attempt cut short by
// the crash is repeated with the same delivery id, which receivers use to
// drop duplicates).
//
// The scheduler wakes on Notify (the store calls it after every commit that
// added events, the Service after queueing a delivery or enabling a
// webhook), when the next delivery falls due, when a worker slot frees,
// and every PollInterval as a fallback (events written by another process,
// a failed read retried). An idle appliance so wakes it every 10 s, not 4
// times a second.
type Dispatcher struct {
	Store  app.WebhookStore
	Events app.EventService
	Box    *SecretBox
	// Client makes the attempts; Guard.Client() in production.
	Client *http.Client
	Now    app.Clock
	Logger *slog.Logger
	// Workers bounds concurrent attempts (default 32); PerWebhook bounds
	// them per webhook (default 8).
	Workers    int
	PerWebhook int
	// PollInterval is the longest the scheduler sleeps (default 10 s): it
	// bounds the delay of events whose producer did not call Notify.
	PollInterval time.Duration
	// UserAgent of every attempt (default backstop-webhooks/<app.Version>).
	UserAgent string
	// Attempted, if set, is called with the outcome of every attempt made
	// (not those cut short by Close), before it is committed. It must not
	// block: metrics count attempts and ended deliveries here.
	Attempted func(*app.AttemptOutcome)

	wake    chan struct{} // events or deliveries were added
	freed   chan struct{} // claims were released
	jobs    chan *app.DueDelivery
	results chan *app.AttemptOutcome
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu       sync.Mutex
	inflight map[string]string // delivery id -> webhook id
	perHook  map[string]int    // webhook id -> attempts in flight
}

// Open applies defaults and starts the scheduler, the workers and the
// outcome writer. It returns at once.
func (d *Dispatcher) Open() {
	if d.Now == nil {
		d.Now = app.SystemClock
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.Workers <= 0 {
		d.Workers = 32
	}
	if d.PerWebhook <= 0 {
		d.PerWebhook = 8
	}
	if d.PollInterval <= 0 {
		d.PollInterval = 10 * time.Second
	}
	if d.UserAgent == "" {
		d.UserAgent = "backstop-webhooks/" + app.Version
	}
	d.wake = make(chan struct{}, 1)
	d.freed = make(chan struct{}, 1)
	d.jobs = make(chan *app.DueDelivery, d.claimLimit())
	d.results = make(chan *app.AttemptOutcome, d.Workers)
	d.inflight = map[string]string{}
	d.perHook = map[string]int{}

	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	var workers sync.WaitGroup
	for range d.Workers {
		workers.Add(1)
		go func() { defer workers.Done(); d.work(ctx) }()
	}
	d.wg.Add(3)
	go func() { defer d.wg.Done(); d.schedule(ctx) }()
	go func() { defer d.wg.Done(); workers.Wait(); close(d.results) }()
	go func() { defer d.wg.Done(); d.write() }()
}

// Close stops the component and waits for it. Attempts in flight are
// abandoned without an outcome: their deliveries stay pending and are
// attempted again after the next start. Outcomes already made are
// committed before Close returns. Call it before closing the database.
func (d *Dispatcher) Close() {
	if d.cancel == nil {
		return
	}
	d.cancel()
	d.wg.Wait()
}

// Notify wakes the scheduler now: call it after committing an event (or a
// delivery) so that its first attempt does not wait for the next poll.
// It never blocks.
func (d *Dispatcher) Notify() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Purge deletes deliveries (with their attempt log) that finished more than
// app.DeliveryRetention ago; run it from cron.
func (d *Dispatcher) Purge(ctx context.Context) (int, error) {
	return d.Store.PurgeDeliveries(ctx, d.Now().Add(-app.DeliveryRetention))
}

func (d *Dispatcher) schedule(ctx context.Context) {
	defer close(d.jobs)
	timer := time.NewTimer(0)
	defer timer.Stop()
	fanOut := true
	for {
		if fanOut {
			d.fanOut(ctx)
		}
		d.claim(ctx)
		wait := d.PollInterval
		if next, err := d.Store.NextDueAt(ctx); err == nil && next != nil {
			// A due delivery that could not be claimed (its webhook is at
			// capacity) is picked up when a slot frees, which wakes us.
			if w := next.Sub(d.Now()); w > 0 && w < wait {
				wait = w
			}
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
			fanOut = true
		case <-d.freed:
			fanOut = false // only slots changed: claim, skip the outbox
		case <-timer.C:
			fanOut = true
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

const fanOutBatch = 500

// fanOut creates the deliveries of every undispatched event.
func (d *Dispatcher) fanOut(ctx context.Context) {
	for ctx.Err() == nil {
		events, err := d.Events.UndispatchedEvents(ctx, fanOutBatch)
		if err != nil || len(events) == 0 {
			if err != nil && ctx.Err() == nil {
				d.Logger.Error("reading undispatched events failed", slog.Any("error", err))
			}
			return
		}
		if _, err := d.Store.FanOut(ctx, events); err != nil {
			if ctx.Err() == nil {
				d.Logger.Error("fanning out events failed", slog.Any("error", err))
			}
			return
		}
		if len(events) < fanOutBatch {
			return
		}
	}
}

// claimLimit is how many deliveries may be claimed at once: twice the
// workers, so that a queue of claimed work keeps them busy while the writer
// commits outcomes and the scheduler claims more.
func (d *Dispatcher) claimLimit() int { return 2 * d.Workers }

// claim hands due deliveries to the workers while slots are free.
func (d *Dispatcher) claim(ctx context.Context) {
	for ctx.Err() == nil {
		d.mu.Lock()
		free := d.claimLimit() - len(d.inflight)
		skipD := make([]string, 0, len(d.inflight))
		for id := range d.inflight {
			skipD = append(skipD, id)
		}
		var skipW []string
		for w, n := range d.perHook {
			if n >= d.PerWebhook {
				skipW = append(skipW, w)
			}
		}
		d.mu.Unlock()
		if free <= 0 {
			return
		}
		due, err := d.Store.DueDeliveries(ctx, d.Now(), skipD, skipW, free)
		if err != nil {
			if ctx.Err() == nil {
				d.Logger.Error("reading due deliveries failed", slog.Any("error", err))
			}
			return
		}
		if len(due) == 0 {
			return
		}
		d.mu.Lock()
		for _, dd := range due {
			// Rows beyond a webhook's free slots wait for the next round,
			// which skips that webhook while it is full.
			if d.perHook[dd.WebhookID] >= d.PerWebhook {
				continue
			}
			d.inflight[dd.ID] = dd.WebhookID
			d.perHook[dd.WebhookID]++
			d.jobs <- dd // never blocks: the buffer holds claimLimit jobs
		}
		d.mu.Unlock()
	}
}

func (d *Dispatcher) release(deliveryID string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	w, ok := d.inflight[deliveryID]
	if !ok {
		return
	}
	delete(d.inflight, deliveryID)
	if d.perHook[w]--; d.perHook[w] <= 0 {
		delete(d.perHook, w)
	}
}

func (d *Dispatcher) work(ctx context.Context) {
	for dd := range d.jobs {
		out := d.attempt(ctx, dd)
		if out == nil { // shutting down: no outcome, the delivery stays pending
			d.release(dd.ID)
			continue
		}
		if d.Attempted != nil {
			d.Attempted(out)
		}
		d.results <- out
	}
}

const writeBatch = 256

// write commits outcomes in batches, then frees their claims and wakes the
// scheduler for the freed slots.
func (d *Dispatcher) write() {
	batch := make([]*app.AttemptOutcome, 0, writeBatch)
	for o := range d.results {
		batch = append(batch[:0], o)
	gather:
		for len(batch) < writeBatch {
			select {
			case o, ok := <-d.results:
				if !ok {
					break gather
				}
				batch = append(batch, o)
			default:
				break gather
			}
		}
		// Not the component's context: outcomes made before Close must
		// still be committed after it was cancelled.
		if err := d.Store.RecordAttempts(context.Background(), batch); err != nil {
			d.Logger.Error("recording delivery attempts failed; they will be repeated", slog.Int("attempts", len(batch)), slog.Any("error", err))
		}
		for _, o := range batch {
			d.release(o.DeliveryID)
		}
		select {
		case d.freed <- struct{}{}:
		default:
		}
	}
}
