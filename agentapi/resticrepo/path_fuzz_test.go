package resticrepo

import (
	"net/http"
	"net/url"
	"path"
	"strings"
	"testing"
)

// FuzzParsePath feeds arbitrary request targets to the path parser: it must
// never panic, and whatever it accepts must be one of restic's shapes whose
// file-system path stays inside the endpoint's repository.
//
//	go test -run '^$' -fuzz FuzzParsePath ./agentapi/resticrepo/
func FuzzParsePath(f *testing.F) {
	for _, s := range []string{
		"/agent/restic/ep_a/", "/agent/restic/ep_a/config", "/agent/restic/ep_a/data/",
		"/agent/restic/ep_a/data/" + strings.Repeat("ab", 32), "/agent/restic/ep_a/../ep_b/config",
		"/agent/restic/ep_a/%2e%2e/config", "/agent/restic/ep_a/locks/" + strings.Repeat("0", 64),
		"/agent/restic/ep_a//config", `/agent/restic/ep_a\config`, "/agent/restic/ep_a/keys/../../x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, target string) {
		u, err := url.ParseRequestURI(target)
		if err != nil {
			return
		}
		tg, err := parsePath(&http.Request{Method: http.MethodGet, URL: u})
		if err != nil {
			return
		}
		if !validEndpointID(tg.endpoint) || strings.ContainsAny(tg.endpoint, "./\\") {
			t.Fatalf("accepted endpoint %q from %q", tg.endpoint, target)
		}
		if tg.kind == "" {
			return
		}
		rel := tg.kind // a listing names its directory
		if tg.kind == "config" || tg.name != "" {
			rel = tg.relPath()
		}
		if clean := path.Clean(rel); clean != rel || strings.HasPrefix(clean, "..") || path.IsAbs(clean) {
			t.Fatalf("accepted %q as %q, which leaves the repository", target, rel)
		}
		if tg.kind != "config" && !fileKinds[tg.kind] {
			t.Fatalf("accepted kind %q from %q", tg.kind, target)
		}
	})
}
