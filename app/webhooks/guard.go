package webhooks

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"backstop/app"

	"code.dny.dev/ssrf"
)

// AttemptTimeout bounds one delivery attempt: connect, TLS, request and
// answer together (CONTRACT §5).
const AttemptTimeout = 10 * time.Second

// MaxURLLength is the longest webhook URL accepted.
const MaxURLLength = 2048

// privateRanges are refused unless webhook.allow_private: loopback,
// RFC 1918, CGNAT (RFC 6598) and IPv6 loopback and ULA.
var privateRanges = []netip.Prefix{
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("fc00::/7"),
}

// alwaysRefused are cloud metadata services that sit inside the private
// ranges above, so that allow_private never opens them: AWS's IPv6 metadata
// address (a ULA) and Alibaba Cloud's (in CGNAT space). The IPv4 link-local
// metadata address 169.254.169.254 is refused by the link-local rule.
var alwaysRefused = []netip.Prefix{
	netip.MustParsePrefix("fd00:ec2::254/128"),
	netip.MustParsePrefix("100.100.100.200/32"),
}

// Guard is the SSRF policy for webhook targets. It is applied twice: when a
// URL is registered (every address its host resolves to) and on every
// connection, to the address actually dialled, so a name that later
// resolves somewhere refused (DNS rebinding) fails that attempt.
//
// Refused always: link-local (cloud metadata), multicast, documentation,
// benchmarking, 0.0.0.0/8, 240.0.0.0/4, NAT64, 6to4, IPv4-mapped and other
// non-global IPv6, and the rest of the IANA special-purpose registries (the
// lists of code.dny.dev/ssrf). Refused unless AllowPrivate: loopback,
// RFC 1918, CGNAT and ULA. IPv4-mapped IPv6 addresses are refused even for
// private targets: a receiver is reached by its plain address.
type Guard struct {
	allowPrivate bool
	guardian     *ssrf.Guardian
	// LookupNetIP resolves host names at registration; tests may replace it.
	LookupNetIP func(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// NewGuard returns the policy; allowPrivate is the operator's
// webhook.allow_private.
func NewGuard(allowPrivate bool) *Guard {
	opts := []ssrf.Option{ssrf.WithAnyPort()}
	if allowPrivate {
		var v4, v6 []netip.Prefix
		for _, p := range privateRanges {
			if p.Addr().Is4() {
				v4 = append(v4, p)
			} else {
				v6 = append(v6, p)
			}
		}
		opts = append(opts, ssrf.WithAllowedV4Prefixes(v4...), ssrf.WithAllowedV6Prefixes(v6...))
	}
	return &Guard{allowPrivate: allowPrivate, guardian: ssrf.New(opts...), LookupNetIP: net.DefaultResolver.LookupNetIP}
}

// AllowPrivate reports whether private targets (and plain http) are allowed.
func (g *Guard) AllowPrivate() bool { return g.allowPrivate }

// RefusedError says why an address may not be contacted.
type RefusedError struct {
	Addr   netip.Addr
	Reason string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("target refused: %s is %s", e.Addr, e.Reason)
}

// CheckAddr returns a *RefusedError when the address may not be contacted.
func (g *Guard) CheckAddr(a netip.Addr) error {
	a = a.WithZone("")
	for _, p := range alwaysRefused {
		if p.Contains(a) {
			return &RefusedError{a, "a cloud metadata address (always refused)"}
		}
	}
	if err := g.guardian.SafeAddr(a); err != nil {
		if !g.allowPrivate {
			for _, p := range privateRanges {
				if p.Contains(a) {
					return &RefusedError{a, "in a private range (" + p.String() + "); allowed only with webhook.allow_private"}
				}
			}
		}
		if a.Is4In6() {
			return &RefusedError{a, "an IPv4-mapped IPv6 address (always refused)"}
		}
		return &RefusedError{a, "in a reserved range (always refused): " + strings.TrimPrefix(err.Error(), ssrf.ErrProhibitedIP.Error()+": ")}
	}
	return nil
}

// control is the net.Dialer hook: it runs after name resolution, on the
// exact address about to be connected.
func (g *Guard) control(network, address string, _ syscall.RawConn) error {
	if network != "tcp4" && network != "tcp6" {
		return fmt.Errorf("target refused: network %s", network)
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("target refused: cannot parse %q", address)
	}
	return g.CheckAddr(ap.Addr())
}

// Client returns the one HTTP client for webhook deliveries: every
// connection passes the guard, proxy environment variables are ignored
// (a proxy would connect on our behalf, unchecked), redirects are not
// followed (the 3xx is the answer), and each request ends after
// AttemptTimeout.
func (g *Guard) Client() *http.Client {
	dialer := &net.Dialer{Timeout: AttemptTimeout, KeepAlive: 30 * time.Second, Control: g.control}
	transport := &http.Transport{
		Proxy:                  nil,
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           256,
		MaxIdleConnsPerHost:    16,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    AttemptTimeout,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	return &http.Client{
		Transport:     transport,
		Timeout:       AttemptTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// ValidateURL checks a webhook URL as registered: absolute https (http too
// when private targets are allowed), no credentials, a host that resolves,
// and no resolved address refused. Errors name the field "url"; a refused
// address is EWEBHOOKREFUSED, anything else EINVALID.
func (g *Guard) ValidateURL(ctx context.Context, raw string) (string, error) {
	bad := func(format string, args ...any) error { return app.FieldError("url", format, args...) }
	raw = strings.TrimSpace(raw)
	if len(raw) > MaxURLLength {
		return "", bad("url must be at most %d characters", MaxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", bad("url is not a valid URL")
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !g.allowPrivate {
			return "", bad("url must use https (http is allowed only with webhook.allow_private)")
		}
	default:
		return "", bad("url must be an absolute https URL")
	}
	if u.User != nil {
		return "", bad("url must not contain credentials; the signature authenticates deliveries")
	}
	host := u.Hostname()
	if host == "" || u.Opaque != "" {
		return "", bad("url must name a host")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", bad("url has an invalid port")
		}
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		addrs, err = g.LookupNetIP(lctx, "ip", host)
		if err != nil || len(addrs) == 0 {
			return "", bad("host %q does not resolve", host)
		}
	}
	for _, a := range addrs {
		if err := g.CheckAddr(a); err != nil {
			var re *RefusedError
			errors.As(err, &re)
			return "", &app.Error{Code: app.EWEBHOOKREFUSED, Field: "url", Message: re.Error()}
		}
	}
	return u.String(), nil
}
