package resticrepo

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"

	"backstop/app"
)

// EndpointAuthenticator checks credentials against the stored endpoints:
// the secret's SHA-256 must equal the endpoint's SecretFingerprint
// (compared in constant time) and the endpoint must be active. It reads the
// endpoint on every request, so a revocation acts on the next one.
type EndpointAuthenticator struct {
	Endpoints app.EndpointService
}

var _ Authenticator = EndpointAuthenticator{}

// errBadCredentials is the one refusal for an unknown endpoint, a wrong
// secret and a revoked endpoint: the caller cannot tell them apart.
var errBadCredentials = app.Errorf(app.EUNAUTHORIZED, "invalid endpoint credentials")

// Authenticate implements Authenticator.
func (a EndpointAuthenticator) Authenticate(ctx context.Context, endpointID, secret string) error {
	e, err := a.Endpoints.Endpoint(ctx, endpointID)
	if app.ErrorCode(err) == app.ENOTFOUND {
		return errBadCredentials
	} else if err != nil {
		return err
	}
	want, err := hex.DecodeString(e.SecretFingerprint)
	got := sha256.Sum256([]byte(secret))
	if err != nil || subtle.ConstantTimeCompare(got[:], want) != 1 || e.Status != app.EndpointActive {
		return errBadCredentials
	}
	return nil
}
