package resticrepo

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"backstop/app"
	"backstop/store"
	"backstop/store/storetest"
)

// testEnv is the real thing on loopback: a SQLite database with a tenant
// and endpoints, the handler authenticating through EndpointAuthenticator,
// mounted with Route as serve.go mounts it.
type testEnv struct {
	t      testing.TB
	db     *store.DB
	tenant string
	h      *Handler
	srv    *httptest.Server
	dir    string // Options.Dir
}

func newTestEnv(t testing.TB, opt Options) *testEnv {
	t.Helper()
	db := storetest.Open(t, "")
	tenant := storetest.Tenant(t, db, "Acme")
	opt.Dir = filepath.Join(t.TempDir(), "agent", "restic")
	opt.Auth = EndpointAuthenticator{Endpoints: db}
	h, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h.Route(http.NotFoundHandler())) // listens on 127.0.0.1
	t.Cleanup(srv.Close)
	return &testEnv{t: t, db: db, tenant: tenant, h: h, srv: srv, dir: opt.Dir}
}

// endpoint creates an active endpoint and returns its id and secret.
func (e *testEnv) endpoint() (id, secret string) {
	e.t.Helper()
	secret = app.RandomToken(32)
	ep := &app.Endpoint{TenantID: e.tenant, Hostname: "host", Profile: app.ProfileServer, SecretFingerprint: app.Fingerprint(secret)}
	if err := e.db.CreateEndpoint(context.Background(), ep); err != nil {
		e.t.Fatal(err)
	}
	return ep.ID, secret
}

// revoke marks the endpoint revoked.
func (e *testEnv) revoke(id string) {
	e.t.Helper()
	_, err := e.db.UpdateEndpoint(context.Background(), id, func(ep *app.Endpoint) error {
		ep.Status, ep.RevokedAt = app.EndpointRevoked, app.Ptr(time.Now())
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

// client makes requests as one endpoint.
type client struct {
	e            *testEnv
	user, secret string
	base         string // URL of the repository, ending in "/"
}

func (e *testEnv) client(user, secret, repo string) *client {
	return &client{e: e, user: user, secret: secret, base: e.srv.URL + PathPrefix + repo + "/"}
}

// do sends a request to base+rel and returns the status, body and headers.
func (c *client) do(method, rel string, body io.Reader, hdr ...string) (int, string, http.Header) {
	c.e.t.Helper()
	req, err := http.NewRequest(method, c.base+rel, body)
	if err != nil {
		c.e.t.Fatal(err)
	}
	if c.user != "" {
		req.SetBasicAuth(c.user, c.secret)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.e.srv.Client().Do(req)
	if err != nil {
		c.e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// want checks a request's status.
func (c *client) want(code int, method, rel string, body io.Reader, hdr ...string) string {
	c.e.t.Helper()
	got, b, _ := c.do(method, rel, body, hdr...)
	if got != code {
		c.e.t.Fatalf("%s %s: status %d (%q), want %d", method, rel, got, strings.TrimSpace(b), code)
	}
	return b
}

// upload posts content under its SHA-256 name and returns the name.
func (c *client) upload(kind string, content []byte, code int) string {
	c.e.t.Helper()
	name := hashName(content)
	c.want(code, "POST", kind+"/"+name, strings.NewReader(string(content)))
	return name
}

func hashName(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// raw sends a request line and headers verbatim over TCP, so paths reach the
// server exactly as written (no client-side cleaning or escaping), and
// returns the status code and body.
func (e *testEnv) raw(method, target, user, secret string, body string) (int, string) {
	e.t.Helper()
	conn, err := net.Dial("tcp", e.srv.Listener.Addr().String())
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close()
	req := &http.Request{Header: http.Header{}}
	req.SetBasicAuth(user, secret)
	_, err = io.WriteString(conn, method+" "+target+" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"+
		"Authorization: "+req.Header.Get("Authorization")+"\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
	if err != nil {
		e.t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// rawTruncated announces a body of length bytes, sends only send of them,
// closes its side of the connection and returns the answer.
func (e *testEnv) rawTruncated(method, target, user, secret string, length, send int) (int, string) {
	e.t.Helper()
	conn, err := net.Dial("tcp", e.srv.Listener.Addr().String())
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close()
	req := &http.Request{Header: http.Header{}}
	req.SetBasicAuth(user, secret)
	_, err = io.WriteString(conn, method+" "+target+" HTTP/1.1\r\nHost: 127.0.0.1\r\n"+
		"Authorization: "+req.Header.Get("Authorization")+"\r\nContent-Length: "+strconv.Itoa(length)+"\r\n\r\n"+
		strings.Repeat("t", send))
	if err != nil {
		e.t.Fatal(err)
	}
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		e.t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// leftovers lists temp files anywhere under dir: a failed upload must
// leave none.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), tempPrefix) {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// exists reports whether a path exists (without following a final link).
func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
