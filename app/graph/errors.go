package graph

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Error is a Graph error answer: the HTTP status, error.code and the inner
// codes (walked through every nested innerError), and what the headers say.
type Error struct {
	Status     int
	Code       string
	Inner      []string
	Message    string // for logs only: never branch on it
	RequestID  string
	RetryAfter time.Duration // from Retry-After, when present
	Location   string        // from Location (410 delta resets)
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "graph: %d", e.Status)
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	}
	if len(e.Inner) > 0 {
		b.WriteString(" (" + strings.Join(e.Inner, ", ") + ")")
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " [retry after %s]", e.RetryAfter)
	}
	if e.RequestID != "" {
		b.WriteString(" [request-id " + e.RequestID + "]")
	}
	return b.String()
}

// HasCode reports whether code is the main or an inner code (ASCII case
// folded).
func (e *Error) HasCode(code string) bool {
	if strings.EqualFold(e.Code, code) {
		return true
	}
	for _, c := range e.Inner {
		if strings.EqualFold(c, code) {
			return true
		}
	}
	return false
}

// IsCode reports whether err is (wraps) an *Error with one of codes.
func IsCode(err error, codes ...string) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	for _, c := range codes {
		if e.HasCode(c) {
			return true
		}
	}
	return false
}

// StatusOf is the HTTP status of a wrapped *Error, or 0.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// maxInnerDepth bounds the innerError walk against hostile bodies.
const maxInnerDepth = 16

// parseError reads a Graph error answer: {"error":{"code","message",
// "innerError":{"code","request-id","innerError":{…}}}}. A body that is
// not JSON leaves Code empty and keeps a short Message.
func parseError(status int, h http.Header, body []byte, now time.Time) *Error {
	e := &Error{
		Status:     status,
		RequestID:  h.Get("request-id"),
		RetryAfter: parseRetryAfter(h.Get("Retry-After"), now),
		Location:   h.Get("Location"),
	}
	var top struct {
		Error map[string]json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &top) != nil || top.Error == nil {
		e.Message = firstLine(string(body))
		return e
	}
	e.Code = stringField(top.Error, "code")
	e.Message = stringField(top.Error, "message")
	obj := top.Error
	for range maxInnerDepth {
		obj = innerObject(obj)
		if obj == nil {
			break
		}
		if c := stringField(obj, "code"); c != "" {
			e.Inner = append(e.Inner, c)
		}
		if e.RequestID == "" {
			e.RequestID = stringField(obj, "request-id")
		}
	}
	return e
}

// innerObject is obj's innerError (Graph spells it innerError and
// innererror).
func innerObject(obj map[string]json.RawMessage) map[string]json.RawMessage {
	for k, v := range obj {
		if strings.EqualFold(k, "innerError") {
			var inner map[string]json.RawMessage
			if json.Unmarshal(v, &inner) == nil {
				return inner
			}
		}
	}
	return nil
}

func stringField(obj map[string]json.RawMessage, key string) string {
	var s string
	if v, ok := obj[key]; ok && json.Unmarshal(v, &s) == nil {
		return s
	}
	return ""
}

// parseRetryAfter reads integer seconds or an HTTP-date; 0 when absent or
// unreadable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs <= 0 || math.IsNaN(secs) {
			return 0
		}
		return time.Duration(min(secs, 86400*7) * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		// HTTP-dates have whole seconds: round up so we are never early.
		if d := t.Sub(now) + time.Second; d > 0 {
			return d.Truncate(time.Second)
		}
	}
	return 0
}
