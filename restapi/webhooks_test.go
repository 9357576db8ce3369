package restapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/webhooks"
	"backstop/store"

	"github.com/google/go-github/v72/github"
)

// webhookHarness is the scenario harness with the webhook service and a
// running dispatcher on the same database and clock.
func webhookHarness(t *testing.T, allowPrivate bool) (*harness, *webhooks.Dispatcher) {
	t.Helper()
	var disp *webhooks.Dispatcher
	h := newHarness(t, app.EditionProvider, nil, func(s *Server) {
		db := s.Tenants.(*store.DB)
		box, err := webhooks.OpenSecretBox(s.opts.DataDir)
		if err != nil {
			t.Fatal(err)
		}
		guard := webhooks.NewGuard(allowPrivate)
		guard.LookupNetIP = func(ctx context.Context, network, host string) ([]netip.Addr, error) {
			switch host {
			case "hooks.example.com":
				return []netip.Addr{netip.MustParseAddr("93.184.215.14")}, nil
			case "localhost":
				return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
			}
			return nil, &netError{host}
		}
		disp = &webhooks.Dispatcher{Store: db, Events: db, Box: box, Client: guard.Client(), Now: s.opts.Now,
			Logger: discardLogger(), Workers: 4, PerWebhook: 2}
		s.Webhooks = &webhooks.Service{Store: db, Guard: guard, Box: box, Notify: disp.Notify, Now: s.opts.Now}
	})
	disp.Open()
	t.Cleanup(disp.Close) // runs before the harness closes the database
	return h, disp
}

type netError struct{ host string }

func (e *netError) Error() string { return "lookup " + e.host + ": no such host" }

func TestWebhookLifecycleOverHTTP(t *testing.T) {
	h, _ := webhookHarness(t, true)
	key, _ := h.key(h.tenantA.ID, app.ScopeWebhooksManage)
	auth := bearer(key)
	got := make(chan *http.Request, 10)
	bodies := make(chan []byte, 10)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- r
		bodies <- b
	}))
	defer recv.Close()

	r := h.do("POST", "/api/v1/webhooks", `{"url":"`+recv.URL+`/hook","events":["job.failed","verify.completed"],"description":"PSA"}`, auth...)
	check(t, r, 201, "", `"secret":"whsec_`, `"enabled":true`, `"tenantId":"`+h.tenantA.ID+`"`)
	var created struct {
		ID, URL, Secret string
		Events          []string
		CreatedAt       app.Time
	}
	json.Unmarshal(r.body, &created)
	if !app.HasPrefix(created.ID, app.PrefixWebhook) || len(created.Events) != 2 || !created.CreatedAt.Equal(h.clock.Now()) {
		t.Fatalf("created %s", r.body)
	}
	path := "/api/v1/webhooks/" + created.ID

	// The secret is never shown again.
	for _, r := range []*response{h.do("GET", path, "", auth...), h.do("GET", "/api/v1/webhooks", "", auth...)} {
		check(t, r, 200, "", created.ID)
		if strings.Contains(string(r.body), "secret") {
			t.Errorf("secret in %s", r.body)
		}
	}

	check(t, h.do("PATCH", path, `{"events":["job.completed"],"enabled":false}`, auth...), 200, "", `"events":["job.completed"]`, `"enabled":false`)
	check(t, h.do("PATCH", path, `{"enabled":true,"bogus":1}`, auth...), 422, app.EINVALID, `"location":"body.bogus"`)
	check(t, h.do("PATCH", path, `{"enabled":true}`, auth...), 200, "", `"enabled":true`)

	// Test event: sent whatever events were chosen, signed with the secret.
	r = h.do("POST", path+"/test", "", auth...)
	check(t, r, 202, "", `"event":"webhook.test"`, `"state":"pending"`)
	var queued app.Delivery
	json.Unmarshal(r.body, &queued)
	var req *http.Request
	select {
	case req = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("receiver got no test event")
	}
	body := <-bodies
	if err := github.ValidateSignature(req.Header.Get("X-Service-Signature"), body, []byte(created.Secret)); err != nil {
		t.Errorf("signature: %v", err)
	}
	if req.Header.Get("X-Service-Event") != app.EventWebhookTest || req.Header.Get("X-Service-Delivery") != queued.ID {
		t.Errorf("headers %v", req.Header)
	}

	// Delivery log, then a replay: a new delivery of the same event.
	var log struct{ Items []app.Delivery }
	waitFor := func(cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out; log %+v", log.Items)
			}
		}
	}
	waitFor(func() bool {
		json.Unmarshal(h.do("GET", path+"/deliveries", "", auth...).body, &log)
		return len(log.Items) == 1 && log.Items[0].State == app.DeliveryDelivered
	})
	if a := log.Items[0].Attempts; len(a) != 1 || a[0].Number != 1 || *a[0].StatusCode != 200 {
		t.Errorf("attempts %+v", a)
	}
	r = h.do("POST", path+"/deliveries/"+queued.ID+"/replay", "", auth...)
	check(t, r, 202, "", `"eventId":"`+queued.EventID+`"`)
	var replay app.Delivery
	json.Unmarshal(r.body, &replay)
	if replay.ID == queued.ID {
		t.Error("replay reused the delivery id")
	}
	<-got
	<-bodies
	waitFor(func() bool {
		json.Unmarshal(h.do("GET", path+"/deliveries?limit=1", "", auth...).body, &log)
		return len(log.Items) == 1 && log.Items[0].ID == replay.ID && log.Items[0].State == app.DeliveryDelivered
	})
	var page struct{ NextCursor *string }
	json.Unmarshal(h.do("GET", path+"/deliveries?limit=1", "", auth...).body, &page)
	if page.NextCursor == nil {
		t.Fatal("no nextCursor on a full page")
	}
	check(t, h.do("GET", path+"/deliveries?limit=1&cursor="+*page.NextCursor, "", auth...), 200, "", queued.ID)

	// Rotation answers a new secret.
	r = h.do("POST", path+"/rotate-secret", "", auth...)
	check(t, r, 200, "", `"secret":"whsec_`)
	var rotated struct{ Secret string }
	json.Unmarshal(r.body, &rotated)
	if rotated.Secret == created.Secret {
		t.Error("rotation kept the secret")
	}

	// Another tenant sees nothing; without the scope, 403 even for nonsense.
	keyB, _ := h.key(h.tenantB.ID, app.ScopeWebhooksManage)
	check(t, h.do("GET", path, "", bearer(keyB)...), 404, app.ENOTFOUND)
	check(t, h.do("POST", path+"/test", "", bearer(keyB)...), 404, app.ENOTFOUND)
	check(t, h.do("GET", path+"/deliveries", "", bearer(keyB)...), 404, app.ENOTFOUND)
	check(t, h.do("POST", path+"/deliveries/"+queued.ID+"/replay", "", bearer(keyB)...), 404, app.ENOTFOUND)
	check(t, h.do("DELETE", path, "", bearer(keyB)...), 404, app.ENOTFOUND)
	noScope, _ := h.key(h.tenantA.ID, app.ScopeStatusRead)
	check(t, h.do("POST", "/api/v1/webhooks", `{nonsense`, bearer(noScope)...), 403, app.EFORBIDDEN, "webhooks:manage")
	check(t, h.do("GET", "/api/v1/webhooks/wh_unknown", "", bearer(noScope)...), 403, app.EFORBIDDEN)

	// A provider key reads across tenants and must name one to write.
	provider, _ := h.key("", app.ScopeWebhooksManage)
	check(t, h.do("GET", "/api/v1/webhooks", "", bearer(provider)...), 200, "", created.ID)
	check(t, h.do("POST", "/api/v1/webhooks", `{"url":"`+recv.URL+`","events":["job.failed"]}`, bearer(provider)...), 400, app.ETENANTREQUIRED)
	check(t, h.do("POST", "/api/v1/webhooks", `{"url":"`+recv.URL+`","events":["job.failed"]}`,
		append(bearer(provider), "X-Service-Tenant", h.tenantB.ID)...), 201, "", h.tenantB.ID)

	check(t, h.do("DELETE", path, "", auth...), 204, "")
	check(t, h.do("GET", path, "", auth...), 404, app.ENOTFOUND)

	// Every call was audited under its operation id.
	actions := map[string]bool{}
	for _, row := range h.auditRows(100) {
		actions[row.Action] = true
	}
	for _, a := range []string{"webhooks.create", "webhooks.get", "webhooks.update", "webhooks.test", "webhooks.deliveries",
		"webhooks.replay", "webhooks.rotateSecret", "webhooks.delete", "webhooks.list"} {
		if !actions[a] {
			t.Errorf("no audit row for %s", a)
		}
	}
}

func TestWebhookBadTargets(t *testing.T) {
	strict, _ := webhookHarness(t, false)
	key, _ := strict.key(strict.tenantA.ID, app.ScopeWebhooksManage)
	post := func(h *harness, key, url, events string) *response {
		body, _ := json.Marshal(map[string]any{"url": url, "events": json.RawMessage(events)})
		return h.do("POST", "/api/v1/webhooks", string(body), bearer(key)...)
	}
	for _, c := range []struct {
		name, url, code string
	}{
		{"non-http scheme", "ftp://hooks.example.com/x", app.EINVALID},
		{"file scheme", "file:///etc/passwd", app.EINVALID},
		{"plain http", "http://hooks.example.com/x", app.EINVALID},
		{"credentials", "https://user:secret@hooks.example.com/x", app.EINVALID},
		{"unresolvable", "https://nothing-here.invalid/x", app.EINVALID},
		{"oversized", "https://hooks.example.com/" + strings.Repeat("a", 2100), app.EINVALID},
		{"empty", "", app.EINVALID},
		{"loopback", "https://127.0.0.1/x", app.EWEBHOOKREFUSED},
		{"loopback by name", "https://localhost/x", app.EWEBHOOKREFUSED},
		{"private", "https://10.0.0.5/x", app.EWEBHOOKREFUSED},
		{"metadata", "https://169.254.169.254/latest", app.EWEBHOOKREFUSED},
		{"ipv6 link-local", "https://[fe80::1]/", app.EWEBHOOKREFUSED},
		{"nat64", "https://[64:ff9b::a9fe:a9fe]/", app.EWEBHOOKREFUSED},
		{"mapped", "https://[::ffff:10.0.0.1]/", app.EWEBHOOKREFUSED},
		{"documentation", "https://192.0.2.1/", app.EWEBHOOKREFUSED},
		{"zero network", "https://0.0.0.0/", app.EWEBHOOKREFUSED},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := post(strict, key, c.url, `["job.failed"]`)
			check(t, r, 422, c.code, `"location":"body.url"`)
		})
	}
	for _, events := range []string{`[]`, `["job.started"]`, `["webhook.test"]`, `["job.failed","job.failed"]`} {
		check(t, post(strict, key, "https://hooks.example.com/x", events), 422, app.EINVALID, `"location":"body.events`)
	}
	check(t, post(strict, key, "https://hooks.example.com/x", `["job.failed"]`), 201, "")

	// With allow_private, loopback is fine; metadata never is.
	loose, _ := webhookHarness(t, true)
	key, _ = loose.key(loose.tenantA.ID, app.ScopeWebhooksManage)
	check(t, post(loose, key, "http://127.0.0.1:9/x", `["job.failed"]`), 201, "")
	check(t, post(loose, key, "http://169.254.169.254/", `["job.failed"]`), 422, app.EWEBHOOKREFUSED, `"location":"body.url"`)
	r := post(loose, key, "http://127.0.0.1:9/x", `["job.failed"]`)
	var w struct{ ID string }
	json.Unmarshal(r.body, &w)
	check(t, loose.do("PATCH", "/api/v1/webhooks/"+w.ID, `{"url":"https://[fd00:ec2::254]/"}`, bearer(key)...), 422, app.EWEBHOOKREFUSED)
}

// A tenant's webhooks are bounded; the limit is per tenant.
func TestWebhookLimitPerTenant(t *testing.T) {
	h, _ := webhookHarness(t, true)
	keyA, _ := h.key(h.tenantA.ID, app.ScopeWebhooksManage)
	keyB, _ := h.key(h.tenantB.ID, app.ScopeWebhooksManage)
	body := `{"url":"http://127.0.0.1:9/hook","events":["job.failed"]}`
	for i := 0; i < webhooks.MaxWebhooksPerTenant; i++ {
		check(t, h.do("POST", "/api/v1/webhooks", body, bearer(keyA)...), 201, "")
	}
	check(t, h.do("POST", "/api/v1/webhooks", body, bearer(keyA)...), 422, app.EINVALID, "at most")
	check(t, h.do("POST", "/api/v1/webhooks", body, bearer(keyB)...), 201, "")
}
