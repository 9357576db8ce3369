package e2e

import (
	"os"
	"os/exec"
	"testing"
)

// RequireTool returns the path of an external program a test drives (restic,
// chromium, sh, curl). Under CI=true a missing program fails the test, so CI
// never passes by skipping; elsewhere the test is skipped with the package to
// install. Tests of every package use it.
func RequireTool(t testing.TB, name, debianPackage string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is required under CI=true (apt-get install %s): %v", name, debianPackage, err)
	}
	t.Skipf("%s not installed (apt-get install %s)", name, debianPackage)
	return ""
}
