package restapi

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"backstop/app"
)

type sseEvent struct {
	id    int64
	event string
	data  string
}

// sseClient reads a text/event-stream response line by line.
type sseClient struct {
	res      *http.Response
	rd       *bufio.Reader
	comments []string
	cancel   context.CancelFunc
}

func (h *jobHarness) stream(t testing.TB, jobID, key, lastID string) *sseClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	req, _ := http.NewRequestWithContext(ctx, "GET", h.ts.URL+"/api/v1/jobs/"+jobID+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	res, err := h.ts.Client().Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	c := &sseClient{res: res, rd: bufio.NewReader(res.Body), cancel: cancel}
	t.Cleanup(c.close)
	return c
}

func (c *sseClient) close() { c.cancel(); c.res.Body.Close() }

// next returns the next event; ok is false at the end of the stream.
// Comments are collected on the way.
func (c *sseClient) next() (e sseEvent, ok bool, err error) {
	seen := false
	for {
		line, err := c.rd.ReadString('\n')
		if err == io.EOF && line == "" && !seen {
			return e, false, nil
		} else if err != nil {
			return e, false, err
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if seen {
				return e, true, nil
			}
		case strings.HasPrefix(line, ":"):
			c.comments = append(c.comments, line)
		default:
			seen = true
			k, v, _ := strings.Cut(line, ": ")
			switch k {
			case "id":
				e.id, _ = strconv.ParseInt(v, 10, 64)
			case "event":
				e.event = v
			case "data":
				e.data += v
			}
		}
	}
}

func (c *sseClient) must(t testing.TB, wantEvent string) sseEvent {
	t.Helper()
	e, ok, err := c.next()
	if err != nil || !ok {
		t.Fatalf("want %s event, got end of stream (%v)", wantEvent, err)
	}
	if e.event != wantEvent {
		t.Fatalf("got %s event (%s), want %s", e.event, e.data, wantEvent)
	}
	return e
}

func (c *sseClient) mustEnd(t testing.TB) {
	t.Helper()
	if e, ok, err := c.next(); ok || err != nil {
		t.Fatalf("stream went on after end: %+v %v", e, err)
	}
}

func (h *jobHarness) startRunningJob(t *testing.T, key string) string {
	t.Helper()
	ep := h.endpoint(h.tenantA.ID, "web1", app.ProfileServer)
	r := h.do("POST", "/api/v1/backups", `{"targetType":"endpoint","targetId":"`+ep.ID+`"}`, bearer(key)...)
	check(t, r, 202, "")
	id := r.json()["id"].(string)
	deadline := time.Now().Add(5 * time.Second)
	for {
		j, _ := h.db.Job(context.Background(), id)
		if j.State == app.JobRunning {
			return id
		}
		if time.Now().After(deadline) {
			t.Fatal("job did not start")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestJobEventsStreamOrderResumeAndEnd(t *testing.T) {
	h := newJobHarness(t, time.Hour)
	key, _ := h.key(h.tenantA.ID, app.ScopeJobsRead, app.ScopeRestoreWrite)
	id := h.startRunningJob(t, key)

	a := h.stream(t, id, key, "")
	for k, want := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"} {
		if got := a.res.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	snap := a.must(t, "snapshot")
	var j app.Job
	if err := json.Unmarshal([]byte(snap.data), &j); err != nil || j.ID != id || j.State != app.JobRunning {
		t.Fatalf("snapshot %s", snap.data)
	}
	h.steps <- app.JobProgress{Phase: "transferring", Percent: 10, ItemsDone: 1, ItemsTotal: 10}
	p1 := a.must(t, "progress")
	h.steps <- app.JobProgress{Phase: "transferring", Percent: 20, ItemsDone: 2, ItemsTotal: 10}
	p2 := a.must(t, "progress")
	if !(snap.id < p1.id && p1.id < p2.id) {
		t.Fatalf("ids not increasing: %d %d %d", snap.id, p1.id, p2.id)
	}
	if p2.data != `{"state":"running","progress":{"phase":"transferring","percent":20,"itemsDone":2,"itemsTotal":10,"bytesDone":0,"bytesTotal":0}}` {
		t.Fatalf("progress data %s", p2.data)
	}

	// A client that saw p1 reconnects: it gets p2 next, no snapshot, no duplicate.
	b := h.stream(t, id, key, strconv.FormatInt(p1.id, 10))
	if got := b.must(t, "progress"); got.id != p2.id || got.data != p2.data {
		t.Fatalf("resumed with %+v, want %+v", got, p2)
	}

	close(h.steps) // the run ends successfully
	var endID int64
	for _, c := range []*sseClient{a, b} {
		st := c.must(t, "state")
		if st.data != `{"state":"succeeded"}` || st.id <= p2.id {
			t.Fatalf("state event %+v", st)
		}
		end := c.must(t, "end")
		json.Unmarshal([]byte(end.data), &j)
		if j.State != app.JobSucceeded || j.FinishedAt == nil || j.Progress.Percent != 100 || end.id <= st.id {
			t.Fatalf("end event %+v", end)
		}
		endID = end.id
		c.mustEnd(t)
	}

	// After the end: a reconnect with the end's id is 204; a new client gets snapshot and end at once.
	req, _ := http.NewRequest("GET", h.ts.URL+"/api/v1/jobs/"+id+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Last-Event-ID", strconv.FormatInt(endID, 10))
	res, err := h.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("reconnect after end: %d, want 204", res.StatusCode)
	}
	c := h.stream(t, id, key, "")
	s2, e2 := c.must(t, "snapshot"), c.must(t, "end")
	if s2.id >= e2.id {
		t.Fatalf("snapshot id %d not before end id %d", s2.id, e2.id)
	}
	c.mustEnd(t)

	rows := h.auditRows(1)
	if rows[0].Action != "jobs.events" || rows[0].Status != 200 || rows[0].Target != "/api/v1/jobs/"+id+"/events" {
		t.Errorf("audit row %+v", rows[0])
	}
}

func TestJobEventsKeepAliveAndShutdown(t *testing.T) {
	h := newJobHarness(t, 20*time.Millisecond)
	key, _ := h.key(h.tenantA.ID, app.ScopeJobsRead)
	j := h.storeJob(h.tenantA.ID, app.QueueEndpointBackup, app.JobQueued) // waits for an agent that never comes
	c := h.stream(t, j.ID, key, "")
	c.must(t, "snapshot")
	done := make(chan error, 1)
	go func() {
		_, ok, err := c.next() // blocks until the stream ends; collects comments meanwhile
		if ok {
			err = io.ErrUnexpectedEOF
		}
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	h.srv.CloseStreams()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("stream ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("CloseStreams did not end the stream")
	}
	if len(c.comments) < 2 || c.comments[0] != ": keep-alive" {
		t.Fatalf("comments %q, want several keep-alives", c.comments)
	}
}

// TestJobEvents500Streams measures what 500 concurrent streams of one job
// cost (client and server side together, both in this process) and checks
// that each gets every update up to the end.
func TestJobEvents500Streams(t *testing.T) {
	if testing.Short() {
		t.Skip("500 connections")
	}
	const n = 500
	h := newJobHarness(t, time.Hour)
	key, _ := h.key(h.tenantA.ID, app.ScopeJobsRead, app.ScopeRestoreWrite)
	id := h.startRunningJob(t, key)
	h.ts.Client().Transport.(*http.Transport).MaxIdleConnsPerHost = n

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	goBefore := runtime.NumGoroutine()
	auditBefore := h.auditCount()

	clients := make([]*sseClient, n)
	for i := range clients {
		clients[i] = h.stream(t, id, key, "")
	}
	for _, c := range clients {
		c.must(t, "snapshot")
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	goAfter := runtime.NumGoroutine()
	if subs := h.runner.Broker().Subscribers(id); subs != n {
		t.Fatalf("%d subscribers, want %d", subs, n)
	}
	perStream := float64(after.HeapInuse-before.HeapInuse) / n
	t.Logf("%d streams: heap in use +%.1f MiB (%.1f KiB per stream, client and server side), goroutines +%d (%.1f per stream)",
		n, float64(after.HeapInuse-before.HeapInuse)/(1<<20), perStream/1024, goAfter-goBefore, float64(goAfter-goBefore)/n)
	if perStream > 128<<10 {
		t.Errorf("%.0f bytes per stream, want at most 128 KiB", perStream)
	}
	if got := h.auditCount() - auditBefore; got != n {
		t.Errorf("%d audit rows for %d streams", got, n)
	}

	const steps = 20
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last int64
			progress := 0
			for {
				e, ok, err := c.next()
				if err != nil || !ok {
					errs <- "stream ended before the end event"
					return
				}
				if e.id <= last {
					errs <- "ids not increasing"
					return
				}
				last = e.id
				switch e.event {
				case "progress":
					progress++
				case "end":
					if progress != steps {
						errs <- "missed progress events: " + strconv.Itoa(progress)
					}
					return
				}
			}
		}()
	}
	for i := 1; i <= steps; i++ {
		h.steps <- app.JobProgress{Phase: "transferring", Percent: i * 100 / steps}
	}
	close(h.steps)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	t.Logf("%d progress events and the end delivered to %d streams in %v", steps, n, time.Since(start))
}

func TestOpenAPIDocumentsJobRoutesAndStream(t *testing.T) {
	h := newJobHarness(t, 0)
	r := h.do("GET", "/api/v1/openapi.json", "")
	check(t, r, 200, "", `"/api/v1/jobs/{id}/events"`, `"text/event-stream"`, `"Last-Event-ID"`, `"Event snapshot"`,
		`"Event end"`, `"/api/v1/failure-codes"`, `"/api/v1/backups"`, `"202"`, `keep-alive`)
	var doc struct {
		Paths map[string]map[string]struct {
			Responses map[string]any `json:"responses"`
		} `json:"paths"`
	}
	json.Unmarshal(r.body, &doc)
	for _, p := range []string{"/api/v1/backups", "/api/v1/restores", "/api/v1/verifies"} {
		if _, ok := doc.Paths[p]["post"].Responses["202"]; !ok {
			t.Errorf("%s does not document 202: %v", p, doc.Paths[p]["post"].Responses)
		}
	}
}
