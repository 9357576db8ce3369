// Package e2e holds the browser tests of the web interface: they build the
// real backstop binary, run `backstop serve` on 127.0.0.1 with a fresh data
// directory, and drive Debian's chromium through chromedp (headless, no
// background networking, a fresh profile per browser).
//
// With CI=true a missing chromium fails the tests; otherwise they skip.
// RequireTool, the one place that rule lives, serves every package's tests.
// Screenshots go to $BACKSTOP_SCREENSHOTS when set (else a temp dir).
package e2e
