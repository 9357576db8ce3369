// Package assets serves Backstop's web interface: a single page of plain ES
// modules embedded in the binary, talking to the same /api/v1 session API
// as any other client.
//
// Static files are served only under content-hashed URLs
// (/assets/js/main.<sha256-prefix>.js) with a one-year immutable cache, so
// a new build can never be mixed with a stale cached module. Relative
// module imports inside the JavaScript are rewritten to the hashed names at
// start-up; the hash of a module covers its rewritten imports, so a change
// anywhere changes the URL of every module that depends on it. The page
// itself (index.html) is never cached.
//
// Every answer carries a strict Content-Security-Policy: only this origin's
// scripts, styles and connections, no inline script, no framing.
package assets

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"regexp"
	"strings"
)

//go:embed index.html app.css favicon.svg js vendor
var files embed.FS

// ContentSecurityPolicy is sent with every answer of the interface. It
// allows nothing inline and nothing from another origin.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Prefix is the URL path under which hashed static files are served.
const Prefix = "/assets/"

// asset is one static file ready to serve.
type asset struct {
	body        []byte
	gzipped     []byte // nil when compression does not pay
	contentType string
	etag        string
}

// Handler serves the interface. Build it once with New; it is safe for
// concurrent use and never touches the file system.
type Handler struct {
	byURL  map[string]*asset // hashed URL path -> file
	hashed map[string]string // source path ("js/main.js") -> hashed URL path
	index  *asset
}

// New hashes and prepares every embedded file. It fails only if the
// embedded tree is inconsistent (an import of a missing module or an import
// cycle), which the package tests catch at build time.
func New() (*Handler, error) {
	h := &Handler{byURL: map[string]*asset{}, hashed: map[string]string{}}
	var sources []string
	err := fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || p == "index.html" {
			return err
		}
		switch path.Ext(p) {
		case ".js", ".mjs", ".css", ".svg":
			sources = append(sources, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	visiting := map[string]bool{}
	for _, p := range sources {
		if _, err := h.hash(p, visiting); err != nil {
			return nil, err
		}
	}
	page, err := files.ReadFile("index.html")
	if err != nil {
		return nil, err
	}
	// Preload every module so the browser fetches them in parallel instead
	// of discovering the import graph one level at a time.
	var preload bytes.Buffer
	for _, src := range sources {
		if strings.HasSuffix(src, ".js") || strings.HasSuffix(src, ".mjs") {
			fmt.Fprintf(&preload, "<link rel=\"modulepreload\" href=\"%s\">\n", h.hashed[src])
		}
	}
	page = bytes.Replace(page, []byte("<!-- modulepreload -->\n"), preload.Bytes(), 1)
	// index.html names its files by source path; swap in the hashed URLs.
	for src, url := range h.hashed {
		page = bytes.ReplaceAll(page, []byte(`"`+Prefix+src+`"`), []byte(`"`+url+`"`))
	}
	for _, m := range pageRef.FindAllSubmatch(page, -1) {
		if h.byURL[string(m[1])] == nil {
			return nil, fmt.Errorf("assets: index.html names %s, which is not embedded", m[1])
		}
	}
	h.index = newAsset(page, "text/html; charset=utf-8")
	return h, nil
}

// pageRef matches the asset URLs named in index.html.
var pageRef = regexp.MustCompile(`"(` + Prefix + `[^"]+)"`)

// importSpec matches the relative module specifiers of static imports,
// re-exports and dynamic imports: from "./x.js", import("../y.js").
var importSpec = regexp.MustCompile(`(\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)(["'])(\.\.?/[^"']+)(["'])`)

// contentTypes are the types of the embedded files, by extension. A table
// rather than mime.TypeByExtension: that reads the system's mime.types on
// first use and keeps ~0.8 MB of it for as long as the appliance runs.
var contentTypes = map[string]string{
	".js":    "text/javascript; charset=utf-8",
	".mjs":   "text/javascript; charset=utf-8",
	".css":   "text/css; charset=utf-8",
	".svg":   "image/svg+xml",
	".png":   "image/png",
	".ico":   "image/x-icon",
	".woff2": "font/woff2",
	".json":  "application/json",
	".txt":   "text/plain; charset=utf-8",
}

// hash returns the hashed URL of the source file p, hashing the modules it
// imports first.
func (h *Handler) hash(p string, visiting map[string]bool) (string, error) {
	if url, ok := h.hashed[p]; ok {
		return url, nil
	}
	if visiting[p] {
		return "", fmt.Errorf("assets: import cycle through %s", p)
	}
	visiting[p] = true
	defer delete(visiting, p)
	body, err := files.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("assets: %w", err)
	}
	ext := path.Ext(p)
	if ext == ".js" || ext == ".mjs" {
		var rerr error
		body = importSpec.ReplaceAllFunc(body, func(m []byte) []byte {
			sub := importSpec.FindSubmatch(m)
			target := path.Join(path.Dir(p), string(sub[3]))
			url, err := h.hash(target, visiting)
			if err != nil {
				rerr = fmt.Errorf("assets: %s imports %s: %w", p, sub[3], err)
				return m
			}
			return []byte(string(sub[1]) + string(sub[2]) + url + string(sub[4]))
		})
		if rerr != nil {
			return "", rerr
		}
	}
	sum := sha256.Sum256(body)
	url := Prefix + strings.TrimSuffix(p, ext) + "." + hex.EncodeToString(sum[:6]) + ext
	ctype, ok := contentTypes[ext]
	if !ok {
		return "", fmt.Errorf("assets: %s: no content type for %q files (add it to contentTypes)", p, ext)
	}
	h.hashed[p] = url
	h.byURL[url] = newAsset(body, ctype)
	return url, nil
}

func newAsset(body []byte, ctype string) *asset {
	sum := sha256.Sum256(body)
	a := &asset{body: body, contentType: ctype, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
	if len(body) > 512 {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.Write(body)
		zw.Close()
		if buf.Len() < len(body)*9/10 {
			a.gzipped = buf.Bytes()
		}
	}
	return a
}

// URL returns the hashed URL of a source path such as "js/main.js", or ""
// when there is no such file.
func (h *Handler) URL(source string) string { return h.hashed[source] }

// isPage reports whether p is a route of the single-page interface, which
// all answer with index.html so that reloads and shared links work.
func isPage(p string) bool {
	return p == "/" || p == "/setup" || p == "/ui" || strings.HasPrefix(p, "/ui/")
}

// ServeHTTP answers GET and HEAD for the interface's pages and hashed
// files; anything else outside the API is 404 (or 405 for other methods).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", ContentSecurityPolicy)
	hdr.Set("X-Frame-Options", "DENY")
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	hdr.Set("Cross-Origin-Opener-Policy", "same-origin")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	p := r.URL.Path
	switch {
	case isPage(p):
		hdr.Set("Cache-Control", "no-cache")
		h.write(w, r, h.index)
	case p == "/favicon.ico":
		http.Redirect(w, r, h.hashed["favicon.svg"], http.StatusFound)
	case strings.HasPrefix(p, Prefix):
		a, ok := h.byURL[p]
		if !ok {
			// An old page asking for a file of a previous build: say so
			// plainly instead of answering the page, which would fail as a
			// module with a confusing MIME error.
			hdr.Set("Cache-Control", "no-store")
			http.Error(w, "no such asset (the appliance may have been updated; reload the page)", http.StatusNotFound)
			return
		}
		hdr.Set("Cache-Control", "public, max-age=31536000, immutable")
		h.write(w, r, a)
	default:
		http.NotFound(w, r)
	}
}

func (h *Handler) write(w http.ResponseWriter, r *http.Request, a *asset) {
	hdr := w.Header()
	hdr.Set("Content-Type", a.contentType)
	hdr.Set("ETag", a.etag)
	hdr.Add("Vary", "Accept-Encoding")
	if match := r.Header.Get("If-None-Match"); match != "" && strings.Contains(match, a.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := a.body
	if a.gzipped != nil && acceptsGzip(r) {
		hdr.Set("Content-Encoding", "gzip")
		body = a.gzipped
	}
	hdr.Set("Content-Length", fmt.Sprint(len(body)))
	if r.Method == http.MethodHead {
		return
	}
	w.Write(body)
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		name, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(name), "gzip") && strings.ReplaceAll(q, " ", "") != "q=0" {
			return true
		}
	}
	return false
}
