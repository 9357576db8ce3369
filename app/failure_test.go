package app

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestFailureCatalogueIsComplete(t *testing.T) {
	required := []string{"graph.consent_missing", "graph.throttled", "graph.mailbox_unavailable", "imap.auth_failed",
		"imap.tls_failed", "imap.connection_failed", "storage.full", "storage.unreachable", "verify.hash_mismatch",
		"repository.damaged", "agent.backup_failed", "agent.tool_missing", "unknown"}
	codes := FailureCodes()
	seen := map[string]bool{}
	for _, c := range codes {
		if seen[c.Code] {
			t.Errorf("%s listed twice", c.Code)
		}
		seen[c.Code] = true
		if !slices.Contains(FailureCategories, c.Category) {
			t.Errorf("%s: category %q is not one of %v", c.Code, c.Category, FailureCategories)
		}
		if c.Title == "" || len(c.FixSteps) == 0 || c.DocsURL != FailureDocsBase+c.Code {
			t.Errorf("%s: incomplete entry %+v", c.Code, c)
		}
		if c.Transient && !c.Retryable {
			t.Errorf("%s: transient but not retryable", c.Code)
		}
		for _, p := range c.Params {
			if p.Name == "" || p.Description == "" {
				t.Errorf("%s: undocumented parameter %+v", c.Code, p)
			}
		}
	}
	for _, r := range required {
		if !seen[r] {
			t.Errorf("required code %s missing", r)
		}
	}
}

func TestNewFailureFillsFromCatalogue(t *testing.T) {
	at := time.Date(2026, 11, 21, 15, 8, 9, 123456789, time.UTC)
	f := NewFailure("graph.consent_missing", map[string]any{"permission": "Mail.Read", "clientSecret": "s3cr3t"}, "403 Forbidden", "list", at)
	if f.Category != CategoryPermission || f.Transient || !f.Retryable || f.Step != "list" || f.OccurredAt.String() != "2026-11-21T15:08:09.123Z" {
		t.Fatalf("failure %+v", f)
	}
	if f.Params["clientSecret"] != "[redacted]" || f.Params["permission"] != "Mail.Read" {
		t.Fatalf("params %v", f.Params)
	}
	if !strings.Contains(f.FixSteps[2], "Mail.Read") || !strings.Contains(f.FixSteps[0], "the azureTenantId") {
		t.Fatalf("fix steps not filled: %q", f.FixSteps)
	}
	if got := NewFailure("agent.no_paths", map[string]any{"hostname": "web1"}, "", "", at).FixSteps[0]; !strings.Contains(got, "web1") || !strings.Contains(got, "/endpoints/{id}") {
		t.Fatalf("fix step %q: parameters filled, literal braces kept", got)
	}
	if f.Retry.State != RetryNone {
		t.Fatalf("retry %+v", f.Retry)
	}
	u := FailureFrom(errors.New("boom"), "upload", at)
	if u.Code != CodeUnknown || u.Details != "boom" || u.Category != CategoryInternal {
		t.Fatalf("plain error: %+v", u)
	}
	odd := FailureFrom(Fail("made.up", nil, errors.New("x")), "", at)
	if odd.Code != CodeUnknown || odd.Params["originalCode"] != "made.up" {
		t.Fatalf("unknown code: %+v", odd)
	}
}

func TestRedactText(t *testing.T) {
	secret := []string{"hunter2", "s3cr3tvalue", "abcdefghijklmnop", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig", "bsk_key1_abcdef",
		"Dear Bob, the merger", "pa55word", "tok123456"}
	for _, in := range []string{
		"login failed: password=hunter2 for user bob",
		`{"client_secret": "s3cr3tvalue"}`,
		"Authorization: Bearer abcdefghijklmnop",
		"token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig rejected",
		"key bsk_key1_abcdef refused",
		"Subject: hi\r\n\r\nDear Bob, the merger",
		"a1 LOGIN bob pa55word",
		"GET https://bob:tok123456@mail.example.com/ failed",
		"sas=" + strings.Repeat("Zx9", 20),
	} {
		out := RedactText(in)
		for _, s := range secret {
			if strings.Contains(out, s) {
				t.Errorf("RedactText(%q) = %q still holds %q", in, out, s)
			}
		}
		if strings.Contains(in, "Zx9Zx9") && strings.Contains(out, "Zx9Zx9") {
			t.Errorf("long token kept: %q", out)
		}
	}
	sha := strings.Repeat("ab", 32)
	if out := RedactText("sha256 " + sha + " differs at /etc/hosts"); !strings.Contains(out, sha) || !strings.Contains(out, "/etc/hosts") {
		t.Errorf("a content hash and path must survive: %q", out)
	}
	if out := RedactText(strings.Repeat("x ", 5000)); len(out) > maxDetails+4 {
		t.Errorf("details not bounded: %d bytes", len(out))
	}
}

func TestTopItemCauses(t *testing.T) {
	got := TopItemCauses([]FailureGroup{{Code: "storage.full", Count: 1}, {Code: "graph.throttled", Count: 5},
		{Code: "imap.auth_failed", Count: 2}, {Code: "unknown", Count: 2}})
	want := []ItemCause{{"graph.throttled", CategoryThrottling, 5}, {"imap.auth_failed", CategoryAuth, 2}, {"unknown", CategoryInternal, 2}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if got := TopItemCauses(nil); got == nil || len(got) != 0 {
		t.Fatalf("no groups: %#v, want an empty list", got)
	}
}
