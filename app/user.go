package app

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/mail"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/argon2"
)

// User is a web-interface administrator. A user with an empty TenantID is a
// provider administrator and manages every tenant; otherwise the user sees
// only its own tenant.
type User struct {
	ID           string `json:"id"`
	Email        string `json:"email"`
	TenantID     string `json:"tenantId,omitempty"`
	PasswordHash string `json:"-"`
	CreatedAt    Time   `json:"createdAt"`
}

// IsProvider reports whether the user manages every tenant.
func (u *User) IsProvider() bool { return u.TenantID == "" }

// Session is a signed-in browser. Only the SHA-256 of its id is stored.
type Session struct {
	IDHash    string
	UserID    string
	CSRFToken string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// UserService stores administrators and their sessions.
type UserService interface {
	CreateUser(ctx context.Context, u *User) error
	User(ctx context.Context, id string) (*User, error)
	UserByEmail(ctx context.Context, email string) (*User, error)
	CountUsers(ctx context.Context) (int, error)

	CreateSession(ctx context.Context, s *Session) error
	// SessionByIDHash returns the session with that id hash, expired or not.
	SessionByIDHash(ctx context.Context, idHash string) (*Session, error)
	DeleteSession(ctx context.Context, idHash string) error
	DeleteExpiredSessions(ctx context.Context, now time.Time) error
}

// NormalizeEmail lower-cases and validates an e-mail address.
func NormalizeEmail(email string) (string, error) {
	a, err := mail.ParseAddress(strings.TrimSpace(email))
	if err != nil || a.Name != "" || len(a.Address) > 254 {
		return "", FieldError("email", "email must be a plain e-mail address")
	}
	return strings.ToLower(a.Address), nil
}

// ValidatePassword enforces the password policy for administrators.
func ValidatePassword(pw string) error {
	if len(pw) < 12 {
		return FieldError("password", "password must be at least 12 characters")
	}
	if len(pw) > 1024 {
		return FieldError("password", "password must be at most 1024 characters")
	}
	return nil
}

// Argon2id parameters (RFC 9106 second recommended option, lighter memory
// so a small appliance can take a burst of sign-ins).
const (
	argonTime    = 3
	argonMemory  = 64 * 1024
	argonThreads = 2
	argonKeyLen  = 32
)

// HashPassword returns an encoded argon2id hash in the PHC string format.
func HashPassword(pw string) string {
	salt := []byte(RandomToken(16))
	sum := argon2.IDKey([]byte(pw), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	enc := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads,
		enc.EncodeToString(salt), enc.EncodeToString(sum))
}

// CheckPassword reports whether pw matches an encoded argon2id hash, in
// constant time with respect to the hash contents.
func CheckPassword(encoded, pw string) bool {
	var version, mem, t int
	var threads uint8
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false
	}
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return false
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &mem, &t, &threads); err != nil {
		return false
	}
	// A damaged or hostile stored hash must fail closed: argon2 panics on a
	// zero time or parallelism, and m or t from the string could ask for
	// terabytes of memory or hours of work.
	if t < 1 || t > 16 || threads < 1 || mem < 8*int(threads) || mem > 1<<20 {
		return false
	}
	enc := base64.RawStdEncoding
	salt, err1 := enc.DecodeString(parts[4])
	want, err2 := enc.DecodeString(parts[5])
	if err1 != nil || err2 != nil || len(want) < 16 || len(want) > 64 {
		return false
	}
	got := argon2.IDKey([]byte(pw), salt, uint32(t), uint32(mem), threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1
}

// DummyPasswordHash is checked against when the account does not exist, so
// that a sign-in takes the same time whether or not the e-mail is known.
// It is computed on first use to keep start-up fast.
var DummyPasswordHash = sync.OnceValue(func() string { return HashPassword("backstop-dummy-password") })
