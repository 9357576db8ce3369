package imapbackup

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseResponse(t *testing.T) {
	cases := []struct {
		line string
		want response
	}{
		{"b3 OK [APPENDUID 1795453749 3901:4000] Append completed.", response{Tag: "b3", Status: "OK", Code: "APPENDUID", CodeArgs: "1795453749 3901:4000", Text: "Append completed."}},
		{"b4 NO [OVERQUOTA] Quota exceeded (mailbox for user is full)", response{Tag: "b4", Status: "NO", Code: "OVERQUOTA", Text: "Quota exceeded (mailbox for user is full)"}},
		{"b5 NO Quota exceeded", response{Tag: "b5", Status: "NO", Text: "Quota exceeded"}},
		{"+ OK", response{Tag: "+", Text: "OK"}},
		{"+", response{Tag: "+"}},
		{"* BYE Server shutting down", response{Tag: "*", Status: "BYE", Text: "Server shutting down"}},
		{"* OK [CAPABILITY IMAP4rev1 LITERAL+] ready", response{Tag: "*", Status: "OK", Code: "CAPABILITY", CodeArgs: "IMAP4rev1 LITERAL+", Text: "ready"}},
	}
	for _, tc := range cases {
		got, err := parseResponse(tc.line)
		if err != nil {
			t.Fatalf("%q: %v", tc.line, err)
		}
		got.Fields = nil
		if !reflect.DeepEqual(got, tc.want) {
			t.Fatalf("%q: %+v, want %+v", tc.line, got, tc.want)
		}
	}
	if r, _ := parseResponse("* 3 EXISTS"); len(r.Fields) != 2 || r.Fields[1] != "EXISTS" {
		t.Fatalf("untagged data: %+v", r)
	}
	for _, bad := range []string{"", "b1", "b1 FOO", "b1 OK [APPENDUID 1 2", "b1 NO []"} {
		if _, err := parseResponse(bad); err == nil {
			t.Fatalf("%q parsed", bad)
		}
	}
	if !isQuota(response{Code: "OVERQUOTA"}) || !isQuota(response{Text: "Quota exceeded"}) || isQuota(response{Text: "Mailbox doesn't exist"}) {
		t.Fatal("isQuota")
	}
}

func FuzzParseResponse(f *testing.F) {
	for _, s := range []string{"b3 OK [APPENDUID 1 1:2] done", "+ go ahead", "* 3 EXISTS", "* OK [CAPABILITY A B] x",
		"b1 NO [OVERQUOTA] full", "a [", "* NO [ALERT] {5}", "b2 BAD [", "b1 OK [X]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		r, err := parseResponse(line)
		if err != nil {
			return
		}
		if r.Tag == "" {
			t.Fatalf("%q: no tag", line)
		}
		if r.Tag != "*" && r.Tag != "+" && r.Status == "" {
			t.Fatalf("%q: tagged without status", line)
		}
		literalAtEnd(line)
	})
}

func TestMailboxNames(t *testing.T) {
	cases := map[string]string{
		"INBOX":              "INBOX",
		"Größe & Maß":        "Gr&APYA3w-e &- Ma&AN8-",
		"日本語":                "&ZeVnLIqe-",
		"~peter/mail/台北/日本語": "~peter/mail/&U,BTFw-/&ZeVnLIqe-",
		"😀":                  "&2D3eAA-",
	}
	for in, want := range cases {
		if got := encodeMailbox(in); got != want {
			t.Fatalf("encode %q = %q, want %q", in, got, want)
		}
		if got, err := decodeMailbox(want); err != nil || got != in {
			t.Fatalf("decode %q = %q, %v", want, got, err)
		}
	}
}

func FuzzMailboxRoundTrip(f *testing.F) {
	for _, s := range []string{"INBOX", "Größe & Maß", "日本語", "&", "&-", "a&b-c", "😀x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) || strings.ContainsAny(s, "\x00") {
			return
		}
		for _, r := range s {
			if r < 0x20 || r == 0x7f || r == utf8.RuneError {
				return
			}
		}
		enc := encodeMailbox(s)
		for i := 0; i < len(enc); i++ {
			if enc[i] < 0x20 || enc[i] > 0x7e {
				t.Fatalf("%q encoded to non-ASCII %q", s, enc)
			}
		}
		dec, err := decodeMailbox(enc)
		if err != nil || dec != s {
			t.Fatalf("%q -> %q -> %q, %v", s, enc, dec, err)
		}
		decodeMailbox(s) // never panics on any input
	})
}

func FuzzParseHeader(f *testing.F) {
	for _, s := range []string{"Subject: hi\r\nFrom: a@b\r\n\r\nbody", "Subject: =?utf-8?q?Gr=C3=BC=C3=9Fe?=\r\n folded\r\n\r\n",
		"no header", "", ":\r\n\r\n", "Date: Mon, 02 Jan 2006 15:04:05 +0000\n\n", "Message-ID:\r\n <a@b>\r\n\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h := parseHeader(b)
		var hc headerCapture
		for i := 0; i < len(b); i += 7 {
			hc.Write(b[i:min(i+7, len(b))])
		}
		if len(hc.buf) > maxHeader {
			t.Fatal("header capture grew past its limit")
		}
		if len(b) <= maxHeader && parseHeader(hc.buf) != h {
			t.Fatalf("header read in pieces differs: %+v vs %+v", parseHeader(hc.buf), h)
		}
	})
}

func TestQuote(t *testing.T) {
	if q, ok := quote(`pa"ss\word`); !ok || q != `"pa\"ss\\word"` {
		t.Fatalf("%q %v", q, ok)
	}
	if _, ok := quote("a\r\nb"); ok {
		t.Fatal("CRLF quoted")
	}
	if !isAtomFlag(`\Seen`) || !isAtomFlag("$Label1") || isAtomFlag("a b") || isAtomFlag(`\`) {
		t.Fatal("isAtomFlag")
	}
}
