package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

const chromiumPath = "/usr/bin/chromium"

// browser is one headless chromium with a fresh profile. dialogs counts
// JavaScript dialogs (alert, confirm) the page opened: the interface never
// opens one, so any dialog means injected script ran.
type browser struct {
	t       *testing.T
	ctx     context.Context
	base    string
	dialogs atomic.Int32
	shots   string
}

func newBrowser(t *testing.T, base string, width, height int) *browser {
	t.Helper()
	RequireTool(t, chromiumPath, "chromium")
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(width, height),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("lang", "en-US"), // dates formatted as the tests expect, whatever the machine's locale
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	b := &browser{t: t, base: base, shots: os.Getenv("BACKSTOP_SCREENSHOTS")}
	if b.shots == "" {
		b.shots = t.TempDir()
	}
	var ctx context.Context
	onEvent := func(ev any) {
		switch ev.(type) {
		case *page.EventJavascriptDialogOpening, page.EventJavascriptDialogOpening:
			b.dialogs.Add(1)
			// The listener may not run commands itself; dismiss from outside it.
			go chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}
	ctx, cancelC := chromedp.NewContext(actx, chromedp.WithListener(onEvent))
	b.ctx = ctx
	if err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, page.Enable, page.EnableParams{})
		return err
	})); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	t.Cleanup(func() { cancelC(); cancelA() })
	return b
}

// run executes actions with a deadline so a broken page fails fast.
func (b *browser) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.fail(what, err)
	}
}

// value runs one action that returns a value, with the same deadline.
func value[T any](b *browser, what string, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.fail(what, err)
	}
	return v
}

func (b *browser) fail(what string, err error) {
	b.t.Helper()
	b.shot("failed-" + sanitize(what))
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
	b.t.Fatalf("%s: %v\npage text:\n%s", what, err, body)
}

func sanitize(s string) string {
	out := []rune{}
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			out = append(out, r)
		} else if r >= 'A' && r <= 'Z' {
			out = append(out, r+32)
		} else {
			out = append(out, '-')
		}
	}
	return string(out)
}

func (b *browser) open(path string) {
	b.t.Helper()
	b.run("open "+path, chromedp.Navigate(b.base+path))
}

// waitText waits until the page's visible text contains s.
func (b *browser) waitText(s string) {
	b.t.Helper()
	value(b, "wait for text "+s, chromedp.Poll[bool](fmt.Sprintf(`document.body.innerText.includes(%s)`, js(s)),
		chromedp.WithPollingTimeout(10*time.Second)))
}

// click clicks the visible button or link whose text is exactly label.
func (b *browser) click(label string) {
	b.t.Helper()
	value(b, "click "+label, chromedp.Poll[bool](fmt.Sprintf(`(() => {
		const el = [...document.querySelectorAll('button, a')].reverse().find((e) => e.textContent.trim() === %s && e.offsetParent !== null && !e.disabled);
		if (!el) return false; el.click(); return true; })()`, js(label)), chromedp.WithPollingTimeout(10*time.Second)))
}

// fill types into the control labelled label (the label's text starts with it).
func (b *browser) fill(label, text string) {
	b.t.Helper()
	id := value(b, "find field "+label, chromedp.Poll[string](fmt.Sprintf(`(() => {
		const l = [...document.querySelectorAll('label')].reverse().find((l) => l.textContent.trim().startsWith(%s) && l.htmlFor);
		return l ? l.htmlFor : false; })()`, js(label)), chromedp.WithPollingTimeout(10*time.Second)))
	// Clear as a person would (select all, delete), then type.
	eval[bool](b, fmt.Sprintf(`(() => { const e = document.getElementById(%s); e.focus(); e.select(); return true; })()`, js(id)))
	b.run("fill "+label, chromedp.SendKeys(chromedp.ID(id), kb.Delete+text))
}

// selectOption chooses the option with the given visible text in the select labelled label.
func (b *browser) selectOption(selector, optionText string) {
	b.t.Helper()
	value(b, "select "+optionText, chromedp.Poll[bool](fmt.Sprintf(`(() => {
		const s = document.querySelector(%s); if (!s) return false;
		const o = [...s.options].find((o) => o.textContent.trim() === %s); if (!o) return false;
		s.value = o.value; s.dispatchEvent(new Event('change', { bubbles: true })); return true; })()`, js(selector), js(optionText)),
		chromedp.WithPollingTimeout(10*time.Second)))
}

// eval evaluates a JavaScript expression (awaiting a promise) in the page.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	return value(b, "eval "+expr, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
}

func (b *browser) shot(name string) {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	_ = os.WriteFile(filepath.Join(b.shots, name+".png"), buf, 0o644)
}

func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// chromedpClickSelector clicks the first element matching a CSS selector.
func chromedpClickSelector(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Click(chromedp.CSS(sel))
}
