package graph

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestPagesFollowsNextLinkAndReturnsDeltaLink(t *testing.T) {
	var srvURL string
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("$skiptoken") {
		case "":
			writeJSON(w, 200, map[string]any{"value": []map[string]string{{"id": "1"}, {"id": "2"}},
				"@odata.nextLink": srvURL + "/v1.0/users/u/mailFolders/f/messages/delta?$skiptoken=p2"})
		case "p2":
			writeJSON(w, 200, map[string]any{"value": []map[string]any{{"id": "1", "@removed": map[string]string{"reason": "deleted"}}},
				"@odata.deltaLink": srvURL + "/v1.0/users/u/mailFolders/f/messages/delta?$deltatoken=d1"})
		}
	})
	srvURL = f.srv.URL
	var got []string
	delta, err := f.client(t, nil).MessagesDelta(context.Background(), "u", "f", "", func(ms []Message) error {
		for _, m := range ms {
			got = append(got, fmt.Sprintf("%s:%v", m.ID, m.Removed != nil))
		}
		return nil
	})
	if err != nil || delta != srvURL+"/v1.0/users/u/mailFolders/f/messages/delta?$deltatoken=d1" ||
		strings.Join(got, ",") != "1:false,2:false,1:true" {
		t.Fatalf("delta %q, entries %v, err %v", delta, got, err)
	}
}

func TestDeltaResetIsErrorWithLocation(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "https://graph/restart")
		graphError(w, 410, "resyncRequired")
	})
	_, err := f.client(t, nil).DriveDelta(context.Background(), "d", "", func([]DriveItem) error { return nil })
	var ge *Error
	if !asError(err, &ge) || ge.Status != 410 || ge.Location != "https://graph/restart" || !IsCode(err, "resyncRequired") {
		t.Fatalf("err = %v", err)
	}
}

func asError(err error, target **Error) bool {
	e, ok := err.(*Error)
	*target = e
	return ok
}

// TestBatchOrderAndInnerRetry answers in reverse order and throttles
// request "2" once: the answers come back in request order, and "2" is
// resent alone only after its Retry-After.
func TestBatchOrderAndInnerRetry(t *testing.T) {
	var mu sync.Mutex
	var batches [][]string
	var times []time.Time
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		var in struct{ Requests []BatchRequest }
		if r.URL.Path != "/$batch" || json.NewDecoder(r.Body).Decode(&in) != nil {
			http.Error(w, "bad batch", 400)
			return
		}
		mu.Lock()
		first := len(batches) == 0
		var ids []string
		for _, q := range in.Requests {
			ids = append(ids, q.ID)
		}
		batches, times = append(batches, ids), append(times, time.Now())
		mu.Unlock()
		var out []map[string]any
		for i := len(in.Requests) - 1; i >= 0; i-- {
			q := in.Requests[i]
			switch {
			case q.ID == "2" && first:
				out = append(out, map[string]any{"id": q.ID, "status": 429, "headers": map[string]string{"retry-after": "1"},
					"body": map[string]any{"error": map[string]string{"code": "ApplicationThrottled"}}})
			case q.ID == "3":
				out = append(out, map[string]any{"id": q.ID, "status": 200, "headers": map[string]string{"Content-Type": "text/plain"},
					"body": "aGVsbG8="}) // base64 of a non-JSON body
			default:
				out = append(out, map[string]any{"id": q.ID, "status": 200, "body": map[string]string{"url": q.URL}})
			}
		}
		writeJSON(w, 200, map[string]any{"responses": out})
	})
	var reqs []BatchRequest
	for i := range 4 {
		reqs = append(reqs, BatchRequest{ID: strconv.Itoa(i), Method: "GET", URL: fmt.Sprintf("/users/u%d", i)})
	}
	got, err := f.client(t, nil).Batch(context.Background(), ScopeDirectory, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range got {
		if a.ID != strconv.Itoa(i) || a.Err() != nil {
			t.Errorf("answer %d = %+v", i, a)
		}
	}
	if string(got[3].Body) != "hello" {
		t.Errorf("non-JSON body = %q", got[3].Body)
	}
	if len(batches) != 2 || strings.Join(batches[1], ",") != "2" {
		t.Fatalf("batches sent: %v", batches)
	}
	if gap := times[1].Sub(times[0]); gap < time.Second {
		t.Fatalf("throttled request resent after %s, before its Retry-After", gap)
	}
}

func TestUserPurposes(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		var in struct{ Requests []BatchRequest }
		_ = json.NewDecoder(r.Body).Decode(&in)
		if len(in.Requests) > MaxBatch {
			http.Error(w, "too many", 400)
			return
		}
		var out []map[string]any
		for _, q := range in.Requests {
			user := strings.Split(q.URL, "/")[2]
			if user == "u7" {
				out = append(out, map[string]any{"id": q.ID, "status": 404,
					"body": map[string]any{"error": map[string]string{"code": "MailboxNotEnabledForRESTAPI"}}})
				continue
			}
			out = append(out, map[string]any{"id": q.ID, "status": 200, "body": map[string]string{"userPurpose": "shared-" + user}})
		}
		writeJSON(w, 200, map[string]any{"responses": out})
	})
	var ids []string
	for i := range 45 {
		ids = append(ids, fmt.Sprintf("u%d", i))
	}
	got, err := f.client(t, nil).UserPurposes(context.Background(), ids)
	if err != nil || len(got) != 45 || got["u7"] != "" || got["u44"] != "shared-u44" {
		t.Fatalf("UserPurposes = %v, %v", got, err)
	}
}

// TestUploadFileChunks checks the session protocol: every chunk but the
// last a multiple of 320 KiB, contiguous ranges with the same total, and no
// Authorization header on the upload URL.
func TestUploadFileChunks(t *testing.T) {
	size := int64(2*UploadChunk + 1000)
	content := bytes.Repeat([]byte("backstop"), int(size)/8+1)[:size]
	var received bytes.Buffer
	var ranges []string
	var srvURL string
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == "POST" && r.URL.Path == "/drives/d1/items/p1:/a b.txt:/createUploadSession":
			writeJSON(w, 200, map[string]string{"uploadUrl": srvURL + "/upload/s1"})
		default:
			http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, 400)
		}
	})
	srvURL = f.srv.URL
	f.srv.Config.Handler.(*http.ServeMux).HandleFunc("PUT /upload/s1", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			http.Error(w, "Authorization sent to the upload URL", 401)
			return
		}
		body, _ := io.ReadAll(r.Body)
		cr := r.Header.Get("Content-Range")
		ranges = append(ranges, cr)
		var a, b, total int64
		fmt.Sscanf(cr, "bytes %d-%d/%d", &a, &b, &total)
		if a != int64(received.Len()) || b-a+1 != int64(len(body)) || total != size {
			http.Error(w, "bad range "+cr, 416)
			return
		}
		if b+1 < total && len(body)%(320<<10) != 0 {
			http.Error(w, "chunk not a multiple of 320 KiB", 400)
			return
		}
		received.Write(body)
		if b+1 < total {
			writeJSON(w, 202, map[string]any{"nextExpectedRanges": []string{fmt.Sprintf("%d-", b+1)}})
			return
		}
		writeJSON(w, 201, map[string]any{"id": "new", "name": "a b.txt", "size": total})
	})
	it, err := f.client(t, nil).UploadFile(context.Background(), "d1", "p1", "a b.txt", size, bytes.NewReader(content))
	if err != nil || it.ID != "new" || it.Size != size {
		t.Fatalf("UploadFile = %+v, %v (ranges %v)", it, err, ranges)
	}
	if !bytes.Equal(received.Bytes(), content) || len(ranges) != 3 {
		t.Fatalf("received %d bytes in %v", received.Len(), ranges)
	}
}

func TestUploadEmptyFile(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "PUT" || r.URL.Path != "/drives/d1/items/p1:/empty.txt:/content" ||
			r.URL.Query().Get("@microsoft.graph.conflictBehavior") != "fail" || r.ContentLength > 0 {
			http.Error(w, "unexpected "+r.Method+" "+r.URL.String(), 400)
			return
		}
		writeJSON(w, 201, map[string]any{"id": "e", "name": "empty.txt"})
	})
	it, err := f.client(t, nil).UploadFile(context.Background(), "d1", "p1", "empty.txt", 0, bytes.NewReader(nil))
	if err != nil || it.ID != "e" {
		t.Fatalf("UploadFile = %+v, %v", it, err)
	}
}

func TestEnsureFoldersAnswerExistingOnConflict(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.Method + " " + r.URL.Path {
		case "POST /users/u1/mailFolders/msgfolderroot/childFolders":
			graphError(w, 400, "ErrorFolderExists")
		case "GET /users/u1/mailFolders/msgfolderroot/childFolders":
			writeJSON(w, 200, map[string]any{"value": []map[string]string{{"id": "f1", "displayName": "Other"}, {"id": "f2", "displayName": "Restored"}}})
		case "POST /drives/d1/items/root/children":
			graphError(w, 409, "nameAlreadyExists")
		case "GET /drives/d1/items/root/children":
			writeJSON(w, 200, map[string]any{"value": []map[string]any{{"id": "i1", "name": "restored", "file": map[string]any{}}, {"id": "i2", "name": "Restored", "folder": map[string]int{"childCount": 0}}}})
		default:
			http.Error(w, "unexpected", 400)
		}
	})
	c := f.client(t, nil)
	mf, err := c.EnsureMailFolder(context.Background(), "u1", "msgfolderroot", "Restored")
	if err != nil || mf.ID != "f2" {
		t.Fatalf("EnsureMailFolder = %+v, %v", mf, err)
	}
	di, err := c.EnsureDriveFolder(context.Background(), "d1", "root", "Restored")
	if err != nil || di.ID != "i2" {
		t.Fatalf("EnsureDriveFolder = %+v, %v", di, err)
	}
}

func TestMailFoldersWalksTreeSkippingSearchFolders(t *testing.T) {
	tree := map[string][]map[string]string{
		"":      {{"id": "inbox", "displayName": "Inbox"}, {"id": "s", "displayName": "Search", "@odata.type": "#microsoft.graph.mailSearchFolder"}},
		"inbox": {{"id": "sub", "displayName": "Sub"}},
	}
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("includeHiddenFolders") != "true" {
			http.Error(w, "hidden folders left out", 400)
			return
		}
		parent := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/users/u1/mailFolders"), "/childFolders")
		writeJSON(w, 200, map[string]any{"value": tree[strings.TrimPrefix(parent, "/")]})
	})
	var got []string
	err := f.client(t, nil).MailFolders(context.Background(), "u1", func(f MailFolder, path []string) error {
		got = append(got, strings.Join(path, "/"))
		return nil
	})
	if err != nil || strings.Join(got, ",") != "Inbox,Inbox/Sub" {
		t.Fatalf("folders %v, %v", got, err)
	}
}

func TestAddLargeAttachmentUsesUploadSession(t *testing.T) {
	var srvURL string
	var chunks []int
	var session map[string]map[string]any
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/users/u1/messages/m1/attachments/createUploadSession" {
			http.Error(w, "unexpected", 400)
			return
		}
		_ = json.NewDecoder(r.Body).Decode(&session)
		writeJSON(w, 201, map[string]string{"uploadUrl": srvURL + "/att/1"})
	})
	srvURL = f.srv.URL
	f.srv.Config.Handler.(*http.ServeMux).HandleFunc("PUT /att/1", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("Authorization") != "" || len(body) >= 4<<20 {
			http.Error(w, "bad chunk", 400)
			return
		}
		chunks = append(chunks, len(body))
		w.WriteHeader(200)
	})
	a := FileAttachment{Name: "big.bin", ContentType: "application/pdf", ContentBytes: make([]byte, 7<<20)}
	if err := f.client(t, nil).AddAttachment(context.Background(), "u1", "m1", a); err != nil {
		t.Fatal(err)
	}
	item := session["AttachmentItem"]
	if item["attachmentType"] != "file" || item["name"] != "big.bin" || item["size"] != float64(7<<20) || len(chunks) != 3 {
		t.Fatalf("session %v, chunks %v", session, chunks)
	}
}
