package assets

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func newHandler(t *testing.T) *Handler {
	t.Helper()
	h, err := New()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func get(t *testing.T, h http.Handler, path string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestPagesServeIndexWithoutCaching(t *testing.T) {
	h := newHandler(t)
	for _, p := range []string{"/", "/ui", "/ui/", "/ui/keys", "/ui/endpoints/ep_123", "/setup"} {
		w := get(t, h, p)
		if w.Code != http.StatusOK {
			t.Fatalf("%s: status %d", p, w.Code)
		}
		if ct := w.Header().Get("Content-Type"); ct != "text/html; charset=utf-8" {
			t.Errorf("%s: content type %q", p, ct)
		}
		if cc := w.Header().Get("Cache-Control"); cc != "no-cache" {
			t.Errorf("%s: cache control %q", p, cc)
		}
		if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") ||
			!strings.Contains(csp, "frame-ancestors 'none'") || strings.Contains(csp, "unsafe") {
			t.Errorf("%s: CSP %q", p, csp)
		}
		if w.Header().Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: no X-Frame-Options", p)
		}
	}
}

// The page must name only hashed URLs that the handler serves, and carry
// no inline script or style (the CSP would block them).
func TestIndexNamesOnlyHashedServedAssets(t *testing.T) {
	h := newHandler(t)
	body := get(t, h, "/").Body.String()
	refs := regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(body, -1)
	if len(refs) < 3 {
		t.Fatalf("index names %d files", len(refs))
	}
	hashed := regexp.MustCompile(`^/assets/.+\.[0-9a-f]{12}\.(js|mjs|css|svg)$`)
	for _, m := range refs {
		if !hashed.MatchString(m[1]) {
			t.Errorf("index names unhashed URL %s", m[1])
			continue
		}
		if w := get(t, h, m[1]); w.Code != http.StatusOK {
			t.Errorf("%s: status %d", m[1], w.Code)
		}
	}
	if regexp.MustCompile(`<script(?:\s[^>]*)?>[^<]+</script>`).MatchString(body) || strings.Contains(body, "style=") {
		t.Error("index.html has inline script or style")
	}
}

// Every relative import in every module is rewritten to a hashed URL the
// handler serves, so the browser never asks for an unhashed file.
func TestModuleImportsAreRewrittenToServedHashedURLs(t *testing.T) {
	h := newHandler(t)
	spec := regexp.MustCompile(`(?:from\s*|import\s*\(\s*|import\s+)["']([^"']+)["']`)
	n := 0
	for src, url := range h.hashed {
		if !strings.HasSuffix(src, ".js") && !strings.HasSuffix(src, ".mjs") {
			continue
		}
		w := get(t, h, url)
		if ct := w.Header().Get("Content-Type"); ct != "text/javascript; charset=utf-8" {
			t.Errorf("%s: content type %q", url, ct)
		}
		for _, m := range spec.FindAllStringSubmatch(w.Body.String(), -1) {
			n++
			if !strings.HasPrefix(m[1], Prefix) || h.byURL[m[1]] == nil {
				t.Errorf("%s imports %q, which is not a served hashed URL", src, m[1])
			}
		}
	}
	if n < 10 {
		t.Fatalf("found only %d imports; the pattern no longer matches the sources", n)
	}
}

func TestEveryEmbeddedModuleIsReachable(t *testing.T) {
	h := newHandler(t)
	fs.WalkDir(files, "js", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && h.URL(p) == "" {
			t.Errorf("%s has no hashed URL", p)
		}
		return nil
	})
}

func TestHashedAssetsAreImmutableAndCompressed(t *testing.T) {
	h := newHandler(t)
	url := h.URL("vendor/preact.mjs")
	w := get(t, h, url, "Accept-Encoding", "br, gzip")
	if cc := w.Header().Get("Cache-Control"); cc != "public, max-age=31536000, immutable" {
		t.Fatalf("cache control %q", cc)
	}
	if w.Header().Get("Content-Encoding") != "gzip" {
		t.Fatal("not compressed for a client that accepts gzip")
	}
	zr, err := gzip.NewReader(w.Body)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := io.ReadAll(zr)
	raw, _ := files.ReadFile("vendor/preact.mjs")
	if !bytes.Equal(plain, raw) {
		t.Fatal("decompressed body differs from the embedded file")
	}
	if w := get(t, h, url, "Accept-Encoding", "gzip;q=0"); w.Header().Get("Content-Encoding") != "" {
		t.Fatal("compressed for a client that refused gzip")
	}
	etag := w.Header().Get("ETag")
	if w := get(t, h, url, "If-None-Match", etag); w.Code != http.StatusNotModified {
		t.Fatalf("revalidation: status %d", w.Code)
	}
}

func TestUnknownPathsAndMethods(t *testing.T) {
	h := newHandler(t)
	cases := []struct {
		method, path string
		want         int
	}{
		{"GET", "/assets/js/main.js", http.StatusNotFound},              // unhashed name
		{"GET", "/assets/js/main.000000000000.js", http.StatusNotFound}, // another build's hash
		{"GET", "/install/agent.sh", http.StatusNotFound},               // not the interface's to answer
		{"GET", "/favicon.ico", http.StatusFound},
		{"POST", "/ui/", http.StatusMethodNotAllowed},
	}
	for _, c := range cases {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(c.method, c.path, nil))
		if w.Code != c.want {
			t.Errorf("%s %s: status %d, want %d", c.method, c.path, w.Code, c.want)
		}
		if w.Header().Get("Content-Security-Policy") == "" {
			t.Errorf("%s %s: no CSP", c.method, c.path)
		}
	}
}

// The whole interface, compressed as served, stays small: the goal for the
// first load of the dashboard is under 150 KB transferred.
func TestCompressedSizeBudget(t *testing.T) {
	h := newHandler(t)
	total := 0
	for _, a := range h.byURL {
		if a.gzipped != nil {
			total += len(a.gzipped)
		} else {
			total += len(a.body)
		}
	}
	total += len(h.index.body)
	t.Logf("all assets, compressed: %d bytes", total)
	if total > 150_000 {
		t.Fatalf("assets total %d bytes compressed, over the 150 KB budget", total)
	}
}
