package imapbackup

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"backstop/app"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// dialTimeout bounds the TCP connect and the TLS handshake.
const dialTimeout = 20 * time.Second

// rootCAs, when set (tests), replaces the system roots for verification.
var rootCAs *x509.CertPool

// session is one logged-in go-imap connection with its watchdog.
type session struct {
	a    Account
	conn net.Conn
	c    *imapclient.Client
	caps imap.CapSet
	stop func() bool // stops the watchdog
}

func (a Account) addr() string { return net.JoinHostPort(a.Host, strconv.Itoa(a.Port)) }

// fingerprintError is a certificate that does not match the pinned
// fingerprint.
type fingerprintError struct{ got string }

func (e *fingerprintError) Error() string {
	return "the server certificate's SHA-256 fingerprint " + e.got + " is not the trusted one"
}

// normalizeFingerprint accepts hex with or without colons, any case.
func normalizeFingerprint(s string) string {
	return strings.ToLower(strings.NewReplacer(":", "", " ", "").Replace(s))
}

// tlsConfig verifies the chain and the host name, or, with a pinned
// fingerprint, accepts exactly the certificate whose DER hashes to it.
func (a Account) tlsConfig() *tls.Config {
	cfg := &tls.Config{ServerName: a.Host, RootCAs: rootCAs, MinVersion: tls.VersionTLS12}
	if pin := normalizeFingerprint(a.TrustFingerprint); pin != "" {
		cfg.InsecureSkipVerify = true // replaced by the pin check below
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the server sent no certificate")
			}
			sum := sha256.Sum256(cs.PeerCertificates[0].Raw)
			got := hex.EncodeToString(sum[:])
			if subtle.ConstantTimeCompare([]byte(got), []byte(pin)) != 1 {
				return &fingerprintError{got: got}
			}
			return nil
		}
	}
	return cfg
}

// dial opens the TCP connection, with implicit TLS for SecurityTLS. The
// context bounds the connect and the handshake only.
func dial(ctx context.Context, a Account) (net.Conn, error) {
	d := &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", a.addr())
	if err != nil {
		return nil, classify(ctx, a, err)
	}
	if a.Security != SecurityTLS {
		return conn, nil
	}
	tc := tls.Client(conn, a.tlsConfig())
	hctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		conn.Close()
		return nil, classifyTLS(ctx, a, err)
	}
	return tc, nil
}

// connect dials, secures and logs in. The connection is closed when ctx
// ends (go-imap v2 takes no context; its own deadlines, 30 s per response
// and 5 min per literal, catch a silent server).
func connect(ctx context.Context, a Account) (*session, error) {
	if err := a.validate(); err != nil {
		return nil, err
	}
	conn, err := dial(ctx, a)
	if err != nil {
		return nil, err
	}
	s := &session{a: a, conn: conn}
	s.stop = context.AfterFunc(ctx, func() { conn.Close() })
	opts := &imapclient.Options{TLSConfig: a.tlsConfig()}
	if a.Security == SecurityStartTLS {
		conn.SetDeadline(time.Now().Add(dialTimeout))
		s.c, err = imapclient.NewStartTLS(conn, opts)
		conn.SetDeadline(time.Time{})
		if err != nil {
			s.stop()
			conn.Close()
			return nil, classifyTLS(ctx, a, err)
		}
	} else {
		s.c = imapclient.New(conn, opts)
	}
	if err := s.c.WaitGreeting(); err != nil {
		s.abort()
		return nil, classify(ctx, a, err)
	}
	if err := s.c.Login(a.Username, a.Password).Wait(); err != nil {
		s.abort()
		var ie *imap.Error
		if errors.As(err, &ie) {
			return nil, app.Fail("imap.auth_failed", map[string]any{"host": a.Host, "username": a.Username},
				fmt.Errorf("the server refused the login: %s", ie.Text))
		}
		return nil, classify(ctx, a, err)
	}
	s.caps = s.c.Caps()
	return s, nil
}

func (a Account) validate() error {
	switch a.Security {
	case SecurityNone, SecurityStartTLS, SecurityTLS:
	default:
		return fmt.Errorf("imapbackup: unknown security %q", a.Security)
	}
	if a.Host == "" || a.Port <= 0 || a.Port > 65535 {
		return fmt.Errorf("imapbackup: host and port are required")
	}
	return nil
}

// abort closes the connection without a goodbye.
func (s *session) abort() {
	s.stop()
	s.c.Close()
}

// close logs out politely (briefly) and closes.
func (s *session) close() {
	s.conn.SetDeadline(time.Now().Add(2 * time.Second))
	s.c.Logout().Wait()
	s.abort()
}

// Check connects, logs in and logs out: what adding a source verifies.
func Check(ctx context.Context, a Account) error {
	s, err := connect(ctx, a)
	if err != nil {
		return err
	}
	s.close()
	return nil
}

// classifyTLS names a failure during the TLS handshake: a certificate or
// protocol problem is imap.tls_failed; a connection that broke is
// imap.connection_failed.
func classifyTLS(ctx context.Context, a Account, err error) error {
	if reason := tlsReason(err); reason != "" {
		return app.Fail("imap.tls_failed", map[string]any{"host": a.Host, "port": a.Port, "reason": reason}, err)
	}
	return classify(ctx, a, err)
}

func tlsReason(err error) string {
	var (
		fp   *fingerprintError
		cve  *tls.CertificateVerificationError
		ua   x509.UnknownAuthorityError
		he   x509.HostnameError
		ci   x509.CertificateInvalidError
		rh   tls.RecordHeaderError
		al   tls.AlertError
		eal  *tls.AlertError
		perr *imap.Error
	)
	switch {
	case errors.As(err, &fp):
		return "certificate fingerprint mismatch"
	case errors.As(err, &ua):
		return "certificate signed by an unknown authority (self-signed? trust its fingerprint explicitly)"
	case errors.As(err, &he):
		return "certificate not valid for this host name"
	case errors.As(err, &ci):
		return "certificate invalid or expired"
	case errors.As(err, &cve):
		return "certificate verification failed"
	case errors.As(err, &rh):
		return "the server did not answer with TLS (wrong port or security mode?)"
	case errors.As(err, &al), errors.As(err, &eal):
		return "TLS alert: " + err.Error()
	case errors.As(err, &perr):
		return "the server refused STARTTLS: " + perr.Text
	case strings.Contains(err.Error(), "STARTTLS"), strings.Contains(err.Error(), "tls:"):
		return err.Error()
	}
	return ""
}

// classify turns an error of the connection into a FailureError. Errors
// that already carry a code, and the context's own, pass unchanged; an
// IMAP NO/BAD stays an *imap.Error (the caller decides what it means);
// anything else on the wire (refused, reset, EOF, timeout) is
// imap.connection_failed, which the job runner retries.
func classify(ctx context.Context, a Account, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var fe *app.FailureError
	if errors.As(err, &fe) {
		return err
	}
	var ie *imap.Error
	if errors.As(err, &ie) {
		if ie.Code == imap.ResponseCodeOverQuota || strings.Contains(strings.ToLower(ie.Text), "quota") {
			return quotaFailure(a, err)
		}
		return err
	}
	if tlsReason(err) != "" && !errors.Is(err, io.EOF) {
		return classifyTLS(ctx, a, err)
	}
	return app.Fail("imap.connection_failed", map[string]any{"host": a.Host, "port": a.Port}, err)
}

func quotaFailure(a Account, err error) error {
	return app.Fail("imap.quota_exceeded", map[string]any{"host": a.Host, "username": a.Username}, err)
}
