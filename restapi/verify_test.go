package restapi

import (
	"context"
	"testing"
	"time"

	"backstop/app"
)

// recordReport stores a verify report of the endpoint that finished at.
func (h *harness) recordReport(e *app.Endpoint, state string, at time.Time) *app.VerifyReport {
	h.t.Helper()
	snap := "snap-" + e.ID
	r := &app.VerifyReport{JobID: app.NewID(app.PrefixJob), TenantID: e.TenantID, EndpointID: e.ID, DisplayName: e.Hostname,
		SnapshotID: &snap, State: state, StartedAt: app.At(at.Add(-time.Minute)), FinishedAt: app.At(at),
		Sampled: 3, Matched: 3, Files: []app.VerifyFile{}, Packs: app.VerifyPacks{Damaged: []string{}}}
	if state == app.VerifyReportFailed {
		r.Matched, r.Mismatched = 2, 1
	}
	if err := h.db.RecordVerifyReport(context.Background(), r); err != nil {
		h.t.Fatal(err)
	}
	return r
}

func TestLatestVerifyReport(t *testing.T) {
	h := newHarness(t, app.EditionProvider, nil)
	h.srv.VerifyReports = h.db
	keyA, _ := h.key(h.tenantA.ID, app.ScopeStatusRead)
	noScope, _ := h.key(h.tenantA.ID, app.ScopeJobsRead)
	provider, _ := h.key("", app.ScopeStatusRead)
	epA1 := h.endpoint(h.tenantA.ID, "a1", app.ProfileServer)
	epA2 := h.endpoint(h.tenantA.ID, "a2", app.ProfileClient)
	epB := h.endpoint(h.tenantB.ID, "b1", app.ProfileServer)

	check(t, h.do("GET", "/api/v1/verify/latest", "", bearer(keyA)...), 404, "not_found")
	if st := h.do("GET", "/api/v1/status", "", bearer(keyA)...).json(); st["verify"] != nil {
		t.Fatalf("status verify before any run = %v, want null", st["verify"])
	}

	t0 := harnessStart
	old := h.recordReport(epA1, app.VerifyReportPassed, t0.Add(-2*time.Hour))
	newest := h.recordReport(epA2, app.VerifyReportFailed, t0.Add(-time.Hour))
	other := h.recordReport(epB, app.VerifyReportPassed, t0.Add(-time.Minute)) // newest overall, another tenant

	tests := []struct {
		name    string
		path    string
		key     string
		extra   []any
		status  int
		code    string
		wantJob string
	}{
		{"tenant key: the tenant's newest", "/api/v1/verify/latest", keyA, nil, 200, "", newest.JobID},
		{"one endpoint", "/api/v1/verify/latest?endpointId=" + epA1.ID, keyA, nil, 200, "", old.JobID},
		{"another tenant's endpoint", "/api/v1/verify/latest?endpointId=" + epB.ID, keyA, nil, 404, "not_found", ""},
		{"unknown endpoint", "/api/v1/verify/latest?endpointId=ep_nope", keyA, nil, 404, "not_found", ""},
		{"scope checked first", "/api/v1/verify/latest?endpointId=ep_nope", noScope, nil, 403, "insufficient_scope", ""},
		{"provider without header: every tenant", "/api/v1/verify/latest", provider, nil, 200, "", other.JobID},
		{"provider with header", "/api/v1/verify/latest", provider, []any{"X-Service-Tenant", h.tenantA.ID}, 200, "", newest.JobID},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := h.auditCount()
			r := h.do("GET", tc.path, "", append(bearer(tc.key), tc.extra...)...)
			check(t, r, tc.status, tc.code)
			if h.auditCount() != before+1 {
				t.Errorf("audit rows %d -> %d, want one more", before, h.auditCount())
			}
			if tc.wantJob != "" {
				if m := r.json(); m["jobId"] != tc.wantJob {
					t.Fatalf("latest = %v, want job %s", m["jobId"], tc.wantJob)
				}
			}
		})
	}

	b := h.do("GET", "/api/v1/verify/latest", "", bearer(keyA)...).json()
	if b["state"] != "failed" || b["mismatched"] != float64(1) || b["tenantId"] != h.tenantA.ID || b["endpointId"] != epA2.ID {
		t.Fatalf("report body = %v", b)
	}
	st := h.do("GET", "/api/v1/status", "", bearer(keyA)...).json()
	v, _ := st["verify"].(map[string]any)
	if v["jobId"] != newest.JobID || v["state"] != "failed" || v["sampled"] != float64(3) {
		t.Fatalf("status verify = %v", st["verify"])
	}

	// Recording a report set the endpoint's verify facts.
	e, _ := h.db.Endpoint(context.Background(), epA2.ID)
	if e.VerifyState != app.VerifyFailed || e.VerifyCheckedAt == nil || !e.VerifyCheckedAt.Equal(newest.FinishedAt.Time) {
		t.Fatalf("endpoint facts after a failed report: %+v", e)
	}
}
