package graphtest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

var testTenant = Tenant{AzureTenantID: "tid", ClientID: "cid", ClientSecret: "secret"}

// client is a bare net/http client of the fake.
type client struct {
	t     *testing.T
	s     *Server
	token string
}

func newFake(t *testing.T, opt Options) (*Server, *client) {
	t.Helper()
	s := New(testTenant, opt)
	t.Cleanup(s.Close)
	c := &client{t: t, s: s}
	c.token = c.fetchToken(http.StatusOK)["access_token"].(string)
	return s, c
}

func (c *client) fetchToken(want int) map[string]any {
	c.t.Helper()
	return c.tokenFor(testTenant, want)
}

func (c *client) tokenFor(t Tenant, want int) map[string]any {
	c.t.Helper()
	form := url.Values{"client_id": {t.ClientID}, "client_secret": {t.ClientSecret},
		"grant_type": {"client_credentials"}, "scope": {"https://graph.microsoft.com/.default"}}
	resp, err := http.PostForm(c.s.LoginURL()+"/"+t.AzureTenantID+"/oauth2/v2.0/token", form)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode != want {
		c.t.Fatalf("token: status %d, want %d: %v", resp.StatusCode, want, out)
	}
	return out
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) json(t *testing.T) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatalf("not JSON (%d): %s", r.status, r.body)
	}
	return out
}

func (r reply) code(t *testing.T) string {
	t.Helper()
	e, _ := r.json(t)["error"].(map[string]any)
	if e == nil {
		return ""
	}
	return e["code"].(string)
}

// do sends a request; u is absolute or relative to GraphURL.
func (c *client) do(method, u string, header map[string]string, body []byte) reply {
	c.t.Helper()
	if !strings.HasPrefix(u, "http") {
		u = c.s.GraphURL() + u
	}
	req, err := http.NewRequest(method, u, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range header {
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

func (c *client) get(u string) reply { return c.do(http.MethodGet, u, nil, nil) }

func (c *client) mustGet(u string, header map[string]string) map[string]any {
	c.t.Helper()
	r := c.do(http.MethodGet, u, header, nil)
	if r.status != http.StatusOK {
		c.t.Fatalf("GET %s: %d %s", u, r.status, r.body)
	}
	return r.json(c.t)
}

func values(m map[string]any) []map[string]any {
	var out []map[string]any
	for _, v := range m["value"].([]any) {
		out = append(out, v.(map[string]any))
	}
	return out
}

func TestTokenErrors(t *testing.T) {
	s, c := newFake(t, Options{})
	tests := []struct {
		name   string
		tenant Tenant
		status int
		err    string
		code   float64
	}{
		{"wrong tenant", Tenant{AzureTenantID: "other", ClientID: "cid", ClientSecret: "secret"}, 400, "invalid_request", 90002},
		{"unknown client", Tenant{AzureTenantID: "tid", ClientID: "x", ClientSecret: "secret"}, 400, "unauthorized_client", 700016},
		{"bad secret", Tenant{AzureTenantID: "tid", ClientID: "cid", ClientSecret: "nope"}, 401, "invalid_client", 7000215},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := c.tokenFor(tt.tenant, tt.status)
			if out["error"] != tt.err || out["error_codes"].([]any)[0].(float64) != tt.code {
				t.Fatalf("got %v", out)
			}
			if !strings.HasPrefix(out["error_description"].(string), "AADSTS") || out["trace_id"] == nil || out["correlation_id"] == nil {
				t.Fatalf("shape: %v", out)
			}
		})
	}
	s.mu.Lock()
	s.tenant.SecretExpired = true
	s.mu.Unlock()
	if out := c.fetchToken(401); out["error_codes"].([]any)[0].(float64) != 7000222 {
		t.Fatalf("expired: %v", out)
	}
	ok := New(testTenant, Options{})
	defer ok.Close()
	out := (&client{t: t, s: ok}).fetchToken(200)
	if out["token_type"] != "Bearer" || out["expires_in"].(float64) != 3599 {
		t.Fatalf("success: %v", out)
	}
	// Graph refuses a missing or unknown bearer.
	c.token = ""
	if r := c.get("/users"); r.status != 401 || r.code(t) != "InvalidAuthenticationToken" || r.header.Get("request-id") == "" {
		t.Fatalf("no token: %d %s", r.status, r.body)
	}
	c.token = "bogus"
	if r := c.get("/users"); r.status != 401 || r.code(t) != "InvalidAuthenticationToken" {
		t.Fatalf("bad token: %d %s", r.status, r.body)
	}
}

func TestUsersPagingAndConsent(t *testing.T) {
	s, c := newFake(t, Options{})
	sku := s.Sku("ENTERPRISEPREMIUM")
	for i := 0; i < 250; i++ {
		s.AddUser(User{UserPrincipalName: "u" + string(rune('a'+i%26)) + "@x.test", Licenses: []string{sku}})
	}
	n, pages := 0, 0
	next := "/users?$select=id,displayName,assignedLicenses"
	for next != "" {
		p := c.mustGet(next, nil)
		vs := values(p)
		if pages == 0 && len(vs) != 100 {
			t.Fatalf("default page size: %d", len(vs))
		}
		if _, ok := vs[0]["userPrincipalName"]; ok {
			t.Fatal("$select ignored")
		}
		n += len(vs)
		pages++
		next, _ = p["@odata.nextLink"].(string)
		if next != "" && !strings.Contains(next, "$skiptoken=") {
			t.Fatalf("nextLink %s", next)
		}
	}
	if n != 250 || pages != 3 {
		t.Fatalf("got %d users in %d pages", n, pages)
	}
	if r := c.get("/users?$top=1000"); r.status != 400 || !strings.Contains(string(r.body), "Invalid page size") {
		t.Fatalf("$top=1000: %d %s", r.status, r.body)
	}
	if v := values(c.mustGet("/subscribedSkus", nil)); len(v) != 1 || v[0]["skuPartNumber"] != "ENTERPRISEPREMIUM" {
		t.Fatalf("skus %v", v)
	}
	room := s.AddUser(User{UserPrincipalName: "room@x.test", Purpose: "room"})
	if p := c.mustGet("/users/"+room+"/mailboxSettings", nil); p["userPurpose"] != "room" {
		t.Fatalf("purpose %v", p)
	}
	nomb := s.AddUser(User{UserPrincipalName: "nomb@x.test", NoMailbox: true, NoDrive: true})
	if r := c.get("/users/" + nomb + "/mailFolders"); r.status != 404 || r.code(t) != "MailboxNotEnabledForRESTAPI" {
		t.Fatalf("no mailbox: %d %s", r.status, r.body)
	}
	if r := c.get("/users/" + nomb + "/drive"); r.status != 404 || !strings.Contains(string(r.body), "mysite not found") {
		t.Fatalf("no drive: %d %s", r.status, r.body)
	}

	// Roles live in the token: a token issued after SetRoles lacks them.
	s.SetRoles("Mail.ReadWrite")
	old := c.token
	c.token = c.fetchToken(200)["access_token"].(string)
	for _, tt := range []struct{ url, code string }{
		{"/users", "Authorization_RequestDenied"},
		{"/subscribedSkus", "Authorization_RequestDenied"},
		{"/users/" + room + "/mailboxSettings", "ErrorAccessDenied"},
		{"/users/" + room + "/drive", "accessDenied"},
	} {
		if r := c.get(tt.url); r.status != 403 || r.code(t) != tt.code {
			t.Errorf("%s: %d %s", tt.url, r.status, r.body)
		}
	}
	s.SetRoles("User.Read.All")
	c.token = c.fetchToken(200)["access_token"].(string)
	if r := c.get("/users/" + room + "/mailFolders"); r.status != 403 || r.code(t) != "ErrorAccessDenied" ||
		!strings.Contains(string(r.body), "Access is denied. Check credentials and try again.") {
		t.Errorf("mail denied: %d %s", r.status, r.body)
	}
	c.token = old
	if r := c.get("/users"); r.status != 200 {
		t.Errorf("old token keeps its roles: %d", r.status)
	}
}

func mimeMsg(subject, id string) []byte {
	return []byte("From: A <a@x.test>\r\nTo: b@x.test\r\nSubject: " + subject + "\r\nMessage-ID: <" + id +
		">\r\nDate: Mon, 02 Jan 2006 15:04:05 +0000\r\n\r\nbody " + subject + "\r\n")
}

// runDelta pages a message delta to its end and returns the entries and
// the deltaLink.
func (c *client) runDelta(u string, pageSize string) ([]map[string]any, string) {
	c.t.Helper()
	var all []map[string]any
	h := map[string]string{}
	if pageSize != "" {
		h["Prefer"] = "odata.maxpagesize=" + pageSize
	}
	for {
		p := c.mustGet(u, h)
		all = append(all, values(p)...)
		if n, ok := p["@odata.nextLink"].(string); ok {
			if !strings.Contains(n, "$skiptoken=") {
				c.t.Fatalf("nextLink %s", n)
			}
			u = n
			continue
		}
		d := p["@odata.deltaLink"].(string)
		if !strings.Contains(d, "$deltatoken=") || !strings.HasPrefix(d, c.s.GraphURL()) {
			c.t.Fatalf("deltaLink %s", d)
		}
		return all, d
	}
}

func TestMailFoldersAndDelta(t *testing.T) {
	s, c := newFake(t, Options{})
	uid := s.AddUser(User{UserPrincipalName: "a@x.test"})
	inbox := s.WellKnownFolder(uid, "inbox")
	sub := s.AddFolder(uid, inbox, "Sub")
	fs := values(c.mustGet("/users/"+uid+"/mailFolders", nil))
	names := map[string]bool{}
	search := 0
	for _, f := range fs {
		names[f["displayName"].(string)] = true
		if f["@odata.type"] == "#microsoft.graph.mailSearchFolder" {
			search++
		}
	}
	if !names["Inbox"] || !names["Drafts"] || names["Sub"] || search != 1 {
		t.Fatalf("folders %v", fs)
	}
	if cf := values(c.mustGet("/users/"+uid+"/mailFolders/inbox/childFolders", nil)); len(cf) != 1 || cf[0]["id"] != sub {
		t.Fatalf("childFolders %v", cf)
	}
	r := c.do("POST", "/users/"+uid+"/mailFolders/inbox/childFolders", nil, []byte(`{"displayName":"sub"}`))
	if r.status != 409 || r.code(t) != "ErrorFolderExists" {
		t.Fatalf("duplicate folder: %d %s", r.status, r.body)
	}

	var ids []string
	for i := 0; i < 25; i++ {
		ids = append(ids, s.AddMessage(uid, inbox, mimeMsg("m"+string(rune('a'+i)), "id"+string(rune('a'+i))+"@x"), time.Now()))
	}
	all, dl := c.runDelta("/users/"+uid+"/mailFolders/"+inbox+"/messages/delta?$select=subject,isRead", "")
	if len(all) != 25 {
		t.Fatalf("first round %d", len(all))
	}
	if _, ok := all[0]["from"]; ok || all[0]["subject"] == nil {
		t.Fatalf("$select %v", all[0])
	}
	// $value is the exact MIME.
	v := c.get("/users/" + uid + "/messages/" + ids[3] + "/$value")
	if v.status != 200 || !bytes.Equal(v.body, mimeMsg("md", "idd@x")) || !strings.HasPrefix(v.header.Get("Content-Type"), "text/plain") {
		t.Fatalf("$value %d %q", v.status, v.body)
	}

	s.DeleteMessage(uid, ids[0])
	s.MoveMessage(uid, ids[1], sub)
	added := s.AddMessage(uid, inbox, mimeMsg("new", "new@x"), time.Now())
	inc, dl2 := c.runDelta(dl, "")
	got := map[string]string{}
	for _, e := range inc {
		id := e["id"].(string)
		if rm, ok := e["@removed"].(map[string]any); ok {
			got[id] = rm["reason"].(string)
			if e["subject"] != nil {
				t.Fatalf("removed entry has fields: %v", e)
			}
		} else {
			got[id] = "added"
			if e["subject"] == nil {
				t.Fatalf("$select not baked into the token: %v", e)
			}
		}
	}
	if len(got) != 3 || got[ids[0]] != "deleted" || got[ids[1]] != "deleted" || got[added] != "added" {
		t.Fatalf("incremental %v", got)
	}
	subAll, _ := c.runDelta("/users/"+uid+"/mailFolders/"+sub+"/messages/delta", "")
	if len(subAll) != 1 || subAll[0]["id"] != ids[1] {
		t.Fatalf("moved-in %v", subAll)
	}
	// Nothing changed: an empty round.
	if again, _ := c.runDelta(dl2, ""); len(again) != 0 {
		t.Fatalf("quiet round %v", again)
	}
	// Replays repeat entries already sent.
	s.ReplayDelta(uid, true)
	rep, _ := c.runDelta("/users/"+uid+"/mailFolders/"+inbox+"/messages/delta", "5")
	seen := map[string]int{}
	for _, e := range rep {
		seen[e["id"].(string)]++
	}
	if len(rep) <= len(seen) || len(seen) != 24 {
		t.Fatalf("replay: %d entries, %d distinct", len(rep), len(seen))
	}
	s.ReplayDelta(uid, false)

	// Invalidated tokens: syncStateNotFound.
	s.InvalidateDeltaTokens(uid)
	if r := c.get(dl2); r.status != 400 || r.code(t) != "syncStateNotFound" {
		t.Fatalf("invalidated: %d %s", r.status, r.body)
	}
	// Over quota: delta refused, list works.
	s.SetOverQuota(uid, true)
	if r := c.get("/users/" + uid + "/mailFolders/inbox/messages/delta"); r.status != 403 || r.code(t) != "ErrorQuotaExceeded" {
		t.Fatalf("over quota: %d %s", r.status, r.body)
	}
	if l := values(c.mustGet("/users/"+uid+"/mailFolders/inbox/messages?$top=1000", nil)); len(l) != 24 {
		t.Fatalf("list %d", len(l))
	}
}

func TestDriveDeltaAndDownload(t *testing.T) {
	s, c := newFake(t, Options{})
	uid := s.AddUser(User{UserPrincipalName: "a@x.test"})
	d := c.mustGet("/users/"+uid+"/drive", nil)
	did := d["id"].(string)
	s.AddFile(uid, "a/b.txt", []byte("hello"))
	s.AddFile(uid, "c.bin", bytes.Repeat([]byte{7}, 1000))
	var items []map[string]any
	u := "/drives/" + did + "/root/delta"
	var dl string
	for {
		p := c.mustGet(u, map[string]string{"Prefer": "odata.maxpagesize=2"})
		items = append(items, values(p)...)
		if n, ok := p["@odata.nextLink"].(string); ok {
			u = n
			continue
		}
		dl = p["@odata.deltaLink"].(string)
		break
	}
	if len(items) != 4 || items[0]["root"] == nil {
		t.Fatalf("delta %v", items)
	}
	files := s.Files(uid)
	for _, it := range items {
		ref := it["parentReference"].(map[string]any)
		if _, ok := ref["path"]; ok {
			t.Fatal("path in delta")
		}
		if it["name"] == "b.txt" {
			hashes := it["file"].(map[string]any)["hashes"].(map[string]any)
			if hashes["quickXorHash"] != files[0].QuickXorHash {
				t.Fatalf("hash %v vs %v", hashes, files[0])
			}
			dlURL := it["@microsoft.graph.downloadUrl"].(string)
			r := c.do("GET", dlURL, map[string]string{"Authorization": ""}, nil)
			if r.status != 200 || string(r.body) != "hello" {
				t.Fatalf("download %d %s", r.status, r.body)
			}
			r = c.do("GET", dlURL, map[string]string{"Authorization": "", "Range": "bytes=1-2"}, nil)
			if r.status != 206 || string(r.body) != "el" {
				t.Fatalf("range %d %s", r.status, r.body)
			}
			cr := c.do("GET", "/drives/"+did+"/items/"+it["id"].(string)+"/content", nil, nil)
			_ = cr
		}
	}
	s.DeleteFile(uid, "a/b.txt")
	p := c.mustGet(dl, nil)
	vs := values(p)
	var deleted map[string]any
	for _, v := range vs {
		if v["deleted"] != nil {
			deleted = v
		}
	}
	if deleted == nil || deleted["name"] != nil || deleted["id"] != files[0].ID {
		t.Fatalf("deleted %v", vs)
	}
	byPath := c.mustGet("/drives/"+did+"/root:/c.bin", nil)
	if byPath["size"].(float64) != 1000 {
		t.Fatalf("by path %v", byPath)
	}
	s.InvalidateDeltaTokens(uid)
	r := c.get(p["@odata.deltaLink"].(string))
	if r.status != 410 || r.code(t) != "resyncRequired" || !strings.HasSuffix(r.header.Get("Location"), "/drives/"+did+"/root/delta") {
		t.Fatalf("410: %d %s %v", r.status, r.body, r.header)
	}
	s.CorruptHash(uid, "c.bin")
	if h := c.mustGet("/drives/"+did+"/root:/c.bin:", nil)["file"].(map[string]any)["hashes"].(map[string]any)["quickXorHash"]; h == s.Files(uid)[0].QuickXorHash {
		t.Fatal("CorruptHash ignored")
	}
}

// Vectors from rclone's tests of its QuickXorHash, which it checked
// against OneDrive (github.com/rclone/rclone,
// backend/onedrive/quickxorhash/quickxorhash_test.go): input and digest
// base64-encoded.
var quickXorVectors = []struct{ in, out string }{
	{``, "AAAAAAAAAAAAAAAAAAAAAAAAAAA="},
	{`Sg==`, "SgAAAAAAAAAAAAAAAQAAAAAAAAA="},
	{`tbQ=`, "taAFAAAAAAAAAAAAAgAAAAAAAAA="},
	{`0pZP`, "0rDEEwAAAAAAAAAAAwAAAAAAAAA="},
	{`/aNzzCFPS/A=`, "/RjFHJgRgicsAR4ACAAAAAAAAAA="},
	{`2fuxhBJXtpWFe8dOfdGeHw==`, "O9tHLAghgSvYohKFyMMxnNCHaHg="},
	{`T6LYJIfDh81JrAK309H2JMJTXis=`, "zBTHrspn3mEcohlJdIUAbjGNaNg="},
	{`NbYXsp5/K6mR+NmHwExjvWeWDJFnXTKWVlzYHoesp2E=`, "wjuAuWDiq04qDt1R8hHWDDcwVoQ="},
	{`Mb7EGva2rEE5fENDL85P+BsapHEEjv2/siVhKjvAQe02feExVOQSkfmuYzU/kTF1MaKjPmKF/w+cbvwfdWL8aQ==`, "n1anP5NfvD4XDYWIeRPW3ZkPv1Y="},
	{`w0LGhqU1WXFbdavqDE4kAjEzWLGGzmTNikzqnsiXHx2KRReKVTxkv27u3UcEz9+lbMvYl4xFf2Z4aE1xRBBNd1Ke5C0zToSaYw5o4B/7X99nKK2/XaUX1byLow2aju2XJl2OpKpJg+tSJ2fmjIJTkfuYUz574dFX6/VXxSxwGH/xQEAKS5TCsBK3CwnuG1p5SAsQq3gGVozDWyjEBcWDMdy8/AIFrj/y03Lfc/RNRCQTAfZbnf2QwV7sluw4fH3XJr07UoD0YqN+7XZzidtrwqMY26fpLZnyZjnBEt1FAZWO7RnKG5asg8xRk9YaDdedXdQSJAOy6bWEWlABj+tVAigBxavaluUH8LOj+yfCFldJjNLdi90fVHkUD/m4Mr5OtmupNMXPwuG3EQlqWUVpQoYpUYKLsk7a5Mvg6UFkiH596y5IbJEVCI1Kb3D1`, "e3+wo77iKcILiZegnzyUNcjCdoQ="},
}

func TestQuickXorHash(t *testing.T) {
	for _, v := range quickXorVectors {
		in, err := base64.StdEncoding.DecodeString(v.in)
		if err != nil {
			t.Fatal(err)
		}
		for _, block := range []int{1, 7, 161, len(in) + 1} {
			h := newQuickXorHash()
			for i := 0; i < len(in); i += block {
				h.Write(in[i:min(i+block, len(in))])
			}
			if got := base64.StdEncoding.EncodeToString(h.Sum(nil)); got != v.out {
				t.Errorf("%d bytes in blocks of %d: %s, want %s", len(in), block, got, v.out)
			}
		}
	}
}

func TestDownloadURLExpires(t *testing.T) {
	s, c := newFake(t, Options{DownloadURLLifetime: 50 * time.Millisecond})
	uid := s.AddUser(User{UserPrincipalName: "a@x.test"})
	id := s.AddFile(uid, "x.txt", []byte("x"))
	did := c.mustGet("/users/"+uid+"/drive", nil)["id"].(string)
	dl := c.mustGet("/drives/"+did+"/items/"+id, nil)["@microsoft.graph.downloadUrl"].(string)
	time.Sleep(100 * time.Millisecond)
	if r := c.do("GET", dl, map[string]string{"Authorization": ""}, nil); r.status != 401 {
		t.Fatalf("expired URL: %d", r.status)
	}
	dl = c.mustGet("/drives/"+did+"/items/"+id, nil)["@microsoft.graph.downloadUrl"].(string)
	if r := c.do("GET", dl, map[string]string{"Authorization": ""}, nil); r.status != 200 || string(r.body) != "x" {
		t.Fatalf("fresh URL: %d", r.status)
	}
	// Folders page by Prefer: odata.maxpagesize as well.
	p := c.mustGet("/users/"+uid+"/mailFolders", map[string]string{"Prefer": "odata.maxpagesize=2"})
	if len(values(p)) != 2 || p["@odata.nextLink"] == nil {
		t.Fatalf("folder paging %v", p)
	}
}
