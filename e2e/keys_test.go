package e2e

import (
	"strings"
	"testing"
	"time"
)

// copyKeySteps checks the dialog of a new API key: the warning that the
// value is shown once, and that the copy buttons put exactly the value (and
// the curl command with it) on the clipboard, read back through the
// browser's clipboard with the permission a person would grant.
func copyKeySteps(t *testing.T, b *browser, key string) {
	t.Helper()
	page := b.text()
	for _, want := range []string{"Copy this key now.", "It is shown only once", "cannot show it again"} {
		if !strings.Contains(page, want) {
			t.Fatalf("the new key's dialog does not say %q:\n%s", want, page)
		}
	}
	b.grantClipboard()
	// Clear the clipboard first so a value left over cannot pass.
	eval[bool](b, `navigator.clipboard.writeText('').then(() => true)`)
	// A real mouse click: the clipboard needs a user gesture.
	b.run("click Copy", chromedpClickSelector(".secret button"))
	b.waitTrue("the copy button says Copied", `document.querySelector('.secret button').textContent.trim() === 'Copied'`)
	if got := eval[string](b, `navigator.clipboard.readText()`); got != key {
		t.Fatalf("the copy button wrote %q to the clipboard, want the key shown %q", got, key)
	}
	b.shot("05-key-copied")
	b.click("Copy curl command")
	var curl string
	waitFor(t, "the curl command on the clipboard", 5*time.Second, func() bool {
		curl = eval[string](b, `navigator.clipboard.readText()`)
		return curl != key
	})
	if !strings.Contains(curl, "Authorization: Bearer "+key+"'") || !strings.HasPrefix(curl, "curl -sS "+b.base+"/api/v1/status") {
		t.Fatalf("the curl command copied is %q", curl)
	}
	// The feedback goes back to the label, so a second copy is visible too.
	b.waitTrue("the copy button's label returns", `document.querySelector('.secret button').textContent.trim() === 'Copy'`)
}
