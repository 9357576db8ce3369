package graphtest

import (
	"encoding/json"
	"math/rand/v2"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// maxBatch is json-batching.md's limit of 20 requests per batch.
const maxBatch = 20

// batchParallel is how many requests of one batch run at once (Outlook
// runs up to 4 in parallel; throttling-limits.md "Outlook service limits
// for JSON batching").
const batchParallel = 4

type batchIn struct {
	Requests []struct {
		ID        string            `json:"id"`
		Method    string            `json:"method"`
		URL       string            `json:"url"`
		Headers   map[string]string `json:"headers"`
		Body      json.RawMessage   `json:"body"`
		DependsOn []string          `json:"dependsOn"`
	} `json:"requests"`
}

// batch is POST /$batch (json-batching.md): at most 20 requests with
// relative URLs; each runs through the same handlers and is throttled on
// its own (an inner 429 carries its own Retry-After); a request whose
// dependency failed is 424; answers come in any order and the outer status
// is 200.
func (s *Server) batch(c *call) answer {
	if c.inBatch {
		return c.errAnswer(http.StatusBadRequest, "BadRequest", "Nested batch requests are not supported.")
	}
	var in batchIn
	if err := json.Unmarshal(c.body, &in); err != nil {
		return c.errAnswer(http.StatusBadRequest, "BadRequest", "Invalid batch payload format.")
	}
	if len(in.Requests) == 0 {
		return c.errAnswer(http.StatusBadRequest, "BadRequest", "Invalid batch payload format.")
	}
	if len(in.Requests) > maxBatch {
		return c.errAnswer(http.StatusBadRequest, "BadRequest", "Number of included requests exceeds the maximum of 20.")
	}
	index := map[string]int{}
	for i, r := range in.Requests {
		if r.ID == "" || r.Method == "" || r.URL == "" {
			return c.errAnswer(http.StatusBadRequest, "BadRequest", "Each request needs an id, a method and a url.")
		}
		if _, dup := index[r.ID]; dup {
			return c.errAnswer(http.StatusBadRequest, "BadRequest", "Batch request contains duplicate Id '"+r.ID+"'.")
		}
		index[r.ID] = i
	}
	for _, r := range in.Requests {
		for _, dep := range r.DependsOn {
			if j, ok := index[dep]; !ok || j >= index[r.ID] {
				return c.errAnswer(http.StatusBadRequest, "BadRequest", "Request '"+r.ID+"' depends on '"+dep+"', which is not an earlier request of the batch.")
			}
		}
	}
	results := make([]map[string]any, len(in.Requests))
	statuses := make([]int, len(in.Requests))
	done := make([]chan struct{}, len(in.Requests))
	for i := range done {
		done[i] = make(chan struct{})
	}
	sem := make(chan struct{}, batchParallel)
	var wg sync.WaitGroup
	for i := range in.Requests {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer close(done[i])
			r := in.Requests[i]
			failed := false
			for _, dep := range r.DependsOn {
				j := index[dep]
				<-done[j]
				if statuses[j] < 200 || statuses[j] > 299 {
					failed = true
				}
			}
			if failed {
				inner := &call{reqID: newID()}
				a := inner.errAnswer(http.StatusFailedDependency, "FailedDependency", "The request depends on a request that failed.")
				statuses[i] = a.status
				results[i] = batchResponse(r.ID, a)
				return
			}
			sem <- struct{}{}
			a := s.innerCall(c, r.Method, r.URL, r.Headers, r.Body)
			<-sem
			statuses[i] = a.status
			results[i] = batchResponse(r.ID, a)
		}(i)
	}
	wg.Wait()
	// "Responses may appear in a different order than the requests."
	rand.Shuffle(len(results), func(i, j int) { results[i], results[j] = results[j], results[i] })
	return jsonAnswer(http.StatusOK, map[string]any{"responses": results})
}

// innerCall runs one request of a batch through serveGraph.
func (s *Server) innerCall(outer *call, method, rawURL string, headers map[string]string, body json.RawMessage) answer {
	inner := &call{method: strings.ToUpper(method), header: http.Header{}, version: outer.version,
		reqID: newID(), token: outer.token, inBatch: true}
	u, err := url.Parse(rawURL)
	if err != nil || u.IsAbs() || u.Host != "" {
		return inner.errAnswer(http.StatusBadRequest, "BadRequest", "Invalid request URL '"+rawURL+"': batch URLs are relative to the version root.")
	}
	inner.path = "/" + strings.TrimPrefix(u.Path, "/")
	inner.query = u.Query()
	for k, v := range headers {
		inner.header.Set(k, v)
	}
	if len(body) > 0 {
		ct, _, _ := mime.ParseMediaType(inner.header.Get("Content-Type"))
		var str string
		if ct != "application/json" && json.Unmarshal(body, &str) == nil {
			// Non-JSON bodies travel as base64 strings (json-batching.md);
			// text/plain MIME is already base64 text, taken as is.
			inner.body = []byte(str)
		} else {
			inner.body = body
		}
		if ct == "" {
			return inner.errAnswer(http.StatusBadRequest, "BadRequest", "Content-Type header is required for a request with a body.")
		}
	}
	return s.serveGraph(inner)
}

func batchResponse(id string, a answer) map[string]any {
	if a.status == 0 {
		a.status = http.StatusOK
	}
	headers := map[string]string{}
	for k := range a.header {
		headers[k] = a.header.Get(k)
	}
	out := map[string]any{"id": id, "status": a.status, "headers": headers}
	if len(a.body) > 0 {
		ct, _, _ := mime.ParseMediaType(a.header.Get("Content-Type"))
		if ct == "application/json" && json.Valid(a.body) {
			out["body"] = json.RawMessage(a.body)
		} else {
			// json-batching.md: non-JSON bodies are base64 encoded.
			out["body"] = a.body
		}
	}
	return out
}
