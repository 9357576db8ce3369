package restapi

import (
	"context"
	"encoding/json"
	"testing"

	"backstop/app"
)

// ?needsAttention=true keeps only machines whose attention is set, and the
// answer stays {items, total}.
func TestListEndpointsNeedingAttention(t *testing.T) {
	h := newHarness(t, app.EditionStandard, nil)
	quiet := h.endpoint(h.tenantA.ID, "quiet", app.ProfileServer)
	h.endpoint(h.tenantA.ID, "never", app.ProfileServer)
	seen := h.clock.Now()
	if _, err := h.db.UpdateEndpoint(context.Background(), quiet.ID, func(e *app.Endpoint) error {
		e.LastSeenAt = &seen
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	key, _ := h.key(h.tenantA.ID, app.ScopeStatusRead)
	for query, want := range map[string][]string{"": {"quiet", "never"}, "?needsAttention=true": {"never"}} {
		r := h.do("GET", "/api/v1/endpoints"+query, "", bearer(key)...)
		check(t, r, 200, "")
		var b struct {
			Items []app.EndpointView `json:"items"`
			Total int                `json:"total"`
		}
		if err := json.Unmarshal(r.body, &b); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, v := range b.Items {
			got = append(got, v.Hostname)
		}
		if len(got) != len(want) || b.Total != len(want) {
			t.Errorf("GET /endpoints%s = %v (total %d), want %v", query, got, b.Total, want)
		}
	}
	check(t, h.do("GET", "/api/v1/endpoints?needsAttention=maybe", "", bearer(key)...), 422, app.EINVALID)
}

// A caller acting across tenants (a provider key or administrator without
// X-Service-Tenant) is audited for the tenant of the one resource it read or
// changed; a read across every tenant stays unattributed.
func TestAuditNamesTheTenantActedFor(t *testing.T) {
	h := newHarness(t, app.EditionProvider, nil)
	b1 := h.endpoint(h.tenantB.ID, "b1", app.ProfileServer)
	pk, _ := h.key("", app.ScopeStatusRead)
	h.user("provider@example.com", "correct horse battery", "")
	cookie, csrf := h.session("provider@example.com", "correct horse battery")

	for _, c := range []struct {
		name       string
		do         func() *response
		wantTenant string
	}{
		{"provider key reads one endpoint", func() *response { return h.do("GET", "/api/v1/endpoints/"+b1.ID, "", bearer(pk)...) }, h.tenantB.ID},
		{"provider key lists every tenant", func() *response { return h.do("GET", "/api/v1/endpoints", "", bearer(pk)...) }, ""},
		{"provider administrator creates a tenant's key", func() *response {
			return h.do("POST", "/api/v1/api-keys", `{"tenantId":"`+h.tenantB.ID+`","name":"PSA","scopes":["status:read"],"expiresInDays":null}`,
				cookie, "X-CSRF-Token", csrf)
		}, h.tenantB.ID},
	} {
		if r := c.do(); r.code >= 300 {
			t.Fatalf("%s: %d %s", c.name, r.code, r.body)
		}
		if got := h.auditRows(1)[0]; got.TenantID != c.wantTenant {
			t.Errorf("%s: audit tenant %q, want %q", c.name, got.TenantID, c.wantTenant)
		}
	}
}
