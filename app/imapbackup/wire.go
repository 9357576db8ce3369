package imapbackup

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// This file is the small part of the IMAP protocol Backstop speaks itself,
// for MULTIAPPEND, which go-imap v2 lacks: encoding mailbox names
// (modified UTF-7), quoting, and parsing the status responses an APPEND
// answers with. FuzzParseResponse covers the parser.

var mutf7 = base64.NewEncoding("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+,").WithPadding(base64.NoPadding)

// encodeMailbox encodes a mailbox name in modified UTF-7 (RFC 3501 5.1.3).
func encodeMailbox(s string) string {
	var b strings.Builder
	var run []rune
	flush := func() {
		if len(run) == 0 {
			return
		}
		u := utf16.Encode(run)
		raw := make([]byte, 0, 2*len(u))
		for _, c := range u {
			raw = append(raw, byte(c>>8), byte(c))
		}
		b.WriteByte('&')
		b.WriteString(mutf7.EncodeToString(raw))
		b.WriteByte('-')
		run = run[:0]
	}
	for _, r := range s {
		switch {
		case r == '&':
			flush()
			b.WriteString("&-")
		case r >= 0x20 && r <= 0x7e:
			flush()
			b.WriteRune(r)
		default:
			run = append(run, r)
		}
	}
	flush()
	return b.String()
}

// decodeMailbox decodes a modified UTF-7 mailbox name.
func decodeMailbox(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e {
			return "", errors.New("mailbox name: byte outside printable ASCII")
		}
		if c != '&' {
			b.WriteByte(c)
			continue
		}
		j := strings.IndexByte(s[i+1:], '-')
		if j < 0 {
			return "", errors.New("mailbox name: unterminated &-sequence")
		}
		enc := s[i+1 : i+1+j]
		i += j + 1
		if enc == "" {
			b.WriteByte('&')
			continue
		}
		raw, err := mutf7.DecodeString(enc)
		if err != nil || len(raw)%2 != 0 {
			return "", errors.New("mailbox name: bad modified base64")
		}
		u := make([]uint16, len(raw)/2)
		for k := range u {
			u[k] = uint16(raw[2*k])<<8 | uint16(raw[2*k+1])
		}
		for _, r := range utf16.Decode(u) {
			if r == utf8.RuneError || (r >= 0x20 && r <= 0x7e) {
				return "", errors.New("mailbox name: invalid or needlessly encoded character")
			}
			b.WriteRune(r)
		}
	}
	return b.String(), nil
}

// quote returns s as an IMAP quoted string, or ok false when it cannot be
// one (CR, LF, NUL or 8-bit bytes need a literal).
func quote(s string) (string, bool) {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == 0 || c == '\r' || c == '\n' || c >= 0x80:
			return "", false
		case c == '"' || c == '\\':
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	b.WriteByte('"')
	return b.String(), true
}

// isAtomFlag says whether a flag can be sent as is in a flag list:
// a system flag (\Word) or a keyword of atom characters.
func isAtomFlag(f string) bool {
	s := strings.TrimPrefix(f, `\`)
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= 0x20 || c >= 0x7f || strings.IndexByte(`(){%*"\]`, c) >= 0 {
			return false
		}
	}
	return true
}

// response is one server response line (literals inside it skipped).
type response struct {
	Tag      string // "*" untagged, "+" continuation, else the command's tag
	Status   string // OK, NO, BAD, PREAUTH, BYE; "" for other untagged data
	Code     string // the response code's name, upper case, e.g. OVERQUOTA
	CodeArgs string // what follows the code's name inside the brackets
	Text     string
	Fields   []string // for untagged data: the words after "*"
}

// parseResponse parses one response line without its CRLF.
func parseResponse(line string) (response, error) {
	var r response
	if line == "" {
		return r, errors.New("empty response line")
	}
	if line[0] == '+' {
		r.Tag = "+"
		r.Text = strings.TrimPrefix(strings.TrimPrefix(line, "+"), " ")
		return r, nil
	}
	sp := strings.IndexByte(line, ' ')
	if sp <= 0 {
		return r, fmt.Errorf("malformed response line %q", clip(line))
	}
	r.Tag, line = line[:sp], line[sp+1:]
	word, rest, _ := strings.Cut(line, " ")
	switch strings.ToUpper(word) {
	case "OK", "NO", "BAD", "PREAUTH", "BYE":
		r.Status = strings.ToUpper(word)
	default:
		if r.Tag != "*" {
			return r, fmt.Errorf("tagged response without a status: %q", clip(line))
		}
		r.Fields = strings.Fields(line)
		return r, nil
	}
	if strings.HasPrefix(rest, "[") {
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return r, fmt.Errorf("unterminated response code in %q", clip(rest))
		}
		code := rest[1:end]
		name, args, _ := strings.Cut(code, " ")
		if name == "" {
			return r, errors.New("empty response code")
		}
		r.Code, r.CodeArgs = strings.ToUpper(name), args
		rest = strings.TrimPrefix(rest[end+1:], " ")
	}
	r.Text = rest
	return r, nil
}

// literalAtEnd returns the size of a literal announced at the end of a
// line ("{123}" or "{123+}"), or -1.
func literalAtEnd(line string) int64 {
	if !strings.HasSuffix(line, "}") {
		return -1
	}
	i := strings.LastIndexByte(line, '{')
	if i < 0 {
		return -1
	}
	num := strings.TrimSuffix(line[i+1:len(line)-1], "+")
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// capsFrom reads capability names from a CAPABILITY response code or
// untagged CAPABILITY data.
func capsFrom(words []string) map[string]bool {
	out := map[string]bool{}
	for _, w := range words {
		out[strings.ToUpper(w)] = true
	}
	return out
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// appendDate formats an INTERNALDATE for APPEND.
const appendDate = "02-Jan-2006 15:04:05 -0700"
