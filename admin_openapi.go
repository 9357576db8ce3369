package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"

	"backstop/restapi"
)

// adminOpenAPI prints the /api/v1 description that serve answers at
// GET /api/v1/openapi.json, without a data directory or a running server, so
// CI and integrators can lint it and generate clients from a build alone.
// --openapi 3.0 prints huma's downgrade (what /api/v1/openapi-3.0.json
// answers) for generators that do not read OpenAPI 3.1 yet.
func adminOpenAPI(_ context.Context, fs *flag.FlagSet, args []string, e env) error {
	ver := fs.String("openapi", "3.1", "OpenAPI version: 3.1 or 3.0")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	// The routes, and so the description, do not depend on the services:
	// none is called while the document is built.
	doc := restapi.New(restapi.Services{}, restapi.Options{}).OpenAPI()
	var (
		b   []byte
		err error
	)
	switch *ver {
	case "3.1":
		b, err = json.MarshalIndent(doc, "", "  ")
	case "3.0":
		b, err = doc.Downgrade()
	default:
		return usageError{fmt.Sprintf("admin openapi: --openapi must be 3.1 or 3.0, not %q", *ver)}
	}
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(e.stdout, string(b))
	return err
}
