package restapi

import (
	"context"
	"testing"

	"backstop/app"
)

// TestMaintenanceAnnounce: only provider administrators in a web session
// announce; only the newer version the update check found is accepted; a
// running update answers 409 to a new announcement and to a cancel; the
// record shows as version.maintenance.
func TestMaintenanceAnnounce(t *testing.T) {
	h := newHarness(t, app.EditionProvider, nil)
	ctx := context.Background()
	h.user("root@example.com", "provider-password-1", "")
	h.user("tenant@example.com", "tenant-password-1", h.tenantA.ID)
	c, csrf := h.session("root@example.com", "provider-password-1")
	tc, tcsrf := h.session("tenant@example.com", "tenant-password-1")
	key, _ := h.key("", app.ScopeStatusRead)
	as := []any{c, "X-CSRF-Token", csrf}

	// No update check yet: nothing to update to.
	check(t, h.do("POST", "/api/v1/maintenance", `{"targetVersion":"1.3.0"}`, as...), 422, app.EINVALID, `"location":"body.targetVersion"`)
	check(t, h.do("PATCH", "/api/v1/settings", `{"updateCheck":true}`, as...), 200, "")
	h.clock.Add(1)
	if err := h.db.SaveVersionCheck(ctx, &app.VersionCheck{Channel: "stable", CheckedAt: h.clock.Now(), LatestTag: "v1.3.0", Latest: "1.3.0"}); err != nil {
		t.Fatal(err)
	}
	check(t, h.do("POST", "/api/v1/maintenance", `{"targetVersion":"1.3.0"}`, tc, "X-CSRF-Token", tcsrf), 403, "forbidden")
	check(t, h.do("POST", "/api/v1/maintenance", `{"targetVersion":"1.3.0"}`, bearer(key)...), 401, "")
	check(t, h.do("POST", "/api/v1/maintenance", `{"targetVersion":"1.4.0"}`, as...), 422, app.EINVALID)
	check(t, h.do("POST", "/api/v1/maintenance", `{"targetVersion":"v1.3.0","startsAt":"2026-11-22T02:00:00Z"}`, as...), 200, "",
		`"phase":"announced"`, `"targetVersion":"1.3.0"`, `"startsAt":"2026-11-22T02:00:00.000Z"`)
	check(t, h.do("GET", "/api/v1/version", "", bearer(key)...), 200, "", `"maintenance":{"phase":"announced","targetVersion":"1.3.0"`)

	// Announced may be replaced or cancelled; a running update may not.
	check(t, h.do("POST", "/api/v1/maintenance", `{"targetVersion":"1.3.0"}`, as...), 200, "", `"startsAt":null`)
	if _, err := h.db.UpdateMaintenance(ctx, func(m *app.Maintenance) (*app.Maintenance, error) {
		m.Phase = app.MaintenanceDownloading
		return m, nil
	}); err != nil {
		t.Fatal(err)
	}
	check(t, h.do("POST", "/api/v1/maintenance", `{"targetVersion":"1.3.0"}`, as...), 409, app.ECONFLICT)
	check(t, h.do("DELETE", "/api/v1/maintenance", "", as...), 409, app.ECONFLICT)
	if _, err := h.db.UpdateMaintenance(ctx, func(m *app.Maintenance) (*app.Maintenance, error) {
		m.Phase, m.Error = app.MaintenanceFailed, app.Ptr("bad signature")
		return m, nil
	}); err != nil {
		t.Fatal(err)
	}
	check(t, h.do("GET", "/api/v1/version", "", bearer(key)...), 200, "", `"phase":"failed"`, `"error":"bad signature"`)
	check(t, h.do("DELETE", "/api/v1/maintenance", "", as...), 204, "")
	check(t, h.do("GET", "/api/v1/version", "", bearer(key)...), 200, "", `"maintenance":null`)
	check(t, h.do("DELETE", "/api/v1/maintenance", "", as...), 404, app.ENOTFOUND)
}
