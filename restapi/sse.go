package restapi

import (
	"bytes"
	"context"
	"net/http"
	"reflect"
	"strconv"
	"time"

	"backstop/app"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humahttprouter"
)

// The job progress stream (CONTRACT §6): server-sent events fed from the
// runner's in-process fan-out, so an open stream costs one goroutine (its
// connection's) and no database reads after the first lookup.

// defaultKeepAlive is the interval of ": keep-alive" comments, which keep
// proxies and load balancers from closing an idle stream.
const defaultKeepAlive = 15 * time.Second

type jobEventsInput struct {
	ID          string `path:"id" maxLength:"64"`
	LastEventID string `header:"Last-Event-ID" maxLength:"32" doc:"Id of the last event received; the stream resumes after it, or starts with a fresh snapshot when it cannot."`
}

func (s *Server) jobEvents(ctx context.Context, in *jobEventsInput) (*huma.StreamResponse, error) {
	j, err := s.visibleJob(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	last, err := strconv.ParseInt(in.LastEventID, 10, 64)
	if err != nil || last < 0 {
		last = 0 // not one of ours: start over with a snapshot
	}
	stream, ended := s.JobFeed.Follow(j, last)
	if ended {
		// The client already has the end. 204 tells an EventSource to stop
		// reconnecting.
		return &huma.StreamResponse{Body: func(hctx huma.Context) { hctx.SetStatus(http.StatusNoContent) }}, nil
	}
	return &huma.StreamResponse{Body: func(hctx huma.Context) {
		defer stream.Close()
		r, w, _ := humahttprouter.Unwrap(hctx)
		s.streamJobEvents(r, w, stream)
	}}, nil
}

// streamJobEvents writes the stream until the end event, the client leaves,
// or the server shuts down. Every write is flushed at once (through the
// auditing writer, whose first write commits the audit row).
func (s *Server) streamJobEvents(r *http.Request, w http.ResponseWriter, stream app.JobStream) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // a stream outlives any server write timeout
	if rc.Flush() != nil {
		return
	}
	interval := s.opts.SSEKeepAlive
	if interval <= 0 {
		interval = defaultKeepAlive
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var buf bytes.Buffer
	for {
		buf.Reset()
		done := false
		select {
		case <-r.Context().Done():
			return
		case <-s.streamsClosing():
			return
		case <-tick.C:
			buf.WriteString(": keep-alive\n\n")
		case <-stream.Ready():
			var evs []app.JobStreamEvent
			evs, done = stream.Take()
			for _, e := range evs {
				buf.WriteString("id: ")
				buf.WriteString(strconv.FormatInt(e.ID, 10))
				buf.WriteString("\nevent: ")
				buf.WriteString(e.Type)
				buf.WriteString("\ndata: ")
				buf.Write(e.Data) // compact JSON: one line
				buf.WriteString("\n\n")
			}
		}
		if buf.Len() > 0 {
			if _, err := w.Write(buf.Bytes()); err != nil {
				return
			}
			if rc.Flush() != nil {
				return
			}
		}
		if done {
			return
		}
	}
}

// streamsClosing is closed by CloseStreams.
func (s *Server) streamsClosing() <-chan struct{} {
	s.streamsOnce.Do(func() { s.streamsDone = make(chan struct{}) })
	return s.streamsDone
}

// CloseStreams ends every open event stream; http.Server.Shutdown does not
// interrupt active requests, so serve registers this with RegisterOnShutdown.
// Clients reconnect with Last-Event-ID to the next process.
func (s *Server) CloseStreams() {
	s.streamsClosing()
	s.streamsCloseOnce.Do(func() { close(s.streamsDone) })
}

const jobEventsDescription = "Scope: `jobs:read`. Server-sent events (`text/event-stream`) of one job's progress.\n\n" +
	"Events, each with an increasing numeric `id:`:\n\n" +
	"- `snapshot`: the job object; always first (also after a resume that could not be served from history).\n" +
	"- `progress`: `{state, progress}` whenever the progress changes.\n" +
	"- `state`: `{state}` whenever the state changes.\n" +
	"- `end`: the final job object; the server closes the stream after it.\n\n" +
	"A finished job's stream sends `snapshot` and `end` at once. Reconnect with `Last-Event-ID` to get what was " +
	"missed, without duplicates, or a fresh `snapshot` when the history no longer reaches back; after the `end` a " +
	"reconnect is answered 204 (an EventSource stops). A `: keep-alive` comment is sent every 15 seconds. " +
	"Responses carry `Cache-Control: no-cache` and `X-Accel-Buffering: no` so proxies do not buffer."

// registerJobEvents registers the stream and documents its events.
func (s *Server) registerJobEvents() {
	const path = "/api/v1/jobs/{id}/events"
	get(s, "jobs.events", path, app.ScopeJobsRead, "Live progress of a job (server-sent events)", s.jobEvents)
	item := s.api.OpenAPI().Paths[path]
	if item == nil || item.Get == nil {
		return
	}
	o := item.Get
	o.Description = jobEventsDescription
	reg := s.api.OpenAPI().Components.Schemas
	jobRef := reg.Schema(reflect.TypeFor[app.Job](), true, "Job")
	progress := reg.Schema(reflect.TypeFor[struct {
		State    string          `json:"state"`
		Progress app.JobProgress `json:"progress"`
	}](), true, "JobProgressEvent")
	state := reg.Schema(reflect.TypeFor[struct {
		State string `json:"state"`
	}](), true, "JobStateEvent")
	event := func(name string, data *huma.Schema) *huma.Schema {
		return &huma.Schema{Type: "object", Title: "Event " + name, Required: []string{"id", "event", "data"},
			Properties: map[string]*huma.Schema{
				"id":    {Type: "integer", Description: "Increasing event id; send it back as Last-Event-ID."},
				"event": {Type: "string", Enum: []any{name}},
				"data":  data,
			}}
	}
	if o.Responses == nil {
		o.Responses = map[string]*huma.Response{}
	}
	o.Responses["200"] = &huma.Response{
		Description: "The event stream.",
		Content: map[string]*huma.MediaType{"text/event-stream": {Schema: &huma.Schema{Type: "array",
			Items: &huma.Schema{OneOf: []*huma.Schema{event(app.StreamSnapshot, jobRef), event(app.StreamProgress, progress),
				event(app.StreamState, state), event(app.StreamEnd, jobRef)}}}}},
	}
	o.Responses["204"] = &huma.Response{Description: "The client already received the end event (Last-Event-ID): nothing more will come."}
}
