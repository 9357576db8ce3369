package imapbackup

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"backstop/app"
)

func failureCode(err error) string {
	var fe *app.FailureError
	if errors.As(err, &fe) {
		return fe.Code
	}
	return ""
}

func TestCheck(t *testing.T) {
	f := newFixture(t)
	s := f.srv
	wrongFP := strings.Repeat("ab", 32)
	// A port nothing listens on.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := l.Addr().(*net.TCPAddr).Port
	l.Close()

	cases := []struct {
		name string
		a    Account
		code string
		why  string
	}{
		{"plain", Account{Port: s.Port, Security: SecurityNone}, "", ""},
		{"starttls pinned", Account{Port: s.Port, Security: SecurityStartTLS, TrustFingerprint: s.Fingerprint}, "", ""},
		{"starttls pinned with colons, upper case", Account{Port: s.Port, Security: SecurityStartTLS,
			TrustFingerprint: colons(strings.ToUpper(s.Fingerprint))}, "", ""},
		{"tls pinned", Account{Port: s.TLSPort, Security: SecurityTLS, TrustFingerprint: s.Fingerprint}, "", ""},
		{"tls self-signed refused", Account{Port: s.TLSPort, Security: SecurityTLS}, "imap.tls_failed", "unknown authority"},
		{"starttls self-signed refused", Account{Port: s.Port, Security: SecurityStartTLS}, "imap.tls_failed", "unknown authority"},
		{"tls wrong pin", Account{Port: s.TLSPort, Security: SecurityTLS, TrustFingerprint: wrongFP}, "imap.tls_failed", "fingerprint"},
		{"tls on the plain port", Account{Port: s.Port, Security: SecurityTLS, TrustFingerprint: s.Fingerprint}, "imap.tls_failed", "did not answer with TLS"},
		{"wrong password", Account{Port: s.Port, Security: SecurityNone, Password: "nope"}, "imap.auth_failed", ""},
		{"closed port", Account{Port: closed, Security: SecurityNone}, "imap.connection_failed", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.a
			a.Host, a.Username = s.Host, "alice"
			if a.Password == "" {
				a.Password = "secret"
			}
			err := Check(context.Background(), a)
			if got := failureCode(err); got != tc.code {
				t.Fatalf("code %q, want %q (%v)", got, tc.code, err)
			}
			if tc.why != "" {
				var fe *app.FailureError
				errors.As(err, &fe)
				if r, _ := fe.Params["reason"].(string); !strings.Contains(r, tc.why) {
					t.Fatalf("reason %q, want it to mention %q", r, tc.why)
				}
			}
			if tc.code == "imap.auth_failed" {
				var fe *app.FailureError
				errors.As(err, &fe)
				if fe.Params["username"] != "alice" || fe.Params["host"] != s.Host {
					t.Fatalf("params %v", fe.Params)
				}
				if strings.Contains(err.Error(), "nope") {
					t.Fatal("the password is in the error")
				}
			}
		})
	}
}

func colons(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		b.WriteString(s[i : i+2])
	}
	return b.String()
}

// A context that ends closes the connection: go-imap v2 has no context.
func TestCheckCancelled(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Check(ctx, f.acct); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
}
