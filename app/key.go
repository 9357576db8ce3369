package app

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"hash/crc32"
	"math/big"
	"slices"
	"strings"
	"time"
)

// Scope is a permission carried by an API key. No scope implies another.
type Scope string

// The nine scopes of SPEC "Authentication".
const (
	ScopeStatusRead     Scope = "status:read"
	ScopeJobsRead       Scope = "jobs:read"
	ScopeItemsRead      Scope = "items:read"
	ScopeUsersRead      Scope = "users:read"
	ScopeArchiveRead    Scope = "archive:read"
	ScopeRestoreWrite   Scope = "restore:write"
	ScopeVerifyWrite    Scope = "verify:write"
	ScopeUsersWrite     Scope = "users:write"
	ScopeWebhooksManage Scope = "webhooks:manage"
)

// AllScopes lists every scope in documentation order.
var AllScopes = []Scope{
	ScopeStatusRead, ScopeJobsRead, ScopeItemsRead, ScopeUsersRead, ScopeArchiveRead,
	ScopeRestoreWrite, ScopeVerifyWrite, ScopeUsersWrite, ScopeWebhooksManage,
}

// ValidScope reports whether s is one of AllScopes.
func ValidScope(s Scope) bool { return slices.Contains(AllScopes, s) }

// KeyExpiryDays are the allowed expiries; 0 stands for "none".
var KeyExpiryDays = []int{30, 90, 180, 365}

// APIKey is an integration credential. Its secret value is never stored:
// only its SHA-256 fingerprint.
type APIKey struct {
	ID          string  `json:"id"`
	TenantID    string  `json:"tenantId,omitempty"` // empty for provider keys
	Name        string  `json:"name"`
	Provider    bool    `json:"provider"`
	Scopes      []Scope `json:"scopes"`
	Fingerprint string  `json:"fingerprint"` // hex SHA-256 of the value
	CreatedAt   Time    `json:"createdAt"`
	CreatedBy   string  `json:"createdBy,omitempty"`
	ExpiresAt   *Time   `json:"expiresAt"`
	RevokedAt   *Time   `json:"revokedAt"`
	LastUsedAt  *Time   `json:"lastUsedAt"`
}

// HasScope reports whether the key carries s.
func (k *APIKey) HasScope(s Scope) bool { return slices.Contains(k.Scopes, s) }

// Usable reports whether the key authenticates at time now.
func (k *APIKey) Usable(now time.Time) bool {
	return k.RevokedAt == nil && (k.ExpiresAt == nil || now.Before(k.ExpiresAt.Time))
}

// KeyFilter selects keys for listing.
type KeyFilter struct {
	TenantID *string // nil: all; pointer to "" selects provider keys only
	BeforeID string  // cursor: keys with a smaller id (the list is newest first)
	Limit    int     // 0 means no limit
}

// KeyService stores API keys.
type KeyService interface {
	CreateKey(ctx context.Context, k *APIKey) error
	Key(ctx context.Context, id string) (*APIKey, error)
	Keys(ctx context.Context, f KeyFilter) ([]*APIKey, error)
	// RevokeKey marks the key revoked at the given time. Revoking a revoked
	// key is not an error and keeps the first revocation time.
	RevokeKey(ctx context.Context, id string, at time.Time) error
	// TouchKey records a use; implementations may coalesce frequent updates.
	TouchKey(ctx context.Context, id string, at time.Time) error
}

// Key value format: bsk_<keyid>_<secret><checksum>
//
//	keyid    the key's id without its "key_" prefix (26 base32 characters)
//	secret   32 base62 characters (190 bits) from crypto/rand
//	checksum 6 base62 characters of the CRC-32 of everything before it
//
// The checksum lets a client, a secret scanner or the server reject a typo or
// a truncated key without a database lookup.
const (
	keyValuePrefix = "bsk_"
	keySecretLen   = 32
	keyChecksumLen = 6
	base62         = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
)

// NewKeyValue returns a fresh key value for the key id (with its prefix).
func NewKeyValue(keyID string) string {
	body := keyValuePrefix + strings.TrimPrefix(keyID, PrefixKey) + "_" + randomBase62(keySecretLen)
	return body + keyChecksum(body)
}

// ParseKeyValue checks the form and checksum of a presented key value and
// returns the key id (with its "key_" prefix). It does no lookup.
func ParseKeyValue(v string) (keyID string, ok bool) {
	if len(v) > 128 || !strings.HasPrefix(v, keyValuePrefix) {
		return "", false
	}
	rest := v[len(keyValuePrefix):]
	i := strings.IndexByte(rest, '_')
	if i != 26 || len(rest)-i-1 != keySecretLen+keyChecksumLen {
		return "", false
	}
	id := rest[:i]
	for _, c := range id {
		if !strings.ContainsRune("0123456789abcdefghjkmnpqrstvwxyz", c) {
			return "", false
		}
	}
	body, sum := v[:len(v)-keyChecksumLen], v[len(v)-keyChecksumLen:]
	for _, c := range body[len(keyValuePrefix)+27:] {
		if !strings.ContainsRune(base62, c) {
			return "", false
		}
	}
	if keyChecksum(body) != sum {
		return "", false
	}
	return PrefixKey + id, true
}

// Fingerprint returns the stored form of a secret: hex SHA-256.
func Fingerprint(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

func keyChecksum(body string) string {
	s := big.NewInt(int64(crc32.ChecksumIEEE([]byte(body)))).Text(62) // at most 6 digits
	return strings.Repeat("0", keyChecksumLen-len(s)) + s
}

func randomBase62(n int) string {
	b := make([]byte, n)
	max := big.NewInt(62)
	for i := range b {
		r, err := rand.Int(rand.Reader, max)
		if err != nil {
			panic(err)
		}
		b[i] = base62[r.Int64()]
	}
	return string(b)
}

// RandomToken returns n base62 characters from crypto/rand, for one-time
// tokens, session ids and secrets.
func RandomToken(n int) string { return randomBase62(n) }
