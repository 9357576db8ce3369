package e2e

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// noOverflow fails when the page is wider than the phone's screen, which
// would make the whole page scroll sideways.
func noOverflow(t *testing.T, b *browser, where string) {
	t.Helper()
	type widths struct {
		Scroll int `json:"scroll"`
		Inner  int `json:"inner"`
	}
	w := eval[widths](b, `({ scroll: document.documentElement.scrollWidth, inner: innerWidth })`)
	if w.Scroll > w.Inner {
		b.shot("failed-overflow-" + sanitize(where))
		t.Fatalf("%s: the page is %d px wide on a %d px screen", where, w.Scroll, w.Inner)
	}
}

// focused describes document.activeElement after a key press.
type focused struct {
	Text     string `json:"text"`
	Tag      string `json:"tag"`
	Primary  bool   `json:"primary"`
	Nav      bool   `json:"nav"`
	Dialog   bool   `json:"dialog"`
	Visible  bool   `json:"visible"` // :focus-visible with an outline drawn
	Disabled bool   `json:"disabled"`
}

const focusedJS = `(() => { const e = document.activeElement; const s = getComputedStyle(e);
	return { text: (e.textContent || '').trim(), tag: e.tagName, primary: e.classList.contains('primary'), nav: !!e.closest('nav'),
		dialog: !!e.closest('dialog[open]'), disabled: !!e.disabled,
		visible: e.matches(':focus-visible') && s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 1 }; })()`

// phoneSteps looks at the dashboard, the endpoints list and a job page on a
// 390x844 phone screen (screenshots, no sideways scrolling, a working menu
// button), then walks the endpoints page with the keyboard alone: Tab
// reaches the menu, the navigation links and the primary button with a
// visible focus ring, and the dialog keeps focus inside and closes on Esc.
func phoneSteps(t *testing.T, a *appliance, jobID string) {
	cookie := a.signIn(t, adminEmail, adminPassword)
	b := newBrowser(t, a.URL, 390, 844)
	b.run("phone screen", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulatePortrait))
	b.setSession(cookie)
	for _, p := range []struct{ path, wait, shot string }{
		{"/ui/", "Needs attention first", "16-phone-dashboard"},
		{"/ui/endpoints", "machine", "16-phone-endpoints"},
		{"/ui/jobs/" + jobID, "Why it failed", "16-phone-job"},
	} {
		b.open(p.path)
		b.waitText(p.wait)
		if p.path == "/ui/endpoints" {
			// The machine is revoked by now: show it, so the table is what is checked.
			b.run("show revoked", chromedpClickSelector(`.filters > label:last-child input`))
			b.waitText("fileserver-01")
		}
		if w := eval[int](b, `innerWidth`); w != 390 {
			t.Fatalf("the phone screen is %d px wide", w)
		}
		noOverflow(t, b, p.path)
		b.shot(p.shot)
	}

	// The navigation folds behind the menu button and folds again after use.
	navShown := `getComputedStyle(document.getElementById('main-nav')).display !== 'none'`
	if eval[bool](b, navShown) {
		t.Fatal("the navigation is unfolded on a phone before the menu button is used")
	}
	b.run("open the menu", chromedpClickSelector(".menu-toggle"))
	b.waitTrue("the navigation unfolds", navShown+` && document.querySelector('.menu-toggle').getAttribute('aria-expanded') === 'true'`)
	noOverflow(t, b, "menu")
	b.shot("16-phone-menu")
	b.click("Servers & clients")
	b.waitText("machine")
	if loc := eval[string](b, `location.pathname`); loc != "/ui/endpoints" || eval[bool](b, navShown) {
		t.Fatalf("after choosing a page from the menu: at %s, menu still open %v", loc, eval[bool](b, navShown))
	}

	// Keyboard only, from the top of the page.
	b.open("/ui/endpoints")
	b.waitText("machine")
	b.press(kb.Tab)
	f := eval[focused](b, focusedJS)
	if f.Text != "☰ Menu" || !f.Visible {
		t.Fatalf("the first Tab focuses %+v, want the menu button with a visible focus ring", f)
	}
	b.press(kb.Enter)
	b.waitTrue("the menu opens from the keyboard", navShown)
	var navLinks []string
	reachedPrimary := false
	for i := 0; i < 40 && !reachedPrimary; i++ {
		b.press(kb.Tab)
		f = eval[focused](b, focusedJS)
		if !f.Visible {
			b.shot("failed-focus-ring")
			t.Fatalf("Tab %d focuses %+v without a visible focus ring", i+1, f)
		}
		if f.Nav {
			navLinks = append(navLinks, f.Text)
		}
		reachedPrimary = f.Primary && f.Text == "Add machine"
	}
	if !reachedPrimary || !strings.Contains(strings.Join(navLinks, "|"), "Servers & clients") || len(navLinks) < 8 {
		t.Fatalf("Tab reached the navigation links %q and the primary button: %v", navLinks, reachedPrimary)
	}
	b.shot("16-phone-keyboard-focus")

	// The dialog: opened with Enter, focus stays inside, Esc closes it.
	b.press(kb.Enter)
	b.waitTrue("the dialog opens with focus inside", `!!document.activeElement.closest('dialog[open]')`)
	for i := 0; i < 8; i++ {
		if i < 6 {
			b.press(kb.Tab)
		} else {
			b.pressShift(kb.Tab)
		}
		if f = eval[focused](b, focusedJS); !f.Dialog {
			b.shot("failed-dialog-focus")
			t.Fatalf("key %d in the dialog moved focus out of it, to %+v", i+1, f)
		}
	}
	noOverflow(t, b, "dialog")
	b.shotViewport("16-phone-dialog") // the backdrop covers the screen, not the whole page
	b.press(kb.Escape)
	b.waitTrue("Esc closes the dialog", `!document.querySelector('dialog')`)
	if f = eval[focused](b, focusedJS); f.Text != "Add machine" {
		t.Errorf("after Esc focus is on %+v, want back on the button that opened the dialog", f)
	}
	if n := b.dialogs.Load(); n != 0 {
		t.Fatalf("%d JavaScript dialogs opened", n)
	}
}
