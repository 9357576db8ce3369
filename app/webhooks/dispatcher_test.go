package webhooks_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/webhooks"

	"github.com/google/go-github/v72/github"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// verifyAsReceiver checks a request the way an integrator's receiver would,
// with independent implementations: go-github's ValidateSignature for
// X-Service-Signature and the Standard Webhooks library.
func verifyAsReceiver(t *testing.T, r received, secret string, checkTimestamp bool) {
	t.Helper()
	if err := github.ValidateSignature(r.header.Get("X-Service-Signature"), r.body, []byte(secret)); err != nil {
		t.Errorf("X-Service-Signature does not verify: %v", err)
	}
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	verify := wh.VerifyIgnoringTimestamp
	if checkTimestamp {
		verify = wh.Verify
	}
	if err := verify(r.body, r.header); err != nil {
		t.Errorf("Standard Webhooks signature does not verify: %v", err)
	}
}

func TestDeliverySignedAndHeaders(t *testing.T) {
	e := newEnv(t, true)
	// The real clock, so the Standard Webhooks timestamp tolerance applies.
	e.disp.Now = app.SystemClock
	tenant := e.tenant()
	rc := newReceiver(t, nil)
	w, secret := e.webhook(tenant, rc.URL+"/hook", app.EventJobFailed)
	other, _ := e.webhook(tenant, rc.URL+"/other", app.EventJobCompleted)
	ev := e.publish(tenant, app.EventJobFailed)

	r := rc.next(t)
	verifyAsReceiver(t, r, secret, true)
	for name, want := range map[string]string{
		"Content-Type": "application/json", "User-Agent": "backstop-webhooks/" + app.Version,
		"X-Service-Event": app.EventJobFailed, "X-Service-Attempt": "1",
	} {
		if got := r.header.Get(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	var env app.Event
	if err := json.Unmarshal(r.body, &env); err != nil || env.ID != ev.ID || env.Type != app.EventJobFailed || env.TenantID != tenant {
		t.Errorf("body = %s (%v), want the envelope of %s", r.body, err, ev.ID)
	}
	d := e.waitDelivery(w.ID, func(d *app.Delivery) bool { return d.State == app.DeliveryDelivered })
	if r.header.Get("X-Service-Delivery") != d.ID || r.header.Get("webhook-id") != d.ID {
		t.Errorf("delivery headers %q/%q, want %s", r.header.Get("X-Service-Delivery"), r.header.Get("webhook-id"), d.ID)
	}
	if d.EventID != ev.ID || len(d.Attempts) != 1 || *d.Attempts[0].StatusCode != 200 || d.FinishedAt == nil || d.NextAttemptAt != nil {
		t.Errorf("delivery = %+v", d)
	}
	// The webhook subscribed to job.completed only got nothing.
	if ds, _ := e.db.Deliveries(context.Background(), app.DeliveryFilter{WebhookID: other.ID}); len(ds) != 0 {
		t.Errorf("unsubscribed webhook got %d deliveries", len(ds))
	}
	// A wrong secret must not verify: the check above can fail.
	if err := github.ValidateSignature(r.header.Get("X-Service-Signature"), r.body, []byte(webhooks.NewSecret())); err == nil {
		t.Error("signature verified with another secret")
	}
}

func TestRetryScheduleToTheSecond(t *testing.T) {
	e := newEnv(t, true)
	tenant := e.tenant()
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(strings.Repeat("x", 5000)))
	})
	w, secret := e.webhook(tenant, rc.URL)
	e.publish(tenant, app.EventJobFailed)

	var d *app.Delivery
	for n := 1; n <= app.MaxDeliveryAttempts; n++ {
		attemptAt := e.clock.Now()
		r := rc.next(t)
		if got := r.header.Get("X-Service-Attempt"); got != strconv.Itoa(n) {
			t.Fatalf("attempt header %q, want %d", got, n)
		}
		if n > 1 && r.header.Get("X-Service-Delivery") != d.ID {
			t.Fatalf("retry carries delivery id %q, want %s", r.header.Get("X-Service-Delivery"), d.ID)
		}
		verifyAsReceiver(t, r, secret, false)
		d = e.waitDelivery(w.ID, func(d *app.Delivery) bool { return len(d.Attempts) == n })
		a := d.Attempts[n-1]
		if !a.At.Equal(attemptAt) || *a.StatusCode != 503 || len(a.ResponseExcerpt) != 1024 || a.Error == "" {
			t.Fatalf("attempt %d = %+v", n, a)
		}
		if n == app.MaxDeliveryAttempts {
			break
		}
		wait := app.RetrySchedule[n-1]
		if d.State != app.DeliveryPending || d.NextAttemptAt == nil || !d.NextAttemptAt.Equal(attemptAt.Add(wait)) {
			t.Fatalf("after attempt %d: state %s next %v, want pending at %v", n, d.State, d.NextAttemptAt, attemptAt.Add(wait))
		}
		// One second early: nothing happens.
		e.clock.Add(wait - time.Second)
		e.disp.Notify()
		select {
		case <-rc.got:
			t.Fatalf("attempt %d came before its time", n+1)
		case <-time.After(100 * time.Millisecond):
		}
		e.clock.Add(time.Second)
		e.disp.Notify()
	}
	if d.State != app.DeliveryFailed || d.FinishedAt == nil || d.NextAttemptAt != nil {
		t.Fatalf("after the last attempt: %+v", d)
	}
	// No ninth attempt, however long we wait.
	e.clock.Add(48 * time.Hour)
	e.disp.Notify()
	select {
	case <-rc.got:
		t.Fatal("attempt after the delivery failed")
	case <-time.After(100 * time.Millisecond):
	}
}

func TestGoneAndRedirectOutcomes(t *testing.T) {
	e := newEnv(t, true)
	tenant := e.tenant()
	gone := newReceiver(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusGone) })
	target := newReceiver(t, nil)
	redirect := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL, http.StatusFound)
	})
	wg, _ := e.webhook(tenant, gone.URL)
	wr, _ := e.webhook(tenant, redirect.URL)
	e.publish(tenant, app.EventJobFailed)

	d := e.waitDelivery(wg.ID, func(d *app.Delivery) bool { return d.State != app.DeliveryPending })
	if d.State != app.DeliveryGone || d.NextAttemptAt != nil || len(d.Attempts) != 1 {
		t.Errorf("410: %+v", d)
	}
	d = e.waitDelivery(wr.ID, func(d *app.Delivery) bool { return len(d.Attempts) == 1 })
	if d.State != app.DeliveryPending || *d.Attempts[0].StatusCode != 302 || !strings.Contains(d.Attempts[0].Error, "redirect") {
		t.Errorf("302: %+v %+v", d, d.Attempts[0])
	}
	select {
	case <-target.got:
		t.Error("the redirect was followed")
	case <-time.After(50 * time.Millisecond):
	}
}

func TestSlowReceiversDoNotBlockOthers(t *testing.T) {
	e := newEnv(t, true)
	tenant := e.tenant()
	release := make(chan struct{})
	hang := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		select { // hangs until the test ends (longer than any deadline here)
		case <-release:
		case <-r.Context().Done():
		}
	})
	huge := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat("y", 64<<10))
		for i := 0; i < 16<<10 && r.Context().Err() == nil; i++ { // 1 GiB unless cut off
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	fast := newReceiver(t, nil)
	t.Cleanup(func() { close(release) }) // runs before the receivers close
	wHang, _ := e.webhook(tenant, hang.URL)
	wHuge, _ := e.webhook(tenant, huge.URL)
	wFast, _ := e.webhook(tenant, fast.URL)
	const events = 20
	start := time.Now()
	for range events {
		e.publish(tenant, app.EventJobFailed)
	}
	e.waitAll(wFast.ID, events, app.DeliveryDelivered)
	hugeDone := e.waitDelivery(wHuge.ID, func(d *app.Delivery) bool { return d.State == app.DeliveryDelivered })
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("fast receiver's %d deliveries took %s beside a hanging one", events, took)
	}
	if got := hugeDone.Attempts[0].ResponseExcerpt; len(got) != 1024 {
		t.Errorf("huge answer excerpt is %d bytes, want 1024", len(got))
	}
	// The hanging receiver holds no more than its own slots.
	time.Sleep(50 * time.Millisecond)
	if n := len(hang.got); n > 2 {
		t.Errorf("hanging receiver got %d concurrent requests, want at most PerWebhook=2", n)
	}
	_ = wHang
}

func TestSecretRotationSignsWithBothFor24h(t *testing.T) {
	e := newEnv(t, true)
	tenant := e.tenant()
	rc := newReceiver(t, nil)
	w, oldSecret := e.webhook(tenant, rc.URL)
	newSecret, _, err := e.svc.RotateSecret(context.Background(), "", w.ID)
	if err != nil {
		t.Fatal(err)
	}
	e.publish(tenant, app.EventJobFailed)
	r := rc.next(t)
	sigs := r.header.Values("X-Service-Signature")
	if len(sigs) != 2 || len(strings.Fields(r.header.Get("webhook-signature"))) != 2 {
		t.Fatalf("within 24 h want two signatures each, got %q and %q", sigs, r.header.Get("webhook-signature"))
	}
	verifyAsReceiver(t, r, newSecret, false) // Get returns the new one first
	if err := github.ValidateSignature(sigs[1], r.body, []byte(oldSecret)); err != nil {
		t.Errorf("old secret's signature: %v", err)
	}
	wh, _ := standardwebhooks.NewWebhook(oldSecret)
	if err := wh.VerifyIgnoringTimestamp(r.body, r.header); err != nil {
		t.Errorf("old secret, Standard Webhooks: %v", err)
	}

	e.clock.Add(app.SecretOverlap + time.Second)
	e.publish(tenant, app.EventJobFailed)
	r = rc.next(t)
	if sigs := r.header.Values("X-Service-Signature"); len(sigs) != 1 {
		t.Fatalf("after 24 h want only the new signature, got %q", sigs)
	}
	verifyAsReceiver(t, r, newSecret, false)
	if err := wh.VerifyIgnoringTimestamp(r.body, r.header); err == nil {
		t.Error("old secret still verifies after 24 h")
	}
}

func TestRefusedAtConnectionTime(t *testing.T) {
	e := newEnv(t, false)
	tenant := e.tenant()
	rc := newReceiver(t, nil)
	// Stored directly, as if the name had resolved elsewhere at creation:
	// the dialer's check on the connected address must refuse it.
	w := &app.Webhook{ID: app.NewID(app.PrefixWebhook), TenantID: tenant, URL: strings.Replace(rc.URL, "127.0.0.1", "localhost", 1),
		Events: []string{app.EventJobFailed}, Enabled: true}
	w.SealedSecret = e.box.Seal(w.ID, webhooks.NewSecret())
	if err := e.db.CreateWebhook(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	e.publish(tenant, app.EventJobFailed)
	d := e.waitDelivery(w.ID, func(d *app.Delivery) bool { return len(d.Attempts) == 1 })
	if a := d.Attempts[0]; a.StatusCode != nil || !strings.Contains(a.Error, "target refused") || d.State != app.DeliveryPending {
		t.Errorf("attempt = %+v, delivery %s", a, d.State)
	}
	if len(rc.got) != 0 {
		t.Error("the refused receiver was contacted")
	}
}

func TestPendingDeliveriesSurviveRestart(t *testing.T) {
	e := newEnv(t, true)
	tenant := e.tenant()
	healthy := make(chan struct{})
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-healthy:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() {
		select {
		case <-healthy:
		default:
			close(healthy)
		}
	})
	w, _ := e.webhook(tenant, rc.URL)
	for range 5 {
		e.publish(tenant, app.EventJobFailed)
	}
	rc.next(t) // an attempt is in flight
	e.disp.Close()
	ds, _ := e.db.Deliveries(context.Background(), app.DeliveryFilter{WebhookID: w.ID})
	for _, d := range ds {
		if d.State != app.DeliveryPending || len(d.Attempts) != 0 {
			t.Fatalf("after stop: %+v (an abandoned attempt must not count)", d)
		}
	}
	close(healthy)
	e.startDispatcher()
	for _, d := range ds {
		got := e.waitDelivery(w.ID, func(x *app.Delivery) bool { return x.ID == d.ID && x.State == app.DeliveryDelivered })
		if len(got.Attempts) != 1 || got.Attempts[0].Number != 1 {
			t.Errorf("after restart: %+v", got.Attempts)
		}
	}
}

func TestPurgeAfter30Days(t *testing.T) {
	e := newEnv(t, true)
	tenant := e.tenant()
	rc := newReceiver(t, nil)
	w, _ := e.webhook(tenant, rc.URL)
	e.publish(tenant, app.EventJobFailed)
	e.waitDelivery(w.ID, func(d *app.Delivery) bool { return d.State == app.DeliveryDelivered })

	e.clock.Add(app.DeliveryRetention - time.Minute)
	if n, err := e.disp.Purge(context.Background()); err != nil || n != 0 {
		t.Fatalf("purge before 30 days: %d, %v", n, err)
	}
	e.clock.Add(2 * time.Minute)
	if n, err := e.disp.Purge(context.Background()); err != nil || n != 1 {
		t.Fatalf("purge after 30 days: %d, %v", n, err)
	}
	if ds, _ := e.db.Deliveries(context.Background(), app.DeliveryFilter{WebhookID: w.ID}); len(ds) != 0 {
		t.Errorf("%d deliveries left", len(ds))
	}
	var events, attempts int
	e.db.Reader().QueryRow("SELECT count(*) FROM events").Scan(&events)
	e.db.Reader().QueryRow("SELECT count(*) FROM webhook_attempts").Scan(&attempts)
	if events != 0 || attempts != 0 {
		t.Errorf("left %d events, %d attempts", events, attempts)
	}
}

// TestEnablingWakesTheDispatcher: a webhook disabled while a retry is
// pending gets that retry as soon as it is enabled again, not at the next
// poll (a minute in these tests).
func TestEnablingWakesTheDispatcher(t *testing.T) {
	e := newEnv(t, true)
	tenant := e.tenant()
	var fail atomic.Bool
	fail.Store(true)
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		if fail.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	w, _ := e.webhook(tenant, rc.URL)
	e.publish(tenant, app.EventJobFailed)
	rc.next(t)
	e.waitDelivery(w.ID, func(d *app.Delivery) bool { return len(d.Attempts) == 1 && d.State == app.DeliveryPending })
	fail.Store(false)

	off, on := false, true
	if _, err := e.svc.UpdateWebhook(context.Background(), tenant, w.ID, app.WebhookUpdate{Enabled: &off}); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(app.RetrySchedule[0])
	e.disp.Notify()
	select {
	case <-rc.got:
		t.Fatal("a disabled webhook's delivery was attempted")
	case <-time.After(200 * time.Millisecond):
	}
	if _, err := e.svc.UpdateWebhook(context.Background(), tenant, w.ID, app.WebhookUpdate{Enabled: &on}); err != nil {
		t.Fatal(err)
	}
	if r := rc.next(t); r.header.Get("X-Service-Attempt") != "2" {
		t.Fatalf("attempt header %q after enabling, want 2", r.header.Get("X-Service-Attempt"))
	}
	e.waitDelivery(w.ID, func(d *app.Delivery) bool { return d.State == app.DeliveryDelivered })
}
