package restapi

import (
	"context"
	"encoding/json"
	"net/url"
	"testing"

	"backstop/app"
)

// The tenant and API-key lists are paged like every list but /endpoints
// (CONTRACT §2): limit, an opaque nextCursor, null on the last page.
func TestTenantAndKeyListsArePaged(t *testing.T) {
	h := newHarness(t, app.EditionProvider, nil)
	for _, name := range []string{"C", "D", "E"} { // tenants A and B come with the harness
		if err := h.db.CreateTenant(context.Background(), &app.Tenant{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 5; i++ {
		h.key(h.tenantA.ID, app.ScopeStatusRead)
	}
	h.user("provider@example.com", "correct horse battery", "")
	cookie, _ := h.session("provider@example.com", "correct horse battery")

	walk := func(path string) (ids []string, pages int) {
		cursor := ""
		for pages = 1; pages < 10; pages++ {
			q := url.Values{"limit": {"2"}}
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			r := h.do("GET", path+"?"+q.Encode(), "", cookie)
			check(t, r, 200, "")
			var b struct {
				Items []struct {
					ID string `json:"id"`
				} `json:"items"`
				NextCursor *string `json:"nextCursor"`
			}
			if err := json.Unmarshal(r.body, &b); err != nil {
				t.Fatal(err)
			}
			for _, it := range b.Items {
				ids = append(ids, it.ID)
			}
			if b.NextCursor == nil {
				return ids, pages
			}
			cursor = *b.NextCursor
		}
		t.Fatalf("%s: no last page", path)
		return nil, 0
	}
	tenants, pages := walk("/api/v1/tenants")
	if len(tenants) != 5 || pages != 3 || tenants[0] != h.tenantA.ID {
		t.Errorf("tenants %v in %d pages, want 5 in creation order in 3 pages", tenants, pages)
	}
	keys, _ := walk("/api/v1/api-keys")
	if len(keys) != 5 || keys[0] <= keys[4] {
		t.Errorf("keys %v, want 5 newest first", keys)
	}
	check(t, h.do("GET", "/api/v1/tenants?cursor=bogus", "", cookie), 422, app.EINVALID)
	check(t, h.do("GET", "/api/v1/api-keys?limit=1001", "", cookie), 422, app.EINVALID)
}
