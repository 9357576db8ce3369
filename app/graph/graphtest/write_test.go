package graphtest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestCreateMessageDraftSemantics(t *testing.T) {
	s, c := newFake(t, Options{})
	uid := s.AddUser(User{UserPrincipalName: "a@x.test"})
	inbox := s.WellKnownFolder(uid, "inbox")
	jsonCT := map[string]string{"Content-Type": "application/json"}

	// MIME post: always a draft, in Drafts.
	raw := mimeMsg("imported", "imp@x")
	r := c.do("POST", "/users/"+uid+"/messages", map[string]string{"Content-Type": "text/plain"}, []byte(base64.StdEncoding.EncodeToString(raw)))
	if r.status != 201 || r.json(t)["isDraft"] != true {
		t.Fatalf("MIME post: %d %s", r.status, r.body)
	}
	r = c.do("POST", "/users/"+uid+"/mailFolders/"+inbox+"/messages", map[string]string{"Content-Type": "text/plain"}, []byte(base64.StdEncoding.EncodeToString(raw)))
	if r.status != 400 {
		t.Fatalf("MIME post on a folder: %d %s", r.status, r.body)
	}
	r = c.do("POST", "/users/"+uid+"/messages", map[string]string{"Content-Type": "text/plain"}, []byte("not base64!!"))
	if r.status != 400 || r.code(t) != "ErrorMimeContentInvalidBase64String" {
		t.Fatalf("bad base64: %d %s", r.status, r.body)
	}

	// JSON with PidTagMessageFlags=1 (read, not unsent): not a draft, times set.
	sent := "2020-01-02T03:04:05Z"
	recv := "2020-01-02T03:05:06Z"
	body := fmt.Sprintf(`{"subject":"restored","body":{"contentType":"text","content":"hi"},
		"from":{"emailAddress":{"name":"A","address":"a@x.test"}},"toRecipients":[{"emailAddress":{"address":"b@x.test"}}],
		"internetMessageId":"<orig@x>","internetMessageHeaders":[{"name":"X-Backstop","value":"1"}],
		"singleValueExtendedProperties":[{"id":"Integer 0x0E07","value":"1"},{"id":"SystemTime 0x0039","value":"%s"},{"id":"SystemTime 0x0E06","value":"%s"}],
		"attachments":[{"@odata.type":"#microsoft.graph.fileAttachment","name":"a.txt","contentBytes":"aGVsbG8="}]}`, sent, recv)
	r = c.do("POST", "/users/"+uid+"/mailFolders/"+inbox+"/messages", jsonCT, []byte(body))
	if r.status != 201 {
		t.Fatalf("JSON post: %d %s", r.status, r.body)
	}
	j := r.json(t)
	if j["isDraft"] != false || j["sentDateTime"] != sent || j["receivedDateTime"] != recv || j["internetMessageId"] != "<orig@x>" {
		t.Fatalf("created %v", j)
	}
	// Without 0x0E07, or with the unsent bit, it is a draft.
	r = c.do("POST", "/users/"+uid+"/mailFolders/"+inbox+"/messages", jsonCT, []byte(`{"subject":"d","singleValueExtendedProperties":[{"id":"Integer 0x0E07","value":"9"}]}`))
	if r.status != 201 || r.json(t)["isDraft"] != true {
		t.Fatalf("unsent bit: %d %s", r.status, r.body)
	}
	r = c.do("POST", "/users/"+uid+"/mailFolders/"+inbox+"/messages", jsonCT, []byte(`{"subject":"bad","internetMessageHeaders":[{"name":"Received","value":"x"}]}`))
	if r.status != 400 || r.code(t) != "InvalidInternetMessageHeader" {
		t.Fatalf("non-X header: %d %s", r.status, r.body)
	}
	big := base64.StdEncoding.EncodeToString(make([]byte, 3<<20+1))
	r = c.do("POST", "/users/"+uid+"/mailFolders/"+inbox+"/messages", jsonCT, []byte(`{"subject":"big","attachments":[{"@odata.type":"#microsoft.graph.fileAttachment","name":"b","contentBytes":"`+big+`"}]}`))
	if r.status != 413 {
		t.Fatalf("oversized request: %d", r.status)
	}
	var restored StoredMessage
	for _, m := range s.Messages(uid) {
		if m.Subject == "restored" {
			restored = m
		}
	}
	if restored.IsDraft || restored.FolderPath != "Inbox" || !restored.SentDateTime.Equal(time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)) ||
		len(restored.Attachments) != 1 || restored.AttachmentSizes[0] != 5 ||
		!bytes.Contains(restored.MIME, []byte("Message-ID: <orig@x>")) || !bytes.Contains(restored.MIME, []byte("X-Backstop: 1")) {
		t.Fatalf("stored %+v\n%s", restored, restored.MIME)
	}

	// A large attachment through an upload session.
	size := 5 << 20
	r = c.do("POST", "/users/"+uid+"/messages/"+restored.ID+"/attachments/createUploadSession", jsonCT,
		[]byte(`{"AttachmentItem":{"attachmentType":"file","name":"big.bin","size":`+strconv.Itoa(size)+`}}`))
	if r.status != 201 {
		t.Fatalf("session: %d %s", r.status, r.body)
	}
	up := r.json(t)["uploadUrl"].(string)
	if !strings.Contains(up, "authtoken=") {
		t.Fatalf("uploadUrl %s", up)
	}
	data := bytes.Repeat([]byte{1}, size)
	cr := func(a, b int) map[string]string {
		return map[string]string{"Authorization": "", "Content-Range": fmt.Sprintf("bytes %d-%d/%d", a, b-1, size)}
	}
	if r := c.do("PUT", up, map[string]string{"Content-Range": fmt.Sprintf("bytes 0-9/%d", size)}, data[:10]); r.status != 401 {
		t.Fatalf("PUT with Authorization: %d", r.status)
	}
	if r := c.do("PUT", up, cr(0, 4<<20), data[:4<<20]); r.status != 200 || r.json(t)["nextExpectedRanges"].([]any)[0] != "4194304-" {
		t.Fatalf("chunk 1: %d %s", r.status, r.body)
	}
	r = c.do("PUT", up, cr(4<<20, size), data[4<<20:])
	if r.status != 201 || !strings.Contains(r.header.Get("Location"), "/Attachments('") {
		t.Fatalf("last chunk: %d %v", r.status, r.header)
	}
	for _, m := range s.Messages(uid) {
		if m.ID == restored.ID && (len(m.Attachments) != 2 || m.AttachmentSizes[1] != int64(size)) {
			t.Fatalf("attachments %v %v", m.Attachments, m.AttachmentSizes)
		}
	}
}

func TestDriveUploadSession(t *testing.T) {
	s, c := newFake(t, Options{})
	uid := s.AddUser(User{UserPrincipalName: "a@x.test"})
	did := c.mustGet("/users/"+uid+"/drive", nil)["id"].(string)
	jsonCT := map[string]string{"Content-Type": "application/json"}
	r := c.do("POST", "/drives/"+did+"/items/root/children", jsonCT, []byte(`{"name":"R","folder":{},"@microsoft.graph.conflictBehavior":"fail"}`))
	if r.status != 201 {
		t.Fatalf("folder: %d %s", r.status, r.body)
	}
	folder := r.json(t)["id"].(string)
	if r := c.do("POST", "/drives/"+did+"/items/root/children", jsonCT, []byte(`{"name":"R","folder":{},"@microsoft.graph.conflictBehavior":"fail"}`)); r.status != 409 || r.code(t) != "nameAlreadyExists" {
		t.Fatalf("duplicate folder: %d %s", r.status, r.body)
	}
	session := func() string {
		r := c.do("POST", "/drives/"+did+"/items/"+folder+":/f.bin:/createUploadSession", jsonCT, []byte(`{"item":{"@microsoft.graph.conflictBehavior":"fail"}}`))
		if r.status != 200 {
			t.Fatalf("session: %d %s", r.status, r.body)
		}
		return r.json(t)["uploadUrl"].(string)
	}
	size := 3*327680 + 100
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i * 7)
	}
	put := func(up string, a, b int, auth bool) reply {
		h := map[string]string{"Authorization": "", "Content-Range": fmt.Sprintf("bytes %d-%d/%d", a, b-1, size)}
		if auth {
			delete(h, "Authorization")
		}
		return c.do("PUT", up, h, data[a:b])
	}
	up := session()
	if r := put(up, 0, 327680, true); r.status != 401 {
		t.Fatalf("Authorization on PUT: %d", r.status)
	}
	if r := put(up, 0, 300000, false); r.status != 400 {
		t.Fatalf("not a multiple of 320 KiB: %d %s", r.status, r.body)
	}
	if r := put(up, 0, 2*327680, false); r.status != 202 || r.json(t)["nextExpectedRanges"].([]any)[0] != "655360-" {
		t.Fatalf("chunk 1: %d %s", r.status, r.body)
	}
	if r := put(up, 327680, 2*327680, false); r.status != 416 {
		t.Fatalf("overlap: %d %s", r.status, r.body)
	}
	if r := put(up, 3*327680, size, false); r.status != 416 {
		t.Fatalf("out of order: %d %s", r.status, r.body)
	}
	if r := put(up, 2*327680, size, false); r.status != 201 || r.json(t)["name"] != "f.bin" {
		t.Fatalf("last: %d %s", r.status, r.body)
	}
	files := s.Files(uid)
	if len(files) != 1 || files[0].Path != "R/f.bin" || !bytes.Equal(files[0].Content, data) {
		t.Fatalf("files %+v", files)
	}
	// The name exists now: conflictBehavior fail refuses a new session.
	r = c.do("POST", "/drives/"+did+"/items/"+folder+":/f.bin:/createUploadSession", jsonCT, []byte(`{"item":{"@microsoft.graph.conflictBehavior":"fail"}}`))
	if r.status != 409 || r.code(t) != "nameAlreadyExists" {
		t.Fatalf("existing name: %d %s", r.status, r.body)
	}
	byPath := c.mustGet("/drives/"+did+"/root:/R/f.bin", nil)
	h := newQuickXorHash()
	h.Write(data)
	if byPath["file"].(map[string]any)["hashes"].(map[string]any)["quickXorHash"] != base64.StdEncoding.EncodeToString(h.Sum(nil)) {
		t.Fatal("hash of uploaded file")
	}
	r = c.do("GET", "/drives/"+did+"/items/"+byPath["id"].(string)+"/content", nil, nil)
	if r.status != 200 || !bytes.Equal(r.body, data) {
		t.Fatalf("content via 302: %d", r.status)
	}
}

func TestMailboxConcurrencyAndRetryAfter(t *testing.T) {
	s, c := newFake(t, Options{Latency: 100 * time.Millisecond})
	uid := s.AddUser(User{UserPrincipalName: "a@x.test"})
	var wg sync.WaitGroup
	codes := make([]int, 6)
	retry := make([]string, 6)
	for i := range codes {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r := c.get("/users/" + uid + "/mailFolders")
			codes[i] = r.status
			retry[i] = r.header.Get("Retry-After")
		}(i)
	}
	wg.Wait()
	ok, throttled := 0, 0
	for i, code := range codes {
		switch code {
		case 200:
			ok++
		case 429:
			throttled++
			if retry[i] == "" {
				t.Fatal("429 without Retry-After")
			}
		}
	}
	st := s.Stats()
	if ok != 4 || throttled != 2 || st.Violations < 2 || st.MaxInFlight != 4 {
		t.Fatalf("ok %d throttled %d stats %+v", ok, throttled, st)
	}

	// Forced throttling, then a request before Retry-After passed is a
	// violation; one after it is served.
	uid2 := s.AddUser(User{UserPrincipalName: "b@x.test"})
	s.Throttle(uid2, 1, time.Second)
	before := s.Stats()
	r := c.get("/users/" + uid2 + "/mailboxSettings")
	if r.status != 429 || r.header.Get("Retry-After") != "1" || r.code(t) != "ApplicationThrottled" {
		t.Fatalf("forced: %d %v", r.status, r.header)
	}
	if r := c.get("/users/" + uid2 + "/mailboxSettings"); r.status != 429 {
		t.Fatalf("early retry: %d", r.status)
	}
	if st := s.Stats(); st.Violations != before.Violations+1 || st.Throttled != before.Throttled+2 {
		t.Fatalf("stats %+v after %+v", st, before)
	}
	time.Sleep(1100 * time.Millisecond)
	if r := c.get("/users/" + uid2 + "/mailboxSettings"); r.status != 200 {
		t.Fatalf("after Retry-After: %d", r.status)
	}
}

func TestSharePointBudget(t *testing.T) {
	s, c := newFake(t, Options{SharePointRUPerMinute: 5})
	uid := s.AddUser(User{UserPrincipalName: "a@x.test"})
	did := c.mustGet("/users/"+uid+"/drive", nil)["id"].(string) // 1 RU
	for i := 0; i < 2; i++ {
		if r := c.get("/drives/" + did + "/root/delta"); r.status != 200 { // 2 RU each
			t.Fatalf("delta %d: %d", i, r.status)
		}
	}
	r := c.get("/drives/" + did + "/root/delta")
	if r.status != 429 || r.header.Get("Retry-After") == "" {
		t.Fatalf("over budget: %d", r.status)
	}
	v := s.Stats().Violations
	c.get("/drives/" + did)
	if s.Stats().Violations != v+1 {
		t.Fatal("request before Retry-After not counted")
	}
}

func TestBatch(t *testing.T) {
	s, c := newFake(t, Options{})
	var ids []string
	for i := 0; i < 5; i++ {
		ids = append(ids, s.AddUser(User{UserPrincipalName: fmt.Sprintf("u%d@x.test", i), Purpose: "shared"}))
	}
	nomb := s.AddUser(User{UserPrincipalName: "n@x.test", NoMailbox: true})
	m := s.AddMessage(ids[0], "inbox", mimeMsg("s", "s@x"), time.Now())
	type req struct {
		ID        string   `json:"id"`
		Method    string   `json:"method"`
		URL       string   `json:"url"`
		DependsOn []string `json:"dependsOn,omitempty"`
	}
	var reqs []req
	for i, id := range ids {
		reqs = append(reqs, req{ID: strconv.Itoa(i), Method: "GET", URL: "/users/" + id + "/mailboxSettings"})
	}
	reqs = append(reqs, req{ID: "nomb", Method: "GET", URL: "/users/" + nomb + "/mailboxSettings"})
	reqs = append(reqs, req{ID: "dep", Method: "GET", URL: "/users/" + ids[0], DependsOn: []string{"nomb"}})
	reqs = append(reqs, req{ID: "mime", Method: "GET", URL: "/users/" + ids[0] + "/messages/" + m + "/$value"})
	body, _ := json.Marshal(map[string]any{"requests": reqs})
	var orders []string
	for try := 0; try < 5; try++ {
		r := c.do("POST", "/$batch", map[string]string{"Content-Type": "application/json"}, body)
		if r.status != 200 {
			t.Fatalf("batch: %d %s", r.status, r.body)
		}
		var out struct {
			Responses []struct {
				ID      string            `json:"id"`
				Status  int               `json:"status"`
				Headers map[string]string `json:"headers"`
				Body    json.RawMessage   `json:"body"`
			} `json:"responses"`
		}
		if err := json.Unmarshal(r.body, &out); err != nil || len(out.Responses) != len(reqs) {
			t.Fatalf("responses: %v %s", err, r.body)
		}
		order := ""
		for _, x := range out.Responses {
			order += x.ID + ","
			switch x.ID {
			case "nomb":
				if x.Status != 404 {
					t.Fatalf("nomb %d", x.Status)
				}
			case "dep":
				if x.Status != 424 {
					t.Fatalf("dependsOn a failure: %d", x.Status)
				}
			case "mime":
				var b []byte
				if x.Status != 200 || json.Unmarshal(x.Body, &b) != nil || !bytes.Equal(b, mimeMsg("s", "s@x")) {
					t.Fatalf("non-JSON body not base64: %d %s", x.Status, x.Body)
				}
			default:
				if x.Status != 200 || !strings.Contains(string(x.Body), `"userPurpose":"shared"`) {
					t.Fatalf("inner %s: %d %s", x.ID, x.Status, x.Body)
				}
			}
		}
		orders = append(orders, order)
	}
	same := true
	for _, o := range orders[1:] {
		same = same && o == orders[0]
	}
	if same {
		t.Fatal("responses always in the same order")
	}
	// Inner requests are throttled on their own.
	s.Throttle(ids[1], 1, 2*time.Second)
	r := c.do("POST", "/$batch", map[string]string{"Content-Type": "application/json"}, body)
	if !strings.Contains(string(r.body), `"status":429`) || !strings.Contains(string(r.body), `"Retry-After":"2"`) {
		t.Fatalf("inner 429: %s", r.body)
	}
	var many []req
	for i := 0; i < 21; i++ {
		many = append(many, req{ID: strconv.Itoa(i), Method: "GET", URL: "/users"})
	}
	body, _ = json.Marshal(map[string]any{"requests": many})
	if r := c.do("POST", "/$batch", map[string]string{"Content-Type": "application/json"}, body); r.status != 400 {
		t.Fatalf("21 requests: %d", r.status)
	}
}

// BenchmarkMailboxDelta pages the first delta of a 1,000-message folder in
// pages of 500 and fetches every message's MIME.
func BenchmarkMailboxDelta(b *testing.B) {
	s := New(testTenant, Options{})
	defer s.Close()
	c := &client{t: &testing.T{}, s: s}
	c.token = c.fetchToken(200)["access_token"].(string)
	uid := s.AddUser(User{UserPrincipalName: "a@x.test"})
	for i := 0; i < 1000; i++ {
		s.AddMessage(uid, "inbox", mimeMsg(strconv.Itoa(i), strconv.Itoa(i)+"@x"), time.Now())
	}
	for i := 0; i < 10000; i++ {
		s.AddUser(User{UserPrincipalName: strconv.Itoa(i) + "@x.test"})
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		all, _ := c.runDelta("/users/"+uid+"/mailFolders/inbox/messages/delta?$select=id", "500")
		if len(all) != 1000 {
			b.Fatal(len(all))
		}
		next := "/users?$top=999"
		for next != "" {
			p := c.mustGet(next, nil)
			next, _ = p["@odata.nextLink"].(string)
		}
	}
}
