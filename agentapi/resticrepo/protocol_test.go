package resticrepo

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestProtocol walks restic's REST protocol by hand: create, config once,
// every file type, HEAD, ranged GET, both listing versions, lock deletion.
func TestProtocol(t *testing.T) {
	e := newTestEnv(t, Options{})
	id, secret := e.endpoint()
	c := e.client(id, secret, id)

	c.want(404, "HEAD", "config", nil) // restic's init asks first
	c.want(404, "GET", "keys/", nil)   // no repository yet
	c.want(400, "POST", "", nil)       // create needs ?create=true
	c.want(200, "POST", "?create=true", nil)
	c.want(200, "POST", "?create=true", nil) // idempotent
	for _, d := range []string{"keys", "locks", "snapshots", "index", "data/00", "data/ff"} {
		if fi, err := os.Stat(filepath.Join(e.dir, id, d)); err != nil || !fi.IsDir() {
			t.Fatalf("create did not make %s: %v", d, err)
		}
	}

	config := []byte("config, not named by its hash")
	c.want(200, "POST", "config", strings.NewReader(string(config)))
	if got := c.want(200, "GET", "config", nil); got != string(config) {
		t.Fatalf("GET config = %q", got)
	}
	code, _, hdr := c.do("HEAD", "config", nil)
	if code != 200 || hdr.Get("Content-Length") != "29" {
		t.Fatalf("HEAD config: %d, Content-Length %q", code, hdr.Get("Content-Length"))
	}
	c.want(403, "POST", "config", strings.NewReader("another config"))
	if got := c.want(200, "GET", "config", nil); got != string(config) {
		t.Fatalf("config was overwritten: %q", got)
	}

	pack := []byte(strings.Repeat("0123456789", 1000))
	names := map[string]string{}
	for _, kind := range []string{"keys", "locks", "snapshots", "index", "data"} {
		content := append([]byte(kind+":"), pack...)
		names[kind] = c.upload(kind, content, 200)
		if got := c.want(200, "GET", kind+"/"+names[kind], nil); got != string(content) {
			t.Fatalf("GET %s: wrong content", kind)
		}
		// A retry of the same upload (restic lost the answer) changes
		// nothing and succeeds; other bytes under the name never replace it.
		c.upload(kind, content, 200)
		c.want(403, "POST", kind+"/"+names[kind], strings.NewReader("other bytes"))
		if got := c.want(200, "GET", kind+"/"+names[kind], nil); got != string(content) {
			t.Fatalf("GET %s after the refused overwrite: wrong content", kind)
		}
	}
	dataName := names["data"]
	if !exists(filepath.Join(e.dir, id, "data", dataName[:2], dataName)) {
		t.Fatal("data file not stored under data/<2 hex>/")
	}

	// HEAD carries the size; a ranged GET answers 206 with exactly the range.
	code, _, hdr = c.do("HEAD", "data/"+dataName, nil)
	if code != 200 || hdr.Get("Content-Length") != "10005" {
		t.Fatalf("HEAD data: %d, Content-Length %q", code, hdr.Get("Content-Length"))
	}
	code, body, hdr := c.do("GET", "data/"+dataName, nil, "Range", "bytes=5-14")
	if code != 206 || body != "0123456789" || hdr.Get("Content-Range") != "bytes 5-14/10005" {
		t.Fatalf("ranged GET: %d %q %q", code, body, hdr.Get("Content-Range"))
	}
	code, body, _ = c.do("GET", "data/"+dataName, nil, "Range", "bytes=10000-")
	if code != 206 || body != "56789" {
		t.Fatalf("open-ended range: %d %q", code, body)
	}
	c.want(416, "GET", "data/"+dataName, nil, "Range", "bytes=20000-")
	c.want(404, "GET", "data/"+hashName([]byte("absent")), nil)
	c.want(404, "HEAD", "snapshots/"+hashName([]byte("absent")), nil)

	// Listings: v1 by default, v2 when asked, the media type echoed; temp
	// files of uploads in progress are not listed.
	if err := os.WriteFile(filepath.Join(e.dir, id, "data", dataName[:2], tempPrefix+dataName+"-x"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"keys", "locks", "snapshots", "index", "data"} {
		code, body, hdr := c.do("GET", kind+"/", nil)
		var v1 []string
		if code != 200 || hdr.Get("Content-Type") != mediaTypeV1 || json.Unmarshal([]byte(body), &v1) != nil ||
			!slices.Equal(v1, []string{names[kind]}) {
			t.Fatalf("v1 list %s: %d %q %q", kind, code, hdr.Get("Content-Type"), body)
		}
		code, body, hdr = c.do("GET", kind+"/", nil, "Accept", mediaTypeV2)
		var v2 []struct {
			Name string `json:"name"`
			Size int64  `json:"size"`
		}
		if code != 200 || hdr.Get("Content-Type") != mediaTypeV2 || json.Unmarshal([]byte(body), &v2) != nil ||
			len(v2) != 1 || v2[0].Name != names[kind] || v2[0].Size != int64(len(kind)+1+len(pack)) {
			t.Fatalf("v2 list %s: %d %q %q", kind, code, hdr.Get("Content-Type"), body)
		}
	}

	// Only locks can be deleted; deleting a missing lock is fine.
	c.want(200, "DELETE", "locks/"+names["locks"], nil)
	c.want(404, "GET", "locks/"+names["locks"], nil)
	c.want(200, "DELETE", "locks/"+names["locks"], nil)
	for _, kind := range []string{"keys", "snapshots", "index", "data"} {
		c.want(403, "DELETE", kind+"/"+names[kind], nil)
		c.want(200, "HEAD", kind+"/"+names[kind], nil)
		c.want(403, "DELETE", kind+"/"+hashName([]byte("absent")), nil)
	}
	c.want(403, "DELETE", "config", nil)
	c.want(200, "HEAD", "config", nil)

	// Methods outside the protocol.
	c.want(405, "PUT", "config", strings.NewReader("x"))
	c.want(405, "POST", "data/", strings.NewReader("x"))
	c.want(405, "DELETE", "locks/", nil)
	c.want(405, "GET", "", nil)

	st := e.h.Stats()[id]
	if st.Writes != 6 || st.Deletes != 2 || st.Lists != 10 || st.Creates != 2 || st.BytesWritten < 5*10000 || st.BytesRead < 5*10000 {
		t.Fatalf("stats = %+v", st)
	}
}

// TestConcurrentUploadsOfOneName: of several simultaneous uploads of the
// same file one is stored; the others, carrying the same verified bytes,
// succeed without writing, and nothing is damaged or left behind.
func TestConcurrentUploadsOfOneName(t *testing.T) {
	e := newTestEnv(t, Options{})
	id, secret := e.endpoint()
	c := e.client(id, secret, id)
	c.want(200, "POST", "?create=true", nil)
	content := []byte(strings.Repeat("pack", 200_000))
	name := hashName(content)
	codes := make([]int, 8)
	var wg sync.WaitGroup
	for i := range codes {
		wg.Go(func() {
			req, _ := http.NewRequest("POST", c.base+"data/"+name, strings.NewReader(string(content)))
			req.SetBasicAuth(id, secret)
			if resp, err := e.srv.Client().Do(req); err != nil {
				t.Errorf("upload %d: %v", i, err) // Fatal is for the test's own goroutine
			} else {
				codes[i] = resp.StatusCode
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	slices.Sort(codes)
	if codes[0] != 200 || codes[7] != 200 {
		t.Fatalf("codes = %v, want 200 for every upload of the same bytes", codes)
	}
	if got := c.want(200, "GET", "data/"+name, nil); got != string(content) {
		t.Fatal("stored file differs")
	}
	if l := leftovers(t, e.dir); len(l) != 0 {
		t.Fatalf("temp files left: %v", l)
	}
}
