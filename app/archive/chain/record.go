package chain

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/mod/sumdb/tlog"
)

// Record types.
const (
	TypeMessage   = "message"
	TypeTombstone = "tombstone"
	TypeHold      = "hold"
	TypeRelease   = "release"
)

// recordHeader is the first line of every record.
const recordHeader = "backstop-archive/v1\n"

// TimeLayout is the record's time format: RFC 3339, milliseconds, UTC.
const TimeLayout = "2006-01-02T15:04:05.000Z"

// Record is one log entry (CONTRACT §14).
type Record struct {
	Type    string
	Tenant  string
	Message string    // am_… (message, tombstone)
	SHA256  string    // hex, of the exact bytes (message, tombstone)
	Size    int64     // message
	Channel string    // ch_… (message)
	At      time.Time // capture, purge, hold or release time (ms precision, UTC)
	Reason  string    // tombstone: the rule; hold/release: "<hold id> <name>"
}

// recordKeys lists, per type, the keys after "type" and "tenant", in order.
var recordKeys = map[string][]string{
	TypeMessage:   {"message", "sha256", "size", "channel", "at"},
	TypeTombstone: {"message", "sha256", "at", "reason"},
	TypeHold:      {"at", "reason"},
	TypeRelease:   {"at", "reason"},
}

// Marshal is the record text exactly as hashed: "backstop-archive/v1\n"
// then "key value\n" lines in the order of CONTRACT §14, only the keys the
// type has. At is RFC 3339 with milliseconds, UTC ("2006-01-02T15:04:05.000Z"),
// truncated to the millisecond. A value never holds a newline (Marshal
// replaces \r and \n by spaces, and invalid UTF-8 by U+FFFD). An unknown
// type marshals with no keys past "tenant", which ParseRecord rejects.
func (r *Record) Marshal() []byte {
	var b bytes.Buffer
	b.Grow(256)
	b.WriteString(recordHeader)
	line := func(k, v string) {
		b.WriteString(k)
		b.WriteByte(' ')
		b.WriteString(cleanValue(v))
		b.WriteByte('\n')
	}
	line("type", r.Type)
	line("tenant", r.Tenant)
	for _, k := range recordKeys[r.Type] {
		switch k {
		case "message":
			line(k, r.Message)
		case "sha256":
			line(k, r.SHA256)
		case "size":
			line(k, strconv.FormatInt(r.Size, 10))
		case "channel":
			line(k, r.Channel)
		case "at":
			line(k, r.At.UTC().Format(TimeLayout))
		case "reason":
			line(k, r.Reason)
		}
	}
	return b.Bytes()
}

func cleanValue(v string) string {
	if !strings.ContainsAny(v, "\r\n") && utf8.ValidString(v) {
		return v
	}
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(strings.ToValidUTF8(v, "\uFFFD"))
}

// ParseRecord parses a record's text, strictly (unknown keys, wrong order,
// missing keys of the type, or a trailing byte: an error). Whatever it
// accepts, Marshal gives back byte for byte.
func ParseRecord(text []byte) (*Record, error) {
	if !bytes.HasPrefix(text, []byte(recordHeader)) {
		return nil, errors.New("record: missing the backstop-archive/v1 header")
	}
	if !utf8.Valid(text) {
		return nil, errors.New("record: not UTF-8")
	}
	rest := string(text[len(recordHeader):])
	next := func(key string) (string, error) {
		if rest == "" {
			return "", fmt.Errorf("record: missing %q", key)
		}
		i := strings.IndexByte(rest, '\n')
		if i < 0 {
			return "", errors.New("record: last line does not end in a newline")
		}
		line := rest[:i]
		rest = rest[i+1:]
		k, v, ok := strings.Cut(line, " ")
		if !ok || k != key {
			return "", fmt.Errorf("record: want key %q, got line %q", key, line)
		}
		if strings.ContainsRune(v, '\r') {
			return "", fmt.Errorf("record: carriage return in %q", key)
		}
		if v == "" && key != "reason" {
			return "", fmt.Errorf("record: empty %q", key)
		}
		return v, nil
	}
	r := new(Record)
	var err error
	if r.Type, err = next("type"); err != nil {
		return nil, err
	}
	keys, ok := recordKeys[r.Type]
	if !ok {
		return nil, fmt.Errorf("record: unknown type %q", r.Type)
	}
	if r.Tenant, err = next("tenant"); err != nil {
		return nil, err
	}
	for _, k := range keys {
		v, err := next(k)
		if err != nil {
			return nil, err
		}
		switch k {
		case "message":
			r.Message = v
		case "sha256":
			if !isLowerHex64(v) {
				return nil, fmt.Errorf("record: sha256 %q is not 64 lower-case hex digits", v)
			}
			r.SHA256 = v
		case "size":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 || strconv.FormatInt(n, 10) != v {
				return nil, fmt.Errorf("record: bad size %q", v)
			}
			r.Size = n
		case "channel":
			r.Channel = v
		case "at":
			t, err := time.Parse(TimeLayout, v)
			if err != nil || t.Format(TimeLayout) != v {
				return nil, fmt.Errorf("record: bad time %q", v)
			}
			r.At = t
		case "reason":
			r.Reason = v
		}
	}
	if rest != "" {
		return nil, errors.New("record: trailing bytes after the last key")
	}
	return r, nil
}

// LeafHash is tlog.RecordHash(text).
func LeafHash(text []byte) tlog.Hash { return tlog.RecordHash(text) }

func isLowerHex64(v string) bool {
	if len(v) != 64 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
