package graph

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"
)

func TestParseError(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		status int
		header http.Header
		body   string
		want   Error
	}{
		{"graph with request id", 404, nil,
			`{"error":{"code":"MailboxNotEnabledForRESTAPI","message":"The mailbox is either inactive.","innerError":{"request-id":"r-1","date":"2025-01-01T00:00:00"}}}`,
			Error{Status: 404, Code: "MailboxNotEnabledForRESTAPI", Message: "The mailbox is either inactive.", RequestID: "r-1"}},
		{"nested inner codes, both spellings", 400, nil,
			`{"error":{"code":"invalidRequest","message":"x","innererror":{"code":"fragmentOverlap","innerError":{"code":"invalidRange","innererror":{"code":"deepest"}}}}}`,
			Error{Status: 400, Code: "invalidRequest", Inner: []string{"fragmentOverlap", "invalidRange", "deepest"}, Message: "x"}},
		{"headers", 429, http.Header{"Retry-After": {"7"}, "Request-Id": {"h-1"}},
			`{"error":{"code":"ApplicationThrottled","message":"Application is over its MailboxConcurrency limit."}}`,
			Error{Status: 429, Code: "ApplicationThrottled", Message: "Application is over its MailboxConcurrency limit.", RequestID: "h-1", RetryAfter: 7 * time.Second}},
		{"http-date retry-after and location", 410, http.Header{"Retry-After": {"Wed, 01 Jan 2025 12:00:30 GMT"}, "Location": {"https://g/delta"}},
			`{"error":{"code":"resyncRequired"}}`,
			Error{Status: 410, Code: "resyncRequired", RetryAfter: 31 * time.Second, Location: "https://g/delta"}},
		{"not json", 502, nil, "<html>Bad gateway</html>", Error{Status: 502, Message: "<html>Bad gateway</html>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.header
			if h == nil {
				h = http.Header{}
			}
			got := parseError(tt.status, h, []byte(tt.body), now)
			if fmt.Sprintf("%+v", *got) != fmt.Sprintf("%+v", tt.want) {
				t.Fatalf("parseError =\n%+v\nwant\n%+v", *got, tt.want)
			}
		})
	}
}

func TestIsCodeWalksInnerCodesCaseInsensitively(t *testing.T) {
	err := fmt.Errorf("backing up: %w", &Error{Status: 400, Code: "invalidRequest", Inner: []string{"SyncStateNotFound"}})
	if !IsCode(err, "resyncRequired", "syncStateNotFound") || IsCode(err, "other") || StatusOf(err) != 400 {
		t.Fatal("IsCode/StatusOf wrong")
	}
	if IsCode(errors.New("plain"), "x") || StatusOf(errors.New("plain")) != 0 {
		t.Fatal("plain errors match")
	}
}

func FuzzParseError(f *testing.F) {
	for _, seed := range []string{
		`{"error":{"code":"ErrorFolderExists","message":"A folder with the specified name already exists."}}`,
		`{"error":{"code":"a","innerError":{"code":"b","innererror":{"code":"c","request-id":"r"}}}}`,
		`{"error":{"code":1,"innerError":[]}}`,
		`{"error":null}`,
		`{"error":"invalid_client","error_codes":[7000215]}`,
		`<html></html>`,
		``,
	} {
		f.Add(429, "10", seed)
	}
	f.Fuzz(func(t *testing.T, status int, retryAfter, body string) {
		h := http.Header{"Retry-After": {retryAfter}}
		e := parseError(status, h, []byte(body), time.Now())
		if e == nil || e.Status != status || e.RetryAfter < 0 || len(e.Inner) > maxInnerDepth {
			t.Fatalf("parseError = %+v", e)
		}
		_ = e.Error()
		_ = parseAuthError(status, []byte(body)).Reason()
	})
}
