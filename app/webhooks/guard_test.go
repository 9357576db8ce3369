package webhooks_test

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"backstop/app"
	"backstop/app/webhooks"
)

func TestGuardRanges(t *testing.T) {
	cases := []struct {
		addr          string
		strict, loose bool // allowed without / with allow_private
	}{
		{"93.184.215.14", true, true},        // public IPv4
		{"2606:4700:4700::1111", true, true}, // public IPv6
		{"127.0.0.1", false, true},
		{"10.1.2.3", false, true},
		{"172.16.0.1", false, true},
		{"192.168.1.1", false, true},
		{"100.64.0.1", false, true}, // CGNAT
		{"::1", false, true},
		{"fd12:3456::1", false, true},        // ULA
		{"169.254.169.254", false, false},    // link-local metadata
		{"fd00:ec2::254", false, false},      // AWS IPv6 metadata, inside ULA
		{"100.100.100.200", false, false},    // Alibaba metadata, inside CGNAT
		{"fe80::1", false, false},            // IPv6 link-local
		{"224.0.0.1", false, false},          // multicast
		{"ff02::1", false, false},            // IPv6 multicast
		{"192.0.2.10", false, false},         // documentation
		{"198.51.100.1", false, false},       // documentation
		{"203.0.113.5", false, false},        // documentation
		{"2001:db8::1", false, false},        // documentation
		{"0.0.0.0", false, false},            // 0.0.0.0/8
		{"0.1.2.3", false, false},            // 0.0.0.0/8
		{"240.0.0.1", false, false},          // reserved
		{"255.255.255.255", false, false},    // broadcast
		{"198.18.0.1", false, false},         // benchmarking
		{"64:ff9b::a9fe:a9fe", false, false}, // NAT64 of the metadata address
		{"64:ff9b::5db8:d70e", false, false}, // NAT64 of a public one: refused too
		{"::ffff:127.0.0.1", false, false},   // IPv4-mapped loopback
		{"::ffff:169.254.169.254", false, false},
		{"::ffff:93.184.215.14", false, false},
		{"::", false, false},
		{"2002:7f00:1::", false, false}, // 6to4 of 127.0.0.1
	}
	strict, loose := webhooks.NewGuard(false), webhooks.NewGuard(true)
	for _, c := range cases {
		t.Run(c.addr, func(t *testing.T) {
			a := netip.MustParseAddr(c.addr)
			for _, g := range []struct {
				guard *webhooks.Guard
				want  bool
			}{{strict, c.strict}, {loose, c.loose}} {
				err := g.guard.CheckAddr(a)
				if (err == nil) != g.want {
					t.Errorf("allow_private=%v: allowed=%v (%v), want %v", g.guard.AllowPrivate(), err == nil, err, g.want)
				}
				var re *webhooks.RefusedError
				if err != nil && !errors.As(err, &re) {
					t.Errorf("error %T is not a RefusedError", err)
				}
			}
		})
	}
}

func TestValidateURL(t *testing.T) {
	strict, loose := webhooks.NewGuard(false), webhooks.NewGuard(true)
	fakeDNS := func(ctx context.Context, network, host string) ([]netip.Addr, error) {
		switch host {
		case "receiver.example.com":
			return []netip.Addr{netip.MustParseAddr("93.184.215.14")}, nil
		case "rebind.example.com": // one public and one metadata address
			return []netip.Addr{netip.MustParseAddr("93.184.215.14"), netip.MustParseAddr("169.254.169.254")}, nil
		case "internal.example.com":
			return []netip.Addr{netip.MustParseAddr("10.0.0.7")}, nil
		}
		return nil, errors.New("no such host")
	}
	strict.LookupNetIP, loose.LookupNetIP = fakeDNS, fakeDNS
	cases := []struct {
		name  string
		guard *webhooks.Guard
		url   string
		code  string // "" = accepted
	}{
		{"https public", strict, "https://receiver.example.com/hook?x=1", ""},
		{"http strict", strict, "http://receiver.example.com/hook", app.EINVALID},
		{"http when private allowed", loose, "http://receiver.example.com/hook", ""},
		{"ftp", loose, "ftp://receiver.example.com/", app.EINVALID},
		{"javascript", loose, "javascript:alert(1)", app.EINVALID},
		{"relative", loose, "/hook", app.EINVALID},
		{"credentials", strict, "https://user:pw@receiver.example.com/", app.EINVALID},
		{"user only", strict, "https://user@receiver.example.com/", app.EINVALID},
		{"unresolvable", strict, "https://nowhere.invalid/", app.EINVALID},
		{"oversized", strict, "https://receiver.example.com/" + strings.Repeat("a", webhooks.MaxURLLength), app.EINVALID},
		{"bad port", strict, "https://receiver.example.com:0/", app.EINVALID},
		{"loopback literal", strict, "https://127.0.0.1/", app.EWEBHOOKREFUSED},
		{"loopback allowed", loose, "https://127.0.0.1:8443/", ""},
		{"private name", strict, "https://internal.example.com/", app.EWEBHOOKREFUSED},
		{"private name allowed", loose, "https://internal.example.com/", ""},
		{"metadata", loose, "http://169.254.169.254/latest/meta-data", app.EWEBHOOKREFUSED},
		{"any address refused", loose, "https://rebind.example.com/", app.EWEBHOOKREFUSED},
		{"ipv6 link-local", loose, "https://[fe80::1]/", app.EWEBHOOKREFUSED},
		{"mapped", loose, "https://[::ffff:127.0.0.1]/", app.EWEBHOOKREFUSED},
		{"decimal IPv4 zero net", loose, "https://0.0.0.0/", app.EWEBHOOKREFUSED},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.guard.ValidateURL(context.Background(), c.url)
			if got := app.ErrorCode(err); got != c.code {
				t.Fatalf("code %q (%v), want %q", got, err, c.code)
			}
			var ae *app.Error
			if err != nil && (!errors.As(err, &ae) || ae.Field != "url") {
				t.Errorf("error %v does not name the field url", err)
			}
		})
	}
}

func TestClientIgnoresProxyEnvironment(t *testing.T) {
	// A proxy from the environment would connect on our behalf, past the
	// guard. The receiver must be reached directly.
	t.Setenv("HTTP_PROXY", "http://192.0.2.1:3128")
	t.Setenv("HTTPS_PROXY", "http://192.0.2.1:3128")
	rc := newReceiver(t, nil)
	resp, err := webhooks.NewGuard(true).Client().Post(rc.URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	// And the strict client refuses the same loopback receiver at connect time.
	_, err = webhooks.NewGuard(false).Client().Post(rc.URL, "application/json", strings.NewReader("{}"))
	var re *webhooks.RefusedError
	if !errors.As(err, &re) {
		t.Fatalf("strict client: %v, want a RefusedError", err)
	}
}
