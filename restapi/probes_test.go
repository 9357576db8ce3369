package restapi

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"backstop/app"
)

func TestProbes(t *testing.T) {
	h := newHarness(t, app.EditionStandard, nil)
	check(t, h.do("GET", "/healthz", ""), 200, "", `{"status":"ok"}`)
	check(t, h.do("GET", "/readyz", ""), 200, "", `"status":"ready"`, `"database":"ok"`, `"storage":"ok"`)

	down := newHarness(t, app.EditionStandard, func(o *Options) {}, func(s *Server) {
		s.Ping = func(context.Context) error { return errors.New("database is locked") }
	})
	check(t, down.do("GET", "/healthz", ""), 200, "")
	check(t, down.do("GET", "/readyz", ""), 503, "", `"status":"not_ready"`, `"database":"failing"`, `"storage":"ok"`)

	gone := newHarness(t, app.EditionStandard, func(o *Options) { o.DataDir = o.DataDir + "/missing" })
	check(t, gone.do("GET", "/readyz", ""), 503, "", `"storage":"failing`)
}

func TestOpenAPI(t *testing.T) {
	h := newHarness(t, app.EditionStandard, nil)
	r := h.do("GET", "/api/v1/openapi.json", "")
	check(t, r, 200, "")
	var doc struct {
		OpenAPI string `json:"openapi"`
		Paths   map[string]map[string]struct {
			OperationID string                `json:"operationId"`
			Security    []map[string][]string `json:"security"`
			Responses   map[string]any        `json:"responses"`
		} `json:"paths"`
		Components struct {
			SecuritySchemes map[string]any `json:"securitySchemes"`
		} `json:"components"`
	}
	if err := json.Unmarshal(r.body, &doc); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Errorf("openapi %q, want 3.1", doc.OpenAPI)
	}
	for path, scope := range map[string]string{"/api/v1/status": "status:read", "/api/v1/endpoints": "status:read",
		"/api/v1/endpoints/{id}": "status:read", "/api/v1/version": "status:read"} {
		op := doc.Paths[path]["get"]
		if len(op.Security) == 0 || len(op.Security[0]["bearer"]) != 1 || op.Security[0]["bearer"][0] != scope {
			t.Errorf("%s: security %v, want bearer %s", path, op.Security, scope)
		}
		for _, code := range []string{"200", "401", "403", "429"} {
			if _, ok := op.Responses[code]; !ok {
				t.Errorf("%s: response %s undocumented", path, code)
			}
		}
	}
	for _, path := range []string{"/api/v1/api-keys", "/api/v1/tenants", "/api/v1/session", "/api/v1/settings", "/api/v1/audit"} {
		if len(doc.Paths[path]) == 0 {
			t.Errorf("%s missing from the description", path)
		}
	}
	if doc.Components.SecuritySchemes["bearer"] == nil || doc.Components.SecuritySchemes["session"] == nil {
		t.Errorf("security schemes %v", doc.Components.SecuritySchemes)
	}
	// The description matches the routes the server has.
	if got := h.srv.OpenAPI().Paths["/api/v1/status"]; got == nil || got.Get == nil {
		t.Error("OpenAPI() lacks /api/v1/status")
	}
}
