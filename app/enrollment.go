package app

import (
	"context"
	"time"
)

// EnrollmentToken lets one agent enroll once. Only the SHA-256 of the token
// is stored; the token itself is shown once at creation.
type EnrollmentToken struct {
	ID         string
	TenantID   string
	Profile    string
	TokenHash  string
	EndpointID string // pre-created endpoint the token enrolls as, if any
	CreatedAt  time.Time
	ExpiresAt  time.Time
	UsedAt     *time.Time
}

// EnrollmentTokenTTL is how long a token stays usable by default.
const EnrollmentTokenTTL = 7 * 24 * time.Hour

// EnrollmentService stores enrollment tokens.
type EnrollmentService interface {
	CreateEnrollmentToken(ctx context.Context, t *EnrollmentToken) error
	// ConsumeEnrollmentToken marks the token with that hash used at now and
	// returns it. It fails with EUNAUTHORIZED when the token is unknown,
	// expired or already used; exactly one caller can consume a token.
	ConsumeEnrollmentToken(ctx context.Context, tokenHash string, now time.Time) (*EnrollmentToken, error)
}

// NewEnrollmentToken returns a token value and its stored record.
func NewEnrollmentToken(tenantID, profile string, now time.Time) (string, *EnrollmentToken) {
	value := "bse_" + RandomToken(40)
	return value, &EnrollmentToken{
		ID: NewID(PrefixEnrollment), TenantID: tenantID, Profile: profile, TokenHash: Fingerprint(value),
		CreatedAt: now, ExpiresAt: now.Add(EnrollmentTokenTTL),
	}
}
