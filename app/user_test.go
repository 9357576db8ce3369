package app

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/argon2"
)

func TestPasswordHashing(t *testing.T) {
	h := HashPassword("correct horse battery")
	if !strings.HasPrefix(h, "$argon2id$v=19$m=65536,t=3,p=2$") {
		t.Fatalf("hash %q is not argon2id in PHC form with the documented parameters", h)
	}
	if strings.Contains(h, "correct horse") {
		t.Fatal("hash contains the password")
	}
	if !CheckPassword(h, "correct horse battery") {
		t.Error("right password rejected")
	}
	if CheckPassword(h, "correct horse batter") {
		t.Error("wrong password accepted")
	}
	// Near misses against a cheap hash of the same form (argon2 at
	// production cost is slow under the race detector).
	salt := []byte("0123456789abcdef")
	enc := base64.RawStdEncoding
	cheap := fmt.Sprintf("$argon2id$v=19$m=8,t=1,p=1$%s$%s", enc.EncodeToString(salt),
		enc.EncodeToString(argon2.IDKey([]byte("correct horse battery"), salt, 1, 8, 1, 32)))
	if !CheckPassword(cheap, "correct horse battery") {
		t.Error("right password rejected (cheap hash)")
	}
	for _, wrong := range []string{"", "Correct horse battery", "correct horse battery ", "correct horse battery\x00"} {
		if CheckPassword(cheap, wrong) {
			t.Errorf("wrong password %q accepted", wrong)
		}
	}
	if h2 := HashPassword("correct horse battery"); h2 == h {
		t.Error("two hashes of one password are equal: the salt is not random")
	}
}

func TestCheckPasswordMalformedHash(t *testing.T) {
	// A damaged stored hash must fail closed, never panic (argon2 panics on
	// zero time or parallelism) and never take unbounded memory.
	good := HashPassword("a password of sufficient length")
	parts := strings.Split(good, "$")
	for _, h := range []string{
		"", "plain", "$argon2i$v=19$m=65536,t=3,p=2$c2FsdA$aGFzaA",
		"$argon2id$v=18$m=65536,t=3,p=2$" + parts[4] + "$" + parts[5],
		"$argon2id$v=19$m=65536,t=0,p=2$" + parts[4] + "$" + parts[5],
		"$argon2id$v=19$m=65536,t=3,p=0$" + parts[4] + "$" + parts[5],
		"$argon2id$v=19$m=0,t=3,p=2$" + parts[4] + "$" + parts[5],
		"$argon2id$v=19$m=4294967295,t=3,p=2$" + parts[4] + "$" + parts[5],
		"$argon2id$v=19$m=65536,t=4294967295,p=2$" + parts[4] + "$" + parts[5],
		"$argon2id$v=19$m=65536,t=3,p=2$!!!$" + parts[5],
		"$argon2id$v=19$m=65536,t=3,p=2$" + parts[4] + "$",
	} {
		if CheckPassword(h, "a password of sufficient length") {
			t.Errorf("CheckPassword accepted malformed hash %q", h)
		}
	}
}

func TestValidatePasswordAndEmail(t *testing.T) {
	if err := ValidatePassword(strings.Repeat("x", 11)); ErrorCode(err) != EINVALID {
		t.Errorf("11 characters: %v", err)
	}
	if err := ValidatePassword(strings.Repeat("x", 12)); err != nil {
		t.Errorf("12 characters: %v", err)
	}
	if err := ValidatePassword(strings.Repeat("x", 1025)); ErrorCode(err) != EINVALID {
		t.Errorf("1025 characters: %v", err)
	}
	if got, err := NormalizeEmail("  Admin@Example.COM "); err != nil || got != "admin@example.com" {
		t.Errorf("NormalizeEmail = %q, %v", got, err)
	}
	for _, bad := range []string{"", "admin", "Admin <admin@example.com>", "a@b@c", strings.Repeat("a", 250) + "@x.io"} {
		if _, err := NormalizeEmail(bad); ErrorCode(err) != EINVALID {
			t.Errorf("NormalizeEmail(%q) = %v", bad, err)
		}
	}
}

func TestErrorVocabulary(t *testing.T) {
	if ErrorCode(nil) != "" || ErrorMessage(nil) != "" {
		t.Error("nil error has a code or message")
	}
	plain := errors.New("disk on fire")
	if ErrorCode(plain) != EINTERNAL || ErrorMessage(plain) != "Internal error." {
		t.Errorf("plain error: %s / %s", ErrorCode(plain), ErrorMessage(plain))
	}
	nf := NotFound("endpoint")
	if ErrorCode(nf) != ENOTFOUND || ErrorMessage(nf) != "endpoint not found" {
		t.Errorf("NotFound: %v", nf)
	}
	fe := FieldError("name", "bad %s", "name")
	if fe.Field != "name" || ErrorCode(fe) != EINVALID || !strings.Contains(fe.Error(), "(name)") {
		t.Errorf("FieldError: %v", fe)
	}
}

func TestEnrollmentTokenRecord(t *testing.T) {
	v, rec := NewEnrollmentToken("tn_1", ProfileClient, t0)
	if !strings.HasPrefix(v, "bse_") || len(v) != 44 {
		t.Errorf("token %q", v)
	}
	if rec.TokenHash != Fingerprint(v) || strings.Contains(rec.TokenHash, v) {
		t.Error("record does not hold only the token's fingerprint")
	}
	if !rec.ExpiresAt.Equal(t0.Add(7*24*time.Hour)) || rec.TenantID != "tn_1" || rec.Profile != ProfileClient {
		t.Errorf("record %+v", rec)
	}
}
