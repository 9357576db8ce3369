package restapi

import (
	"context"
	"strings"
	"testing"

	"backstop/app"
)

func TestEndpointManagement(t *testing.T) {
	h := newHarness(t, app.EditionStandard, nil)
	h.user("admin@acme.test", "correct horse battery", h.tenantA.ID)
	cookie, csrf := h.session("admin@acme.test", "correct horse battery")
	sess := []any{cookie, "X-CSRF-Token", csrf}
	ctx := context.Background()

	// Pre-create: the endpoint exists (never seen) with a token bound to it.
	r := h.do("POST", "/api/v1/endpoints", `{"tenantId":"`+h.tenantA.ID+`","profile":"client","displayName":"Front desk","paths":["/home"]}`, sess...)
	if r.code != 201 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	body := r.json()
	ep := body["endpoint"].(map[string]any)
	id := ep["id"].(string)
	if ep["connection"] != "never" || *strPtr(ep["attention"]) != app.AttentionNeverSeen || ep["displayName"] != "Front desk" {
		t.Fatalf("pre-created endpoint: %+v", ep)
	}
	token := body["token"].(string)
	tok, err := h.db.ConsumeEnrollmentToken(ctx, app.Fingerprint(token), h.clock.Now())
	if err != nil || tok.EndpointID != id || tok.Profile != "client" {
		t.Fatalf("token bound to the endpoint: %+v %v", tok, err)
	}
	if !strings.Contains(body["installCommand"].(string), token) {
		t.Fatalf("install command: %v", body["installCommand"])
	}

	// Rename and change what and when it backs up.
	r = h.do("PATCH", "/api/v1/endpoints/"+id, `{"displayName":"Reception","schedule":"@every 6h","paths":["/srv","/etc"],"excludes":["*.tmp"]}`, sess...)
	if r.code != 200 || r.json()["displayName"] != "Reception" {
		t.Fatalf("update: %d %s", r.code, r.body)
	}
	e, _ := h.db.Endpoint(ctx, id)
	if e.Schedule != "@every 6h" || strings.Join(e.Paths, ",") != "/srv,/etc" || strings.Join(e.Excludes, ",") != "*.tmp" {
		t.Fatalf("stored settings: %+v", e)
	}
	for _, tc := range []struct{ body, field string }{
		{`{"schedule":"every day"}`, "body.schedule"},
		{`{"paths":["relative/dir"]}`, "body.paths"},
	} {
		r = h.do("PATCH", "/api/v1/endpoints/"+id, tc.body, sess...)
		if r.code != 422 || !strings.Contains(string(r.body), tc.field) {
			t.Errorf("%s: want 422 naming %s, got %d %s", tc.body, tc.field, r.code, r.body)
		}
	}

	// Another tenant's endpoint is not found; API keys cannot manage.
	other := h.endpoint(h.tenantB.ID, "elsewhere", app.ProfileServer)
	if r = h.do("POST", "/api/v1/endpoints/"+other.ID+"/revoke", "", sess...); r.code != 404 {
		t.Errorf("other tenant's revoke: %d", r.code)
	}
	key, _ := h.key(h.tenantA.ID, app.ScopeStatusRead, app.ScopeRestoreWrite)
	if r = h.do("POST", "/api/v1/endpoints/"+id+"/revoke", "", bearer(key)...); r.code != 401 {
		t.Errorf("API key revoke: %d", r.code)
	}

	// Revoke: it stays listed, revoked, and cannot be changed any more.
	r = h.do("POST", "/api/v1/endpoints/"+id+"/revoke", "", sess...)
	if r.code != 200 || r.json()["status"] != "revoked" {
		t.Fatalf("revoke: %d %s", r.code, r.body)
	}
	if r = h.do("GET", "/api/v1/endpoints/"+id, "", bearer(key)...); r.code != 200 || r.json()["status"] != "revoked" {
		t.Fatalf("revoked endpoint still listed: %d %s", r.code, r.body)
	}
	if r = h.do("PATCH", "/api/v1/endpoints/"+id, `{"displayName":"x"}`, sess...); r.code != 409 {
		t.Errorf("update after revoke: %d", r.code)
	}
}

func strPtr(v any) *string {
	s, _ := v.(string)
	return &s
}

func TestEndpointAgentPin(t *testing.T) {
	h := newHarness(t, app.EditionStandard, nil)
	h.user("admin@acme.test", "correct horse battery", h.tenantA.ID)
	cookie, csrf := h.session("admin@acme.test", "correct horse battery")
	sess := []any{cookie, "X-CSRF-Token", csrf}
	ctx := context.Background()
	ep := h.endpoint(h.tenantA.ID, "pinned", app.ProfileServer)

	if r := h.do("GET", "/api/v1/endpoints/"+ep.ID, "", sess...); r.code != 200 || r.json()["pinnedAgentVersion"] != nil ||
		!strings.Contains(string(r.body), `"pinnedAgentVersion":null`) {
		t.Fatalf("unpinned view: %d %s", r.code, r.body)
	}
	r := h.do("PATCH", "/api/v1/endpoints/"+ep.ID, `{"pinnedAgentVersion":"1.4.2"}`, sess...)
	if r.code != 200 || r.json()["pinnedAgentVersion"] != "1.4.2" {
		t.Fatalf("pin: %d %s", r.code, r.body)
	}
	if e, _ := h.db.Endpoint(ctx, ep.ID); e.PinnedAgentVersion != "1.4.2" {
		t.Fatalf("stored pin: %q", e.PinnedAgentVersion)
	}
	// Another field leaves the pin; the list shows it too.
	if r = h.do("PATCH", "/api/v1/endpoints/"+ep.ID, `{"displayName":"Pinned"}`, sess...); r.code != 200 || r.json()["pinnedAgentVersion"] != "1.4.2" {
		t.Fatalf("pin kept: %d %s", r.code, r.body)
	}
	if r = h.do("GET", "/api/v1/endpoints", "", sess...); r.code != 200 || !strings.Contains(string(r.body), `"pinnedAgentVersion":"1.4.2"`) {
		t.Fatalf("list shows the pin: %d %s", r.code, r.body)
	}
	for _, body := range []string{`{"pinnedAgentVersion":"latest"}`, `{"pinnedAgentVersion":"1.4"}`, `{"pinnedAgentVersion":12}`} {
		if r = h.do("PATCH", "/api/v1/endpoints/"+ep.ID, body, sess...); r.code != 422 || !strings.Contains(string(r.body), "pinnedAgentVersion") {
			t.Errorf("%s: want 422 naming pinnedAgentVersion, got %d %s", body, r.code, r.body)
		}
	}
	if r = h.do("PATCH", "/api/v1/endpoints/"+ep.ID, `{"pinnedAgentVersion":null}`, sess...); r.code != 200 || r.json()["pinnedAgentVersion"] != nil {
		t.Fatalf("unpin: %d %s", r.code, r.body)
	}
	if e, _ := h.db.Endpoint(ctx, ep.ID); e.PinnedAgentVersion != "" {
		t.Fatalf("stored after unpin: %q", e.PinnedAgentVersion)
	}
}
