package app

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

var keyValueForm = regexp.MustCompile(`^bsk_[0-9a-hjkmnp-tv-z]{26}_[0-9A-Za-z]{38}$`)

func TestKeyValueRoundTrip(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		id := NewID(PrefixKey)
		v := NewKeyValue(id)
		if !keyValueForm.MatchString(v) {
			t.Fatalf("value %q does not have the documented form", v)
		}
		if seen[v] {
			t.Fatalf("value %q generated twice", v)
		}
		seen[v] = true
		got, ok := ParseKeyValue(v)
		if !ok || got != id {
			t.Fatalf("ParseKeyValue(%q) = %q, %v; want %q", v, got, ok, id)
		}
	}
}

func TestParseKeyValueRejects(t *testing.T) {
	v := NewKeyValue(NewID(PrefixKey))
	// Every single-character change anywhere is caught, by form or by checksum.
	for i := range len(v) {
		for _, c := range []byte("0aZ_-") {
			if v[i] == c {
				continue
			}
			typo := v[:i] + string(c) + v[i+1:]
			if _, ok := ParseKeyValue(typo); ok {
				t.Errorf("typo at %d (%q) accepted: %s", i, c, typo)
			}
		}
	}
	// Swapping two adjacent different characters is caught.
	for i := 31; i+1 < len(v); i++ {
		if v[i] == v[i+1] {
			continue
		}
		b := []byte(v)
		b[i], b[i+1] = b[i+1], b[i]
		if _, ok := ParseKeyValue(string(b)); ok {
			t.Errorf("transposition at %d accepted", i)
		}
	}
	// Truncation and extension.
	for n := range len(v) {
		if _, ok := ParseKeyValue(v[:n]); ok {
			t.Errorf("truncation to %d accepted", n)
		}
	}
	for _, bad := range []string{
		"", "bsk_", v + "x", "x" + v, strings.ToUpper(v), " " + v, v + "\n",
		"Bearer " + v, strings.Replace(v, "bsk_", "bsk-", 1), strings.Repeat("a", 4096),
		"bsk_" + strings.Repeat("0", 26) + "_" + strings.Repeat("0", 38),
		"bsk_" + strings.Repeat("é", 13) + "_" + strings.Repeat("0", 38),
	} {
		if _, ok := ParseKeyValue(bad); ok {
			t.Errorf("ParseKeyValue(%q) accepted", bad)
		}
	}
}

// FuzzParseKeyValue checks that parsing never panics and that whatever it
// accepts has the documented form and round-trips to the same id.
func FuzzParseKeyValue(f *testing.F) {
	f.Add(NewKeyValue(NewID(PrefixKey)))
	f.Add("bsk_01jd0000000000000000000000_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA000000")
	f.Add("")
	f.Add("bsk_")
	f.Fuzz(func(t *testing.T, v string) {
		id, ok := ParseKeyValue(v)
		if !ok {
			if id != "" {
				t.Fatalf("rejected value returned id %q", id)
			}
			return
		}
		if !keyValueForm.MatchString(v) {
			t.Fatalf("accepted %q, which is not of the documented form", v)
		}
		if !HasPrefix(id, PrefixKey) || !strings.HasPrefix(v, "bsk_"+strings.TrimPrefix(id, PrefixKey)+"_") {
			t.Fatalf("accepted %q with id %q", v, id)
		}
		body := v[:len(v)-keyChecksumLen]
		if keyChecksum(body) != v[len(v)-keyChecksumLen:] {
			t.Fatalf("accepted %q with a wrong checksum", v)
		}
	})
}

func TestScopes(t *testing.T) {
	if len(AllScopes) != 9 {
		t.Fatalf("%d scopes, want the nine of SPEC", len(AllScopes))
	}
	for _, s := range AllScopes {
		if !ValidScope(s) {
			t.Errorf("ValidScope(%s) = false", s)
		}
		// No scope implies another: a key with only s has only s.
		k := &APIKey{Scopes: []Scope{s}}
		for _, other := range AllScopes {
			if k.HasScope(other) != (other == s) {
				t.Errorf("key with %s: HasScope(%s) = %v", s, other, k.HasScope(other))
			}
		}
	}
	for _, bad := range []Scope{"", "status", "status:write", "STATUS:READ", "*", "admin"} {
		if ValidScope(bad) {
			t.Errorf("ValidScope(%q) = true", bad)
		}
	}
	if !slices.Equal(KeyExpiryDays, []int{30, 90, 180, 365}) {
		t.Errorf("KeyExpiryDays = %v", KeyExpiryDays)
	}
}

func TestKeyUsable(t *testing.T) {
	exp := At(t0.Add(time.Hour))
	rev := At(t0.Add(-time.Second))
	for _, tt := range []struct {
		name string
		key  APIKey
		at   time.Time
		want bool
	}{
		{"no expiry", APIKey{}, t0.Add(100 * 365 * 24 * time.Hour), true},
		{"before expiry", APIKey{ExpiresAt: &exp}, t0, true},
		{"at expiry", APIKey{ExpiresAt: &exp}, exp.Time, false},
		{"revoked", APIKey{RevokedAt: &rev}, t0, false},
	} {
		if got := tt.key.Usable(tt.at); got != tt.want {
			t.Errorf("%s: Usable = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestFingerprint(t *testing.T) {
	// SHA-256("abc") from FIPS 180-2.
	if got := Fingerprint("abc"); got != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Errorf("Fingerprint(abc) = %s", got)
	}
}

func TestNewID(t *testing.T) {
	prev := ""
	for range 1000 {
		id := NewID(PrefixJob)
		if !regexp.MustCompile(`^job_[0-9a-hjkmnp-tv-z]{26}$`).MatchString(id) {
			t.Fatalf("id %q", id)
		}
		// Ids sort by creation time: the first 9 characters (45 of the 48 bits of
		// milliseconds) never go back; within a millisecond the order is random.
		if prev != "" && id[:13] < prev[:13] {
			t.Fatalf("id %s sorts before the earlier %s", id, prev)
		}
		prev = id
	}
	if HasPrefix("job_", PrefixJob) || !HasPrefix(prev, PrefixJob) || HasPrefix(prev, PrefixKey) {
		t.Error("HasPrefix")
	}
}

func TestNewIDIncreasesWithinAMillisecond(t *testing.T) {
	prev := NewID(PrefixEvent)
	for i := 0; i < 10000; i++ {
		id := NewID(PrefixEvent)
		if id <= prev || len(id) != len(PrefixEvent)+26 {
			t.Fatalf("id %q after %q: want strictly increasing, 26 characters after the prefix", id, prev)
		}
		prev = id
	}
}
