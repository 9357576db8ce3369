package e2e

import (
	"testing"

	"backstop/e2e/tool"
)

// RequireTool returns the path of an external program a test drives (restic,
// chromium, sh, curl). Under CI=true a missing program fails the test, so CI
// never passes by skipping; elsewhere the test is skipped with the package to
// install. Tests of every package use it; the rule lives in e2e/tool.
func RequireTool(t testing.TB, name, debianPackage string) string {
	t.Helper()
	return tool.RequireTool(t, name, debianPackage)
}
