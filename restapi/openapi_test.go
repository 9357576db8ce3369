package restapi

import (
	"encoding/json"
	"strings"
	"testing"

	"backstop/app"

	"github.com/danielgtaylor/huma/v2"
)

// noClientError lists the operations that document no 4xx answer, each with
// why none exists; .ci/openapi-check's linter warns about exactly these.
var noClientError = map[string]string{
	"setup.get": "no input and no credentials: nothing the caller sends can be wrong",
}

// TestOpenAPIForIntegrators holds the served description to what an OpenAPI
// linter (redocly's recommended rules, run by .ci/openapi-check) asks, so it
// stays true where the linter does not run: a servers entry, a licence, a
// security list stated on every operation (an empty one on public
// operations), and a documented client error on every operation.
func TestOpenAPIForIntegrators(t *testing.T) {
	h := newHarness(t, app.EditionStandard, nil)
	r := h.do("GET", "/api/v1/openapi.json", "")
	check(t, r, 200, "")
	var doc struct {
		Servers []struct {
			URL string `json:"url"`
		} `json:"servers"`
		Info struct {
			License *struct {
				Name       string `json:"name"`
				Identifier string `json:"identifier"`
				URL        string `json:"url"`
			} `json:"license"`
		} `json:"info"`
		Paths map[string]map[string]struct {
			OperationID string           `json:"operationId"`
			Security    *json.RawMessage `json:"security"`
			Responses   map[string]any   `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(r.body, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Servers) == 0 || doc.Servers[0].URL == "" {
		t.Error("no servers entry")
	}
	if l := doc.Info.License; l == nil || l.Name == "" || (l.Identifier == "" && l.URL == "") {
		t.Errorf("info.license %+v: want a name and an identifier or URL", l)
	}

	seen := 0
	for path, item := range h.srv.OpenAPI().Paths {
		for method, op := range map[string]*huma.Operation{"get": item.Get, "put": item.Put, "post": item.Post,
			"delete": item.Delete, "patch": item.Patch, "head": item.Head, "options": item.Options} {
			if op == nil {
				continue
			}
			seen++
			wire, ok := doc.Paths[path][method]
			if !ok {
				t.Errorf("%s %s: in OpenAPI() but not served", method, path)
				continue
			}
			name := wire.OperationID + " (" + strings.ToUpper(method) + " " + path + ")"
			info, ok := op.Metadata[metaKey].(routeInfo)
			if !ok {
				// authorize treats an operation without routeInfo as public.
				t.Errorf("%s: registered without an access rule", name)
				continue
			}
			switch {
			case wire.Security == nil:
				t.Errorf("%s: security not stated", name)
			case info.access == accessPublic && string(*wire.Security) != "[]":
				t.Errorf("%s: public, but security is %s, want []", name, *wire.Security)
			case info.access != accessPublic && string(*wire.Security) == "[]":
				t.Errorf("%s: needs credentials, but security is []", name)
			}
			has4xx := false
			for code := range wire.Responses {
				has4xx = has4xx || strings.HasPrefix(code, "4")
			}
			if _, exempt := noClientError[wire.OperationID]; has4xx == exempt {
				if exempt {
					t.Errorf("%s: now documents a 4xx answer; drop it from noClientError", name)
				} else {
					t.Errorf("%s: no 4xx answer documented", name)
				}
			}
		}
	}
	if seen < 50 {
		t.Errorf("only %d operations seen", seen)
	}

	// Go generators (oapi-codegen) read only OpenAPI 3.0: the README sends
	// integrators to the downgrade.
	check(t, h.do("GET", "/api/v1/openapi-3.0.json", ""), 200, "", `"openapi":"3.0.`)
}
