package restapi

import (
	"errors"
	"net/http"
	"strings"

	"backstop/app"

	"github.com/danielgtaylor/huma/v2"
)

// Problem is an RFC 9457 problem+json body with Backstop's stable code.
type Problem struct {
	Type          string         `json:"type" doc:"URI naming the problem type: urn:backstop:problem:<code>."`
	Title         string         `json:"title" doc:"Short summary of the problem type."`
	Status        int            `json:"status" doc:"HTTP status code."`
	Detail        string         `json:"detail" doc:"Explanation of this occurrence."`
	Code          string         `json:"code" doc:"Stable machine-readable code, e.g. unauthorized, insufficient_scope, not_found, validation_failed, rate_limited."`
	RequiredScope string         `json:"requiredScope,omitempty" doc:"The scope the key lacks (insufficient_scope only)."`
	Errors        []ProblemError `json:"errors,omitempty" doc:"Validation errors, one per field at fault."`

	headers http.Header
}

// ProblemError names one field at fault.
type ProblemError struct {
	Location string `json:"location" doc:"Where the error is, e.g. body.name or query.limit."`
	Message  string `json:"message"`
	Value    any    `json:"value,omitempty"`
}

func (p *Problem) Error() string             { return p.Detail }
func (p *Problem) GetStatus() int            { return p.Status }
func (p *Problem) ContentType(string) string { return "application/problem+json" }
func (p *Problem) GetHeaders() http.Header   { return p.headers }
func (p *Problem) withHeader(k, v string) *Problem {
	if p.headers == nil {
		p.headers = http.Header{}
	}
	p.headers.Set(k, v)
	return p
}

// statusByCode is the one table mapping app error codes to HTTP statuses.
var statusByCode = map[string]int{
	"bad_request":              http.StatusBadRequest,
	app.ETENANTREQUIRED:        http.StatusBadRequest,
	app.EUNAUTHORIZED:          http.StatusUnauthorized,
	app.EFORBIDDEN:             http.StatusForbidden,
	"forbidden":                http.StatusForbidden,
	"csrf_failed":              http.StatusForbidden,
	app.ENOTFOUND:              http.StatusNotFound,
	"method_not_allowed":       http.StatusMethodNotAllowed,
	app.ECONFLICT:              http.StatusConflict,
	app.EGONE:                  http.StatusGone,
	"too_large":                http.StatusRequestEntityTooLarge,
	"unsupported_media_type":   http.StatusUnsupportedMediaType,
	app.EINVALID:               http.StatusUnprocessableEntity,
	"webhook_target_refused":   http.StatusUnprocessableEntity,
	app.ESTORAGEUNUSABLE:       http.StatusUnprocessableEntity,
	app.ESOURCEAUTH:            http.StatusUnprocessableEntity,
	app.ESOURCETLS:             http.StatusUnprocessableEntity,
	app.ESOURCEUNREACHABLE:     http.StatusUnprocessableEntity,
	app.ESOURCECHECK:           http.StatusUnprocessableEntity,
	app.ERATELIMITED:           http.StatusTooManyRequests,
	app.EINTERNAL:              http.StatusInternalServerError,
	app.ENOTIMPLEMENTED:        http.StatusNotImplemented,
	"unavailable":              http.StatusServiceUnavailable,
	"request_header_too_large": http.StatusRequestHeaderFieldsTooLarge,
	"request_timeout":          http.StatusRequestTimeout,
}

// codeByStatus names the code for errors raised by huma itself.
var codeByStatus = map[int]string{
	http.StatusBadRequest:            "bad_request",
	http.StatusUnauthorized:          app.EUNAUTHORIZED,
	http.StatusForbidden:             "forbidden",
	http.StatusNotFound:              app.ENOTFOUND,
	http.StatusMethodNotAllowed:      "method_not_allowed",
	http.StatusConflict:              app.ECONFLICT,
	http.StatusRequestEntityTooLarge: "too_large",
	http.StatusUnsupportedMediaType:  "unsupported_media_type",
	http.StatusUnprocessableEntity:   app.EINVALID,
	http.StatusTooManyRequests:       app.ERATELIMITED,
	http.StatusNotImplemented:        app.ENOTIMPLEMENTED,
	http.StatusServiceUnavailable:    "unavailable",
	http.StatusRequestTimeout:        "request_timeout",
}

// newProblem builds a problem for code with a detail message.
func newProblem(code, detail string) *Problem {
	status, ok := statusByCode[code]
	if !ok {
		status = http.StatusInternalServerError
	}
	return &Problem{
		Type: "urn:backstop:problem:" + code, Title: http.StatusText(status), Status: status, Detail: detail, Code: code,
	}
}

// humaError replaces huma.NewError so that huma's own errors (validation,
// malformed JSON, body too large) are problem+json with our codes.
func humaError(status int, msg string, errs ...error) huma.StatusError {
	if status == http.StatusInternalServerError && msg == "cannot read request body" {
		// A body cut short or with broken chunked framing is the client's
		// doing; the read error says nothing the client needs.
		return newProblem("bad_request", "The request body could not be read completely.")
	}
	code, ok := codeByStatus[status]
	if !ok {
		code = app.EINTERNAL
		status = http.StatusInternalServerError
		msg = "Internal error."
	}
	p := newProblem(code, msg)
	p.Status, p.Title = status, http.StatusText(status)
	if status == http.StatusInternalServerError {
		return p // the wrapped errors are internals; CONTRACT §2 allows none in the answer
	}
	for _, err := range errs {
		if err == nil {
			continue
		}
		var d huma.ErrorDetailer
		if errors.As(err, &d) {
			ed := d.ErrorDetail()
			loc, value := ed.Location, ed.Value
			// huma reports a missing required property at its parent
			// ("body"); CONTRACT §10 wants the field itself named, and the
			// parent's value echoed back says nothing about it.
			if name, ok := missingProperty(ed.Message); ok {
				loc, value = loc+"."+name, nil
			}
			p.Errors = append(p.Errors, ProblemError{Location: loc, Message: ed.Message, Value: redactValue(loc, value)})
		} else {
			p.Errors = append(p.Errors, ProblemError{Message: err.Error()})
		}
	}
	if status == http.StatusBadRequest {
		// A body that is not JSON at all: huma echoes it as the value; drop
		// it, the client has it and it may be large.
		for i := range p.Errors {
			p.Errors[i].Value = nil
		}
		if msg == "" || strings.HasPrefix(msg, "validation failed") {
			p.Detail = "The request body is not valid JSON."
		}
	}
	if status == http.StatusUnprocessableEntity && p.Detail == "" {
		p.Detail = "The request does not match the schema."
	}
	return p
}

// fieldProblem turns an app validation error into a 422 naming the field.
func fieldProblem(e *app.Error) *Problem {
	p := newProblem(e.Code, e.Message)
	if e.Field != "" {
		loc := e.Field
		if !strings.Contains(loc, ".") {
			loc = "body." + loc
		}
		p.Errors = []ProblemError{{Location: loc, Message: e.Message}}
	}
	return p
}

// missingProperty extracts the property name from huma's "expected required
// property NAME to be present" validation message.
func missingProperty(msg string) (string, bool) {
	name, ok := strings.CutPrefix(msg, "expected required property ")
	if !ok {
		return "", false
	}
	name, ok = strings.CutSuffix(name, " to be present")
	return name, ok && name != ""
}

// secretField matches the names of request fields that carry secrets
// (password, clientSecret, secretAccessKey, token, …).
func secretField(name string) bool {
	n := strings.ToLower(name)
	return strings.Contains(n, "password") || strings.Contains(n, "secret") || strings.Contains(n, "token")
}

// redactValue keeps secrets out of the values validation errors echo: huma
// reports an unexpected property with the whole object around it, which
// may hold a password the caller sent.
func redactValue(loc string, v any) any {
	if i := strings.LastIndexByte(loc, '.'); secretField(loc[i+1:]) && v != nil {
		return "[redacted]"
	}
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := make(map[string]any, len(m))
	for k, x := range m {
		if secretField(k) {
			x = "[redacted]"
		} else if _, nested := x.(map[string]any); nested {
			x = redactValue(k, x)
		}
		out[k] = x
	}
	return out
}
