// Package tool holds RequireTool, the one rule for tests that drive an
// external program: under CI=true a missing program fails the test, so CI
// never passes by skipping; elsewhere the test is skipped with the package
// to install. It is its own package, apart from e2e, so that test helpers
// the browser tests use (dovecottest) can import it without an import
// cycle.
package tool

import (
	"os"
	"os/exec"
	"testing"
)

// RequireTool returns the path of the program name, or fails (CI=true) or
// skips the test naming the Debian package to install.
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
