package e2e

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// Browser settings a person's real browser would have (a clipboard, a time
// zone, a session) set through the DevTools protocol.

// setSession gives the browser the session cookie of a sign-in made
// outside it, so a test can start on a page instead of the sign-in form.
func (b *browser) setSession(cookie string) {
	b.t.Helper()
	value(b, "set session cookie", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, network.SetCookie, network.SetCookieParams{Name: "backstop_session", Value: cookie, URL: b.base})
		return err
	}))
}

// grantClipboard lets the appliance's pages read and write the clipboard,
// as a person clicking "Allow" would.
func (b *browser) grantClipboard() {
	b.t.Helper()
	u, _ := url.Parse(b.base)
	origin := u.Scheme + "://" + u.Host
	value(b, "grant clipboard", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		for _, name := range []string{"clipboard-read", "clipboard-write"} {
			if _, err := chromedp.CallBrowser(ctx, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{Origin: origin,
				Permission: &cdpbrowser.PermissionDescriptor{Name: name}, Setting: cdpbrowser.PermissionSettingGranted}); err != nil {
				return err
			}
		}
		return nil
	}))
}

// timezone makes the page's clock run in the IANA zone tz (pages loaded
// afterwards format times in it).
func (b *browser) timezone(tz string) {
	b.t.Helper()
	value(b, "time zone "+tz, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: tz})
		return err
	}))
}

// press sends one key (kb.Tab, kb.Escape, …) to the focused element.
func (b *browser) press(key string) {
	b.t.Helper()
	b.run("press key", chromedp.KeyEvent(key))
}

// pressShift sends one key with Shift held.
func (b *browser) pressShift(key string) {
	b.t.Helper()
	b.run("press shift+key", chromedp.KeyEvent(key, chromedp.KeyModifiers(chromedp.ModifierShift)))
}

// waitTrue polls a JavaScript expression until it is true.
func (b *browser) waitTrue(what, expr string) {
	b.t.Helper()
	value(b, what, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(10*time.Second)))
}

// shotViewport saves what is on the screen (FullScreenshot would show a
// modal's backdrop, which covers the screen, ending halfway down).
func (b *browser) shotViewport(name string) {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	buf, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	_ = os.WriteFile(filepath.Join(b.shots, name+".png"), buf, 0o644)
}

// text is the page's visible text.
func (b *browser) text() string {
	b.t.Helper()
	return eval[string](b, `document.body.innerText`)
}

// normalizeSpace turns the no-break and narrow no-break spaces Intl puts
// in formatted times into plain spaces.
func normalizeSpace(s string) string {
	return strings.NewReplacer("\u202f", " ", "\u00a0", " ").Replace(s)
}
