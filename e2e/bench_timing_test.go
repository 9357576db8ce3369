package e2e

import "testing"

// endpointsTiming splits the wait for the first page of the endpoints list
// into its parts, from the browser's own resource timing: the request of
// /api/v1/endpoints until its first byte (the server's work), the transfer
// of the answer, and the rest until the rows were on screen (parsing and
// rendering in the page).
type endpointsTiming struct {
	Server   float64 `json:"server"`   // request sent -> first byte
	Transfer float64 `json:"transfer"` // first byte -> last byte
	Bytes    float64 `json:"bytes"`    // decoded size of the answer
	Render   float64 `json:"render"`   // last byte -> rows on screen
	SignIn   float64 `json:"signIn"`   // sign-in clicked -> request sent
	Session  float64 `json:"session"`  // POST /api/v1/session, sent -> answered (password hashing)
	Shown    float64 `json:"shown"`    // sign-in clicked -> rows on screen
}

func logEndpointsTiming(t *testing.T, b *browser) endpointsTiming {
	t.Helper()
	tm := eval[endpointsTiming](b, `(() => {
		const r = performance.getEntriesByType('resource').filter((e) => e.name.endsWith('/api/v1/endpoints')).pop();
		const sess = performance.getEntriesByType('resource').filter((e) => e.name.endsWith('/api/v1/session')).pop();
		const signIn = performance.getEntriesByName('backstop:sign-in')[0].startTime;
		const shown = performance.getEntriesByName('backstop:endpoints-rows')[0].startTime;
		return { server: r.responseStart - r.startTime, transfer: r.responseEnd - r.responseStart,
			bytes: r.decodedBodySize, render: shown - r.responseEnd,
			signIn: r.startTime - signIn, session: sess.responseEnd - sess.startTime, shown: shown - signIn };
	})()`)
	// How much of the page's part is JSON.parse alone, measured on the same answer.
	parse := eval[float64](b, `fetch('/api/v1/endpoints').then((r) => r.text()).then((text) => {
		const t0 = performance.now(); JSON.parse(text); return performance.now() - t0; })`)
	t.Logf("JSON.parse of the answer alone: %.0f ms", parse)
	t.Logf("sign-in to first rows %.0f ms: sign-in until GET /api/v1/endpoints sent %.0f ms (of which POST /api/v1/session %.0f ms); server %.0f ms to first byte; transfer %.0f ms for %.1f MB; parse and render %.0f ms",
		tm.Shown, tm.SignIn, tm.Session, tm.Server, tm.Transfer, tm.Bytes/1e6, tm.Render)
	return tm
}
