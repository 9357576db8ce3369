package app

import (
	"errors"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

// Failure categories (CONTRACT §4).
const (
	CategoryAuth          = "auth"
	CategoryPermission    = "permission"
	CategoryThrottling    = "throttling"
	CategoryNetwork       = "network"
	CategorySource        = "source"
	CategoryStorage       = "storage"
	CategoryIntegrity     = "integrity"
	CategoryAgent         = "agent"
	CategoryConfiguration = "configuration"
	CategoryInternal      = "internal"
)

// FailureCategories lists every category in documentation order.
var FailureCategories = []string{CategoryAuth, CategoryPermission, CategoryThrottling, CategoryNetwork, CategorySource,
	CategoryStorage, CategoryIntegrity, CategoryAgent, CategoryConfiguration, CategoryInternal}

// Automatic retry states of a failure.
const (
	RetryNone      = "none"      // no automatic retry: the cause is not transient
	RetryScheduled = "scheduled" // a retry job is queued for nextAt
	RetryExhausted = "exhausted" // transient, but every attempt was used
)

// Failure explains why a job or an item failed, in terms a PSA can map to a
// ticket: a stable code from the catalogue, its category and flags, the
// parameters of this occurrence, redacted technical details, and the fix.
type Failure struct {
	Code       string         `json:"code" doc:"Stable cause code; see GET /api/v1/failure-codes."`
	Category   string         `json:"category" enum:"auth,permission,throttling,network,source,storage,integrity,agent,configuration,internal"`
	Transient  bool           `json:"transient" doc:"True when waiting alone may help."`
	Retryable  bool           `json:"retryable" doc:"True when a manual retry makes sense."`
	Params     map[string]any `json:"params" doc:"Parameters of the cause, e.g. host, permission, retryAfterSeconds."`
	Details    string         `json:"details" doc:"Redacted technical details for a support case: no secrets, tokens, passwords or message bodies."`
	OccurredAt Time           `json:"occurredAt"`
	Step       string         `json:"step" doc:"The step the run was in, e.g. connect, list, download, upload, verify."`
	Retry      FailureRetry   `json:"retry"`
	FixSteps   []string       `json:"fixSteps" doc:"Ordered steps to fix the cause."`
	DocsURL    string         `json:"docsUrl"`
}

// FailureRetry is the state of the automatic retry of a failed job.
type FailureRetry struct {
	State       string `json:"state" enum:"none,scheduled,exhausted"`
	Attempt     int    `json:"attempt" doc:"The attempt that failed, from 1."`
	MaxAttempts int    `json:"maxAttempts"`
	NextAt      *Time  `json:"nextAt" doc:"When the retry job becomes due; null unless scheduled."`
}

// FailureError is an error carrying a cause code, returned by the code that
// runs a job (connectors, the agent report) so the runner can build the
// job's Failure. Err is the underlying error; its text becomes the redacted
// details.
type FailureError struct {
	Code   string
	Params map[string]any
	Step   string
	Err    error
}

func (e *FailureError) Error() string {
	if e.Err != nil {
		return e.Code + ": " + e.Err.Error()
	}
	return e.Code
}

func (e *FailureError) Unwrap() error { return e.Err }

// Fail returns a FailureError for code; params and err may be nil.
func Fail(code string, params map[string]any, err error) *FailureError {
	return &FailureError{Code: code, Params: params, Err: err}
}

// FailureFrom builds the Failure for err: the code of a FailureError in the
// chain (an unknown code becomes "unknown"), else "unknown". Details are the
// redacted error text; secret-looking params are redacted. The retry state
// is RetryNone; the runner fills it in.
func FailureFrom(err error, step string, at time.Time) *Failure {
	fe := &FailureError{Code: CodeUnknown}
	if !errors.As(err, &fe) {
		fe = &FailureError{Code: CodeUnknown, Err: err}
	}
	if fe.Step != "" {
		step = fe.Step
	}
	details := ""
	if err != nil {
		details = err.Error()
	}
	return NewFailure(fe.Code, fe.Params, details, step, at)
}

// NewFailure builds a Failure for code from the catalogue. An unknown code
// becomes CodeUnknown with the original code kept in params.originalCode.
// Fix steps have their {param} placeholders filled from params.
func NewFailure(code string, params map[string]any, details, step string, at time.Time) *Failure {
	c, ok := LookupFailureCode(code)
	p := RedactParams(params)
	if !ok {
		p["originalCode"] = RedactText(code)
		c, _ = LookupFailureCode(CodeUnknown)
	}
	f := &Failure{
		Code: c.Code, Category: c.Category, Transient: c.Transient, Retryable: c.Retryable, Params: p,
		Details: RedactText(details), OccurredAt: At(at), Step: step, DocsURL: c.DocsURL,
		Retry: FailureRetry{State: RetryNone, Attempt: 1, MaxAttempts: 1},
	}
	for _, s := range c.FixSteps {
		f.FixSteps = append(f.FixSteps, fillParams(s, c.Params, p))
	}
	return f
}

var placeholder = regexp.MustCompile(`\{([a-zA-Z]+)\}`)

// fillParams replaces {name} for each documented parameter with its value,
// or with a readable "the <name>" when the occurrence did not report it.
// Other braces (a literal path such as /endpoints/{id}) stay as written.
func fillParams(s string, documented []FailureParam, p map[string]any) string {
	return placeholder.ReplaceAllStringFunc(s, func(m string) string {
		name := m[1 : len(m)-1]
		if !slices.ContainsFunc(documented, func(d FailureParam) bool { return d.Name == name }) {
			return m
		}
		if v, ok := p[name]; ok && v != nil && v != "" {
			return toText(v)
		}
		return "the " + name
	})
}

// maxDetails bounds the details kept for a failure: enough for a support
// case, never a whole response or message.
const maxDetails = 2048

var (
	// secretAssign matches key=value / key: value pairs whose key names a secret.
	secretAssign = regexp.MustCompile(`(?i)\b((?:client[_-]?)?secret|password|passwd|pwd|pass|token|access[_-]?token|refresh[_-]?token|api[_-]?key|apikey|authorization|cookie|set-cookie|code|sig|signature)(["']?\s*[=:]\s*)("[^"]*"|'[^']*'|(?:bearer|basic)\s+\S+|[^\s&,;"']+)`)
	// bearer matches an Authorization scheme followed by a credential.
	bearer = regexp.MustCompile(`(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}`)
	// urlUserinfo matches credentials embedded in a URL.
	urlUserinfo = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://)[^/\s:@]+:[^/\s@]+@`)
	// apiKeyValue matches Backstop key values.
	apiKeyValue = regexp.MustCompile(`\bbsk_[A-Za-z0-9_]+`)
	// jwt matches JSON Web Tokens.
	jwt = regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*`)
	// longToken matches long opaque strings (keys, hashes of secrets, SAS signatures).
	longToken = regexp.MustCompile(`\b[A-Za-z0-9+/_-]{40,}={0,2}`)
	// imapLogin matches an IMAP LOGIN command with its arguments.
	imapLogin = regexp.MustCompile(`(?i)\b(LOGIN|AUTHENTICATE\s+\S+)\s+.*`)
)

// RedactText removes what must never reach a failure's details or a log:
// credentials in key=value form, Authorization values, URL userinfo, API key
// values, JWTs, long opaque tokens, IMAP LOGIN arguments, and anything after
// a blank line (a message body or an HTTP body follows headers there). The
// result is at most 2 KiB. SHA-256 hex digests (64 hex characters) are kept:
// they identify content without revealing it and verify failures need them.
func RedactText(s string) string {
	if i := strings.Index(s, "\r\n\r\n"); i >= 0 {
		s = s[:i] + " [body redacted]"
	} else if i := strings.Index(s, "\n\n"); i >= 0 {
		s = s[:i] + " [body redacted]"
	}
	s = urlUserinfo.ReplaceAllString(s, "${1}[redacted]@")
	s = bearer.ReplaceAllString(s, "$1 [redacted]")
	s = secretAssign.ReplaceAllString(s, "$1$2[redacted]")
	s = apiKeyValue.ReplaceAllString(s, "[redacted]")
	s = jwt.ReplaceAllString(s, "[redacted]")
	s = imapLogin.ReplaceAllString(s, "$1 [redacted]")
	s = longToken.ReplaceAllStringFunc(s, func(m string) string {
		if len(m) == 64 && strings.Trim(strings.ToLower(m), "0123456789abcdef") == "" {
			return m
		}
		return "[redacted]"
	})
	if len(s) > maxDetails {
		s = s[:maxDetails] + "…"
	}
	return s
}

// secretParam reports whether a parameter name denotes a secret or content.
func secretParam(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"secret", "password", "passwd", "token", "authorization", "cookie", "apikey", "api_key", "body", "content", "credential"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// RedactParams returns a copy of params with secret-looking entries replaced
// by "[redacted]" and string values passed through RedactText. It never
// returns nil, so the wire form is always an object.
func RedactParams(params map[string]any) map[string]any {
	out := make(map[string]any, len(params))
	for k, v := range params {
		switch {
		case secretParam(k):
			out[k] = "[redacted]"
		default:
			if s, ok := v.(string); ok {
				v = RedactText(s)
			}
			out[k] = v
		}
	}
	return out
}

// ItemCause counts the failed items of a job with one cause.
type ItemCause struct {
	Code     string `json:"code"`
	Category string `json:"category"`
	Count    int    `json:"count"`
}

// MaxItemCauses is the number of itemCauses a finished job carries (SPEC).
const MaxItemCauses = 3

// TopItemCauses returns the causes of groups, most frequent first (ties by
// code), at most MaxItemCauses.
func TopItemCauses(groups []FailureGroup) []ItemCause {
	g := slices.Clone(groups)
	sort.SliceStable(g, func(i, j int) bool {
		if g[i].Count != g[j].Count {
			return g[i].Count > g[j].Count
		}
		return g[i].Code < g[j].Code
	})
	out := []ItemCause{}
	for _, x := range g {
		if len(out) == MaxItemCauses {
			break
		}
		c, _ := LookupFailureCode(x.Code)
		out = append(out, ItemCause{Code: x.Code, Category: c.Category, Count: x.Count})
	}
	return out
}
