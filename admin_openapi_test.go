package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// admin openapi prints the description without a data directory, in 3.1
// and as the 3.0 downgrade (what .ci/openapi-check feeds the generators).
func TestAdminOpenAPI(t *testing.T) {
	for _, tt := range []struct{ flag, want string }{{"", "3.1"}, {"3.1", "3.1"}, {"3.0", "3.0"}} {
		var out, errOut strings.Builder
		e := env{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut, getenv: func(string) string { return "" }}
		args := []string{"admin", "openapi"}
		if tt.flag != "" {
			args = append(args, "--openapi", tt.flag)
		}
		if err := run(context.Background(), args, e); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		var doc struct {
			OpenAPI string         `json:"openapi"`
			Paths   map[string]any `json:"paths"`
		}
		if err := json.Unmarshal([]byte(out.String()), &doc); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if !strings.HasPrefix(doc.OpenAPI, tt.want) || doc.Paths["/api/v1/status"] == nil {
			t.Errorf("%v: openapi %q with %d paths", args, doc.OpenAPI, len(doc.Paths))
		}
	}
	err := run(context.Background(), []string{"admin", "openapi", "--openapi", "2.0"},
		env{stdout: new(strings.Builder), stderr: new(strings.Builder), getenv: func(string) string { return "" }})
	var u usageError
	if !errors.As(err, &u) {
		t.Errorf("--openapi 2.0: %v, want a usage error", err)
	}
}
