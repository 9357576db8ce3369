// Package app is Backstop's domain: the entities (tenants, keys, endpoints,
// jobs, audit rows), the service interfaces that storage implements, and the
// rules that compute derived state (endpoint readiness, attention, version).
//
// It imports nothing of storage or HTTP. The store package implements the
// interfaces declared here; restapi and agentapi translate HTTP into calls on
// them. Subpackages hold the components with their own dependencies
// (connectors, webhooks, the update checker).
package app

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Error codes form the one error vocabulary of the program. restapi maps each
// to an HTTP status and problem+json body in a single table.
const (
	ECONFLICT       = "conflict"
	EINTERNAL       = "internal"
	EINVALID        = "validation_failed"
	ENOTFOUND       = "not_found"
	EUNAUTHORIZED   = "unauthorized"
	EFORBIDDEN      = "insufficient_scope"
	ETENANTREQUIRED = "tenant_required"
	ERATELIMITED    = "rate_limited"
	ENOTIMPLEMENTED = "not_implemented"
	EGONE           = "gone"
)

// Error is an application error with a stable code and a message safe to
// show to the caller. Field names the request field at fault, if any.
type Error struct {
	Code    string
	Message string
	Field   string
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("backstop: %s: %s (%s)", e.Code, e.Message, e.Field)
	}
	return fmt.Sprintf("backstop: %s: %s", e.Code, e.Message)
}

// Errorf returns an *Error with the given code and formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// FieldError returns a validation error naming the request field at fault.
func FieldError(field, format string, args ...any) *Error {
	return &Error{Code: EINVALID, Message: fmt.Sprintf(format, args...), Field: field}
}

// ErrorCode returns the code of an application error, EINTERNAL for any other
// non-nil error and "" for nil.
func ErrorCode(err error) string {
	var e *Error
	if err == nil {
		return ""
	} else if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the caller-safe message of an application error; other
// errors yield a generic message so internals never leak.
func ErrorMessage(err error) string {
	var e *Error
	if err == nil {
		return ""
	} else if errors.As(err, &e) {
		return e.Message
	}
	return "Internal error."
}

// NotFound is the one error for an absent resource or another tenant's: the
// caller must not be able to tell the two apart.
func NotFound(kind string) *Error {
	return &Error{Code: ENOTFOUND, Message: kind + " not found"}
}

// ID prefixes; every id is a prefix followed by a time-sortable random part.
const (
	PrefixTenant     = "tn_"
	PrefixEndpoint   = "ep_"
	PrefixJob        = "job_"
	PrefixProtected  = "po_"
	PrefixWebhook    = "wh_"
	PrefixDelivery   = "dl_"
	PrefixKey        = "key_"
	PrefixEvent      = "evt_"
	PrefixStorage    = "st_"
	PrefixUser       = "usr_"
	PrefixEnrollment = "enr_"
)

var idEncoding = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

// NewID returns prefix + 26 characters: 48 bits of millisecond time followed
// by 80 random bits, in lowercase Crockford base32, so ids sort by creation.
// Within one process ids are strictly increasing: an id made in the same
// millisecond as the previous one increments its random part (as monotonic
// ULIDs do), so events raised together keep their order.
func NewID(prefix string) string {
	idMu.Lock()
	defer idMu.Unlock()
	now := uint64(time.Now().UnixMilli())
	if now > idLastMs {
		idLastMs = now
		if _, err := rand.Read(idLastRand[:]); err != nil {
			panic(err) // crypto/rand never fails on supported platforms
		}
		idLastRand[0] &= 0x7f // headroom so increments never carry into the time
	} else {
		for i := len(idLastRand) - 1; i >= 0; i-- {
			if idLastRand[i]++; idLastRand[i] != 0 {
				break
			}
		}
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], idLastMs<<16)
	copy(b[6:], idLastRand[:])
	return prefix + idEncoding.EncodeToString(b[:])
}

var (
	idMu       sync.Mutex
	idLastMs   uint64
	idLastRand [10]byte
)

// HasPrefix reports whether id is of the kind named by prefix.
func HasPrefix(id, prefix string) bool {
	return strings.HasPrefix(id, prefix) && len(id) > len(prefix)
}

// Clock is the source of time for every rule that depends on it, injected so
// tests can move time (expiry, retries, silence).
type Clock func() time.Time

// SystemClock is the wall clock in UTC.
func SystemClock() time.Time { return time.Now().UTC() }

// Ptr returns a pointer to v; convenient for optional fields.
func Ptr[T any](v T) *T { return &v }
