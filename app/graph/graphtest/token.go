package graphtest

import (
	"net/http"
	"net/url"
	"strings"
	"time"
)

// AllRoles are the application permissions Backstop needs (CONTRACT §13);
// a Tenant with nil Roles has consented to all of them.
var AllRoles = []string{"User.Read.All", "Organization.Read.All", "MailboxSettings.Read", "Mail.ReadWrite", "Files.ReadWrite.All"}

// accessToken is an issued bearer token. Like a real access token it
// carries the roles consented when it was issued: SetRoles affects only
// tokens issued afterwards (v2-oauth2-client-creds-grant-flow.md: the
// "roles" claim is in the token).
type accessToken struct {
	roles   map[string]bool
	expires time.Time
}

// has reports whether the token carries one of the "|"-separated roles
// (a read accepts a read or a read-write permission, permissions
// reference).
func (t *accessToken) has(roles string) bool {
	for _, r := range strings.Split(roles, "|") {
		if t.roles[r] {
			return true
		}
	}
	return false
}

// SetRoles changes the consented application permissions (nil: all).
// Tokens already issued keep the roles they were issued with.
func (s *Server) SetRoles(roles ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if roles == nil {
		s.setRolesLocked(nil)
		return
	}
	s.setRolesLocked(roles)
}

func (s *Server) setRolesLocked(roles []string) {
	if roles == nil {
		roles = AllRoles
	}
	s.roles = map[string]bool{}
	for _, r := range roles {
		s.roles[r] = true
	}
}

// tokenError follows v2-oauth2-client-creds-grant-flow.md "Error
// response" and reference-error-codes.md.
func tokenError(status int, oauthErr string, code int, text, reqID string) answer {
	now := time.Now().UTC()
	corr := newID()
	desc := errorf("AADSTS%d: %s Trace ID: %s Correlation ID: %s Timestamp: %s",
		code, text, reqID, corr, now.Format("2006-01-02 15:04:05Z"))
	return jsonAnswer(status, map[string]any{
		"error":             oauthErr,
		"error_description": desc,
		"error_codes":       []int{code},
		"timestamp":         now.Format("2006-01-02 15:04:05Z"),
		"trace_id":          reqID,
		"correlation_id":    corr,
		"error_uri":         "https://login.microsoftonline.com/error?code=" + errorf("%d", code),
	})
}

// serveToken is POST /{tenant}/oauth2/v2.0/token with the client
// credentials grant (v2-oauth2-client-creds-grant-flow.md).
func (s *Server) serveToken(r *http.Request, body []byte, reqID string) answer {
	if r.Method != http.MethodPost {
		return tokenError(http.StatusMethodNotAllowed, "invalid_request", 900561, "The endpoint only accepts POST requests.", reqID)
	}
	tenant := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/"), "/oauth2/v2.0/token")
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return tokenError(http.StatusBadRequest, "invalid_request", 900144, "The request body must contain the following parameter: 'grant_type'.", reqID)
	}
	clientID, secret := form.Get("client_id"), form.Get("client_secret")
	// The secret may also come as HTTP Basic (client-creds-grant-flow.md).
	if u, p, ok := r.BasicAuth(); ok {
		clientID, secret = u, p
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tenant
	switch {
	case tenant != t.AzureTenantID:
		// reference-error-codes.md: AADSTS90002 InvalidTenantName.
		return tokenError(http.StatusBadRequest, "invalid_request", 90002,
			errorf("Tenant '%s' not found. Check to make sure you have the correct tenant ID and are signing into the correct cloud.", tenant), reqID)
	case form.Get("grant_type") != "client_credentials":
		return tokenError(http.StatusBadRequest, "unsupported_grant_type", 70003, "The app requested an unsupported grant type.", reqID)
	case clientID != t.ClientID:
		// AADSTS700016 UnauthorizedClient_DoesNotMatchRequest.
		return tokenError(http.StatusBadRequest, "unauthorized_client", 700016,
			errorf("Application with identifier '%s' was not found in the directory '%s'.", clientID, tenant), reqID)
	case form.Get("scope") == "":
		return tokenError(http.StatusBadRequest, "invalid_request", 90014, "The required field 'scope' is missing from the credential.", reqID)
	case !strings.HasSuffix(form.Get("scope"), "/.default"):
		// Client credentials only take the /.default scope.
		return tokenError(http.StatusBadRequest, "invalid_scope", 1002012, "The provided value for scope is not valid. Client credential flows must have a scope value with /.default suffixed to the resource identifier.", reqID)
	case secret != t.ClientSecret:
		// AADSTS7000215 InvalidClientSecretProvided (401 invalid_client as observed).
		return tokenError(http.StatusUnauthorized, "invalid_client", 7000215,
			errorf("Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID, for a secret added to app '%s'.", clientID), reqID)
	case t.SecretExpired:
		// AADSTS7000222 InvalidClientSecretExpiredKeysProvided.
		return tokenError(http.StatusUnauthorized, "invalid_client", 7000222,
			errorf("The provided client secret keys for app '%s' are expired. Visit the Azure portal to create new keys for your app.", clientID), reqID)
	}
	roles := map[string]bool{}
	for r := range s.roles {
		roles[r] = true
	}
	tok := randToken(24)
	s.tokens[tok] = &accessToken{roles: roles, expires: time.Now().Add(s.opt.TokenLifetime)}
	secs := int(s.opt.TokenLifetime / time.Second)
	return jsonAnswer(http.StatusOK, map[string]any{
		"token_type":     "Bearer",
		"expires_in":     secs,
		"ext_expires_in": secs,
		"access_token":   tok,
	})
}

// authenticate checks the bearer token of a Graph call
// (resolve-auth-errors: 401 InvalidAuthenticationToken).
func (s *Server) authenticate(c *call) (answer, bool) {
	if c.inBatch {
		return answer{}, true // the outer request was authenticated
	}
	h := c.header.Get("Authorization")
	if h == "" {
		return c.errAnswer(http.StatusUnauthorized, "InvalidAuthenticationToken", "Access token is empty."), false
	}
	raw, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		return c.errAnswer(http.StatusUnauthorized, "InvalidAuthenticationToken", "Access token validation failure. Invalid audience."), false
	}
	s.mu.Lock()
	tok := s.tokens[raw]
	s.mu.Unlock()
	if tok == nil {
		return c.errAnswer(http.StatusUnauthorized, "InvalidAuthenticationToken", "IDX14100: JWT is not well formed, there are no dots (.)."), false
	}
	if time.Now().After(tok.expires) {
		return c.errAnswer(http.StatusUnauthorized, "InvalidAuthenticationToken", "Lifetime validation failed, the token is expired."), false
	}
	c.token = tok
	return answer{}, true
}
