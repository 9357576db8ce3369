package resticrepo

import (
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestAuthentication: every request needs the endpoint's own, current
// credentials; one endpoint never reaches another's repository.
func TestAuthentication(t *testing.T) {
	e := newTestEnv(t, Options{})
	a, secretA := e.endpoint()
	b, secretB := e.endpoint()
	e.client(b, secretB, b).want(200, "POST", "?create=true", nil)
	e.client(b, secretB, b).want(200, "POST", "config", strings.NewReader("b's config"))

	cases := []struct {
		name         string
		user, secret string
	}{
		{"no credentials", "", ""},
		{"wrong secret", b, secretA},
		{"another endpoint's credentials", a, secretA},
		{"unknown endpoint", "ep_00000000000000000000000000", secretB},
		{"empty secret", b, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := e.client(tc.user, tc.secret, b)
			for _, req := range []struct{ method, rel string }{
				{"GET", "config"}, {"HEAD", "config"}, {"GET", "keys/"}, {"POST", "?create=true"},
				{"POST", "locks/" + hashName(nil)}, {"DELETE", "locks/" + hashName(nil)},
			} {
				code, body, hdr := c.do(req.method, req.rel, nil)
				if code != 401 || !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Basic ") || strings.Contains(body, "b's config") {
					t.Fatalf("%s %s: %d %q", req.method, req.rel, code, body)
				}
			}
		})
	}
	if exists(filepath.Join(e.dir, b, "locks", hashName(nil))) {
		t.Fatal("an unauthenticated upload was stored")
	}

	// Revocation acts on the next request; the data stays.
	c := e.client(b, secretB, b)
	c.want(200, "GET", "config", nil)
	e.revoke(b)
	c.want(401, "GET", "config", nil)
	if !exists(filepath.Join(e.dir, b, "config")) {
		t.Fatal("revocation removed data")
	}
}

// TestPathEscapes tries every way out of the repository: dot segments,
// their encoded forms, encoded slashes, backslashes, NUL, other shapes, and
// symbolic links planted in the repository. Each is refused and reveals
// nothing of the other repository or the host.
func TestPathEscapes(t *testing.T) {
	e := newTestEnv(t, Options{})
	a, secretA := e.endpoint()
	b, secretB := e.endpoint()
	e.client(a, secretA, a).want(200, "POST", "?create=true", nil)
	e.client(b, secretB, b).want(200, "POST", "?create=true", nil)
	const secretText = "b's secret config"
	e.client(b, secretB, b).want(200, "POST", "config", strings.NewReader(secretText))
	h := hashName([]byte("x"))

	paths := []string{
		"/agent/restic/" + a + "/../" + b + "/config",
		"/agent/restic/" + a + "/%2e%2e/" + b + "/config",
		"/agent/restic/" + a + "/%2E%2E/" + b + "/config",
		"/agent/restic/" + a + "/keys/..%2f..%2f" + b + "%2fconfig",
		"/agent/restic/" + a + "/keys%2f..%2f..%2f" + b + "%2fconfig",
		"/agent/restic/" + a + "%2f..%2f" + b + "/config",
		"/agent/restic/" + a + "/..%5c" + b + "%5cconfig",
		"/agent/restic/" + a + "/..\\" + b + "\\config",
		"/agent/restic/" + a + "/./config",
		"/agent/restic/" + a + "//config",
		"/agent/restic/" + a + "/config%00",
		"/agent/restic/" + a + "/config/",
		"/agent/restic/" + a + "/keys/" + strings.ToUpper(h),
		"/agent/restic/" + a + "/keys/" + h[:63],
		"/agent/restic/" + a + "/keys/" + h + "/",
		"/agent/restic/" + a + "/data/" + h[:2] + "/" + h,
		"/agent/restic/" + a + "/other/" + h,
		"/agent/restic/" + a + "/keys/" + h + "/../../../" + b + "/config",
		"/agent/restic/" + a + "/%63onfig",
		"/agent/restic/../../etc/passwd",
		"/agent/restic/" + a,
		"/agent/restic/tn_x/config",
		"/agent/restic/ep_/config",
	}
	for _, p := range paths {
		for _, method := range []string{"GET", "HEAD", "POST", "DELETE"} {
			code, body := e.raw(method, p, a, secretA, "data")
			if code != 400 || strings.Contains(body, secretText) {
				t.Errorf("%s %s: %d %q, want 400", method, p, code, body)
			}
		}
	}
	if got, _ := os.ReadFile(filepath.Join(e.dir, b, "config")); string(got) != secretText {
		t.Fatalf("b's config changed: %q", got)
	}
	if exists(filepath.Join(e.dir, a, "config")) {
		t.Fatal("a config was written through a refused path")
	}

	// Symbolic links planted in a's repository (by anyone but the agent,
	// which cannot make them) lead nowhere.
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "host-secret"), []byte(secretText), 0o600); err != nil {
		t.Fatal(err)
	}
	repoA := filepath.Join(e.dir, a)
	must(t, os.Symlink(filepath.Join(e.dir, b, "config"), filepath.Join(repoA, "keys", h)))
	must(t, os.Symlink(filepath.Join(outside, "host-secret"), filepath.Join(repoA, "config")))
	must(t, os.RemoveAll(filepath.Join(repoA, "snapshots")))
	must(t, os.Symlink(outside, filepath.Join(repoA, "snapshots")))
	must(t, os.Symlink(outside, filepath.Join(repoA, "data", "ab2"))) // not listed: not a data dir name
	c := e.client(a, secretA, a)
	for _, rel := range []string{"keys/" + h, "config", "snapshots/" + h, "snapshots/"} {
		for _, method := range []string{"GET", "HEAD"} {
			code, body, _ := c.do(method, rel, nil)
			if code == 200 || strings.Contains(body, secretText) {
				t.Errorf("%s %s through a symlink: %d %q", method, rel, code, body)
			}
		}
	}
	content := []byte("snapshot")
	code, _, _ := c.do("POST", "snapshots/"+hashName(content), strings.NewReader(string(content)))
	if code != 403 {
		t.Errorf("upload through a symlinked directory: %d, want 403", code)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 1 {
		t.Fatalf("something was written outside the repository: %v", entries)
	}
	if body := c.want(200, "GET", "keys/", nil); strings.Contains(body, h) {
		t.Errorf("a symlink was listed: %s", body)
	}
}

// TestUploadRefusals: oversized, truncated, mismatched and disk-full
// uploads are refused with a clear status and leave nothing behind.
func TestUploadRefusals(t *testing.T) {
	e := newTestEnv(t, Options{MaxFileBytes: 1 << 20})
	id, secret := e.endpoint()
	c := e.client(id, secret, id)
	c.want(200, "POST", "?create=true", nil)
	big := []byte(strings.Repeat("z", 1<<20+1))
	small := []byte("small and fine")

	t.Run("hash mismatch", func(t *testing.T) {
		for _, kind := range []string{"data", "keys", "locks", "snapshots", "index"} {
			body := c.want(400, "POST", kind+"/"+hashName([]byte("other")), strings.NewReader(string(small)))
			if !strings.Contains(body, "does not match") {
				t.Fatalf("%s: answer %q does not say why", kind, body)
			}
		}
	})
	t.Run("oversized, announced", func(t *testing.T) {
		c.want(413, "POST", "data/"+hashName(big), strings.NewReader(string(big)))
	})
	t.Run("oversized, chunked", func(t *testing.T) {
		// io.MultiReader hides the length, so the client sends chunks and the
		// server finds out while copying.
		c.want(413, "POST", "data/"+hashName(big), io.MultiReader(strings.NewReader(string(big))))
	})
	t.Run("truncated", func(t *testing.T) {
		code, body := e.rawTruncated("POST", PathPrefix+id+"/data/"+hashName(big), id, secret, 1000, 400)
		if code != 400 || !strings.Contains(body, "truncated") {
			t.Fatalf("truncated upload: %d %q", code, body)
		}
	})
	t.Run("disk full", func(t *testing.T) {
		e.h.wrapTemp = func(w io.Writer) io.Writer { return &fullDisk{w: w, room: 100} }
		defer func() { e.h.wrapTemp = nil }()
		content := []byte(strings.Repeat("pack", 1000))
		c.want(507, "POST", "data/"+hashName(content), strings.NewReader(string(content)))
		c.want(507, "POST", "config", strings.NewReader(string(content)))
	})
	t.Run("nothing left behind", func(t *testing.T) {
		if l := leftovers(t, e.dir); len(l) != 0 {
			t.Fatalf("temp files left: %v", l)
		}
		c.want(404, "HEAD", "config", nil)
		if body := c.want(200, "GET", "data/", nil); body != "[]\n" {
			t.Fatalf("data after refusals: %s", body)
		}
		for _, kind := range []string{"keys", "locks", "snapshots", "index"} {
			if body := c.want(200, "GET", kind+"/", nil); body != "[]\n" {
				t.Fatalf("%s after refusals: %s", kind, body)
			}
		}
		// The same uploads succeed once they are right.
		c.upload("data", small, 200)
		c.want(200, "POST", "config", strings.NewReader("config"))
	})
}

// TestQuota: an upload that would exceed the endpoint's quota is 507 before
// a byte is written; deleting locks gives the space back.
func TestQuota(t *testing.T) {
	e := newTestEnv(t, Options{QuotaBytes: 10_000})
	id, secret := e.endpoint()
	c := e.client(id, secret, id)
	c.want(200, "POST", "?create=true", nil)
	first := []byte(strings.Repeat("a", 6000))
	c.upload("data", first, 200)
	second := []byte(strings.Repeat("b", 6000))
	body := c.want(507, "POST", "data/"+hashName(second), strings.NewReader(string(second)))
	if !strings.Contains(body, "quota") {
		t.Fatalf("507 does not name the quota: %q", body)
	}
	c.want(507, "POST", "data/"+hashName(second), io.MultiReader(strings.NewReader(string(second)))) // chunked
	lock := []byte(strings.Repeat("l", 3000))
	lockName := c.upload("locks", lock, 200)
	c.want(507, "POST", "snapshots/"+hashName(lock[:2000]), strings.NewReader(string(lock[:2000])))
	c.want(200, "DELETE", "locks/"+lockName, nil)
	c.upload("snapshots", lock[:2000], 200)
	if l := leftovers(t, e.dir); len(l) != 0 {
		t.Fatalf("temp files left: %v", l)
	}

	// Another endpoint has its own quota, and a restart counts what is
	// already stored.
	other, otherSecret := e.endpoint()
	oc := e.client(other, otherSecret, other)
	oc.want(200, "POST", "?create=true", nil)
	oc.upload("data", second, 200)
	h2, err := New(Options{Dir: e.dir, Auth: e.h.opt.Auth, QuotaBytes: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	restarted := *e
	restarted.h, restarted.srv = h2, httptest.NewServer(h2)
	defer restarted.srv.Close()
	c = restarted.client(id, secret, id)
	c.want(507, "POST", "data/"+hashName(second), strings.NewReader(string(second)))
}

// fullDisk accepts room bytes, then fails as a full disk does.
type fullDisk struct {
	w    io.Writer
	room int
}

func (f *fullDisk) Write(p []byte) (int, error) {
	if len(p) > f.room {
		n, _ := f.w.Write(p[:f.room])
		f.room = 0
		return n, &os.PathError{Op: "write", Path: "temp", Err: syscall.ENOSPC}
	}
	f.room -= len(p)
	return f.w.Write(p)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
