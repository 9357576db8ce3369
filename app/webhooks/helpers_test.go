package webhooks_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/webhooks"
	"backstop/store"
)

// testClock is an injected clock the test moves by hand.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *testClock {
	return &testClock{t: time.Now().UTC().Truncate(time.Second)}
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// env is a real SQLite database, the webhook service and a running
// dispatcher, all on one injected clock.
type env struct {
	t     *testing.T
	dir   string
	db    *store.DB
	clock *testClock
	box   *webhooks.SecretBox
	guard *webhooks.Guard
	svc   *webhooks.Service
	disp  *webhooks.Dispatcher
}

func newEnv(t *testing.T, allowPrivate bool) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{t: t, dir: dir, clock: newClock()}
	db, err := store.Open(context.Background(), dir+"/backstop.db")
	if err != nil {
		t.Fatal(err)
	}
	db.Now = e.clock.Now
	e.db = db
	t.Cleanup(func() { db.Close() })
	if e.box, err = webhooks.OpenSecretBox(dir); err != nil {
		t.Fatal(err)
	}
	e.guard = webhooks.NewGuard(allowPrivate)
	e.startDispatcher()
	return e
}

func (e *env) startDispatcher() {
	e.disp = &webhooks.Dispatcher{Store: e.db, Events: e.db, Box: e.box, Client: e.guard.Client(), Now: e.clock.Now,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), PerWebhook: 2, Workers: 8,
		PollInterval: time.Minute} // longer than any wait: every test runs on wake-ups alone
	e.svc = &webhooks.Service{Store: e.db, Guard: e.guard, Box: e.box, Notify: e.disp.Notify, Now: e.clock.Now}
	e.db.OnEventsCommitted(e.disp.Notify) // as serve wires it
	e.disp.Open()
	e.t.Cleanup(e.disp.Close)
}

func (e *env) tenant() string {
	e.t.Helper()
	tn := &app.Tenant{ID: app.NewID(app.PrefixTenant), Name: "Acme"}
	if err := e.db.CreateTenant(context.Background(), tn); err != nil {
		e.t.Fatal(err)
	}
	return tn.ID
}

// webhook registers a webhook through the service and returns it with its secret.
func (e *env) webhook(tenant, url string, events ...string) (*app.Webhook, string) {
	e.t.Helper()
	if len(events) == 0 {
		events = []string{app.EventJobFailed}
	}
	w := &app.Webhook{TenantID: tenant, URL: url, Events: events, Enabled: true}
	secret, err := e.svc.CreateWebhook(context.Background(), w)
	if err != nil {
		e.t.Fatal(err)
	}
	return w, secret
}

// publish writes an event to the outbox, as a job's end does; the store
// wakes the dispatcher (a missed wake-up fails the tests waiting for a
// delivery: the poll is a minute).
func (e *env) publish(tenant, typ string) *app.Event {
	e.t.Helper()
	ev := &app.Event{Type: typ, TenantID: tenant, Data: map[string]any{"job": map[string]any{"id": "job_1", "state": "failed"}}}
	if err := e.db.PublishEvent(context.Background(), ev); err != nil {
		e.t.Fatal(err)
	}
	return ev
}

// waitDelivery polls the delivery until cond holds (the dispatcher works
// in real time; only its clock is injected).
func (e *env) waitDelivery(webhookID string, cond func(d *app.Delivery) bool) *app.Delivery {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ds, err := e.db.Deliveries(context.Background(), app.DeliveryFilter{WebhookID: webhookID, Limit: 1000})
		if err != nil {
			e.t.Fatal(err)
		}
		for _, d := range ds {
			if cond(d) {
				return d
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("no delivery of %s reached the expected state; have %d deliveries", webhookID, len(ds))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitAll waits until the webhook has n deliveries, all in the state.
func (e *env) waitAll(webhookID string, n int, state string) []*app.Delivery {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ds, err := e.db.Deliveries(context.Background(), app.DeliveryFilter{WebhookID: webhookID, Limit: 1000})
		if err != nil {
			e.t.Fatal(err)
		}
		done := len(ds) == n
		for _, d := range ds {
			done = done && d.State == state
		}
		if done {
			return ds
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("webhook %s: want %d deliveries %s, have %d", webhookID, n, state, len(ds))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// received is one request a receiver got.
type received struct {
	header http.Header
	body   []byte
}

// receiver is a real HTTP server on 127.0.0.1 that records every request
// and answers with respond (200 when nil).
type receiver struct {
	*httptest.Server
	got chan received
}

func newReceiver(t *testing.T, respond func(w http.ResponseWriter, r *http.Request)) *receiver {
	t.Helper()
	rc := &receiver{got: make(chan received, 1000)}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.got <- received{header: r.Header.Clone(), body: body}
		if respond != nil {
			respond(w, r)
		}
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) next(t *testing.T) received {
	t.Helper()
	select {
	case r := <-rc.got:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("receiver got no request")
		return received{}
	}
}
