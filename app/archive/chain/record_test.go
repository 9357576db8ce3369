package chain

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestRecordMarshalIsTheContractFormat(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 30, 5, 123456789, time.FixedZone("CET", 3600))
	sum := strings.Repeat("ab", 32)
	tests := []struct {
		name string
		r    Record
		want string
	}{
		{"message", Record{Type: TypeMessage, Tenant: "tn_1", Message: "am_1", SHA256: sum, Size: 42, Channel: "ch_1", At: at, Reason: "ignored"},
			"backstop-archive/v1\ntype message\ntenant tn_1\nmessage am_1\nsha256 " + sum + "\nsize 42\nchannel ch_1\nat 2026-03-01T11:30:05.123Z\n"},
		{"tombstone", Record{Type: TypeTombstone, Tenant: "tn_1", Message: "am_1", SHA256: sum, Size: 42, At: at, Reason: "default 2557 days"},
			"backstop-archive/v1\ntype tombstone\ntenant tn_1\nmessage am_1\nsha256 " + sum + "\nat 2026-03-01T11:30:05.123Z\nreason default 2557 days\n"},
		{"hold", Record{Type: TypeHold, Tenant: "tn_1", At: at, Reason: "hd_1 Smith v.\r\nJones"},
			"backstop-archive/v1\ntype hold\ntenant tn_1\nat 2026-03-01T11:30:05.123Z\nreason hd_1 Smith v.  Jones\n"},
		{"release", Record{Type: TypeRelease, Tenant: "tn_1", At: at, Reason: "hd_1 Smith"},
			"backstop-archive/v1\ntype release\ntenant tn_1\nat 2026-03-01T11:30:05.123Z\nreason hd_1 Smith\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.r.Marshal()
			if string(got) != tt.want {
				t.Fatalf("Marshal:\n%s\nwant:\n%s", got, tt.want)
			}
			p, err := ParseRecord(got)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(p.Marshal(), got) {
				t.Fatalf("round trip changed the text")
			}
		})
	}
}

func TestParseRecordIsStrict(t *testing.T) {
	sum := strings.Repeat("0f", 32)
	good := "backstop-archive/v1\ntype message\ntenant tn_1\nmessage am_1\nsha256 " + sum + "\nsize 42\nchannel ch_1\nat 2026-03-01T11:30:05.123Z\n"
	if _, err := ParseRecord([]byte(good)); err != nil {
		t.Fatal(err)
	}
	bad := map[string]string{
		"no header":        strings.TrimPrefix(good, "backstop-archive/v1\n"),
		"trailing byte":    good + "x",
		"trailing line":    good + "reason x\n",
		"no final newline": strings.TrimSuffix(good, "\n"),
		"wrong order":      strings.Replace(good, "size 42\nchannel ch_1\n", "channel ch_1\nsize 42\n", 1),
		"missing key":      strings.Replace(good, "channel ch_1\n", "", 1),
		"unknown key":      strings.Replace(good, "channel ch_1\n", "colour red\n", 1),
		"unknown type":     strings.Replace(good, "type message", "type note", 1),
		"upper-case hash":  strings.Replace(good, sum, strings.ToUpper(sum), 1),
		"short hash":       strings.Replace(good, sum, sum[:62], 1),
		"size sign":        strings.Replace(good, "size 42", "size +42", 1),
		"size leading 0":   strings.Replace(good, "size 42", "size 042", 1),
		"negative size":    strings.Replace(good, "size 42", "size -1", 1),
		"time no ms":       strings.Replace(good, "05.123Z", "05Z", 1),
		"time offset":      strings.Replace(good, "05.123Z", "05.123+01:00", 1),
		"CRLF":             strings.ReplaceAll(good, "\n", "\r\n"),
		"empty tenant":     strings.Replace(good, "tenant tn_1", "tenant ", 1),
		"no space":         strings.Replace(good, "tenant tn_1", "tenant", 1),
		"not UTF-8":        strings.Replace(good, "ch_1", "ch_\xff", 1),
		"hold with sha256": "backstop-archive/v1\ntype hold\ntenant tn_1\nsha256 " + sum + "\nat 2026-03-01T11:30:05.123Z\nreason x\n",
	}
	for name, text := range bad {
		if _, err := ParseRecord([]byte(text)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

func FuzzParseRecord(f *testing.F) {
	f.Add(messageRecord(1).Marshal())
	f.Add((&Record{Type: TypeTombstone, Tenant: "tn_1", Message: "am_1", SHA256: strings.Repeat("0", 64), At: t0, Reason: "rule"}).Marshal())
	f.Add((&Record{Type: TypeHold, Tenant: "tn_1", At: t0, Reason: ""}).Marshal())
	f.Add([]byte("backstop-archive/v1\ntype release\ntenant tn_1\nat 2026-03-01T11:30:05.123Z\nreason hd_1 ü\n"))
	f.Fuzz(func(t *testing.T, text []byte) {
		r, err := ParseRecord(text)
		if err != nil {
			return
		}
		out := r.Marshal()
		if !bytes.Equal(out, text) {
			t.Fatalf("Marshal(ParseRecord(%q)) = %q", text, out)
		}
		r2, err := ParseRecord(out)
		if err != nil {
			t.Fatalf("re-parse: %v", err)
		}
		if r2.Type != r.Type || r2.Tenant != r.Tenant || r2.Message != r.Message || r2.SHA256 != r.SHA256 ||
			r2.Size != r.Size || r2.Channel != r.Channel || !r2.At.Equal(r.At) || r2.Reason != r.Reason {
			t.Fatalf("round trip: %+v != %+v", r2, r)
		}
	})
}
