package m365

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strings"

	"backstop/app"
	"backstop/app/graph"
)

// Failure codes of the engine (app/failure_codes.go, failure_codes_graph.go).
const (
	CodeAuthFailed         = "graph.auth_failed"
	CodeConsentMissing     = "graph.consent_missing"
	CodeThrottled          = "graph.throttled"
	CodeMailboxUnavailable = "graph.mailbox_unavailable"
	CodeQuotaExceeded      = "graph.quota_exceeded"
	CodeHashMismatch       = "graph.hash_mismatch"
)

// Permissions each kind of request needs, for graph.consent_missing.
const (
	permOrganization = "Organization.Read.All"
	permUsers        = "User.Read.All"
	permMailbox      = "MailboxSettings.Read"
	permMail         = "Mail.ReadWrite"
	permFiles        = "Files.ReadWrite.All"
)

// errContext says what a request was about, so one function can name the
// cause of any Graph error.
type errContext struct {
	permission string // the permission the endpoint needs
	mailbox    string // the user whose mailbox or drive it was ("" for the directory)
	restore    bool   // writes: quota errors are the destination's
}

// failure maps err to the *app.FailureError the job reports. Errors that
// are already failures (the store's, say) and context errors pass through;
// a Graph error with no specific meaning comes back as it is.
func failure(c *graph.Client, ec errContext, err error) error {
	if err == nil {
		return nil
	}
	var fe *app.FailureError
	if errors.As(err, &fe) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	tenant, clientID, loginURL := "", "", graph.DefaultLoginURL
	if c != nil {
		tenant, clientID, loginURL = c.AzureTenantID(), c.ClientID(), c.LoginURL()
	}
	var ae *graph.AuthError
	if errors.As(err, &ae) {
		return app.Fail(CodeAuthFailed, map[string]any{"azureTenantId": tenant, "clientId": clientID, "reason": ae.Reason()}, err)
	}
	var ge *graph.Error
	if !errors.As(err, &ge) {
		return err
	}
	switch {
	case ge.HasCode("Authorization_RequestDenied") || ge.HasCode("ErrorAccessDenied") ||
		(ge.Status == http.StatusForbidden && ge.HasCode("accessDenied")):
		perm := ec.permission
		if perm == "" {
			perm = strings.Join(Permissions, ", ")
		}
		return app.Fail(CodeConsentMissing, map[string]any{"permission": perm, "azureTenantId": tenant,
			"consentUrl": ConsentURL(loginURL, tenant, clientID)}, err)
	case ge.Status == http.StatusUnauthorized || ge.HasCode("InvalidAuthenticationToken"):
		return app.Fail(CodeAuthFailed, map[string]any{"azureTenantId": tenant, "clientId": clientID, "reason": "token refused by Graph"}, err)
	case ge.Status == http.StatusTooManyRequests || ge.Status == http.StatusServiceUnavailable || ge.HasCode("ApplicationThrottled"):
		secs := int(math.Ceil(ge.RetryAfter.Seconds()))
		return app.Fail(CodeThrottled, map[string]any{"retryAfterSeconds": secs, "mailbox": ec.mailbox}, err)
	case ge.HasCode("ErrorQuotaExceeded") || ge.Status == http.StatusInsufficientStorage || (ec.restore && ge.HasCode("quotaLimitReached")):
		return app.Fail(CodeQuotaExceeded, map[string]any{"mailbox": ec.mailbox}, err)
	case ge.HasCode("MailboxNotEnabledForRESTAPI") || ge.HasCode("MailboxNotFound") || ge.HasCode("ResourceNotFound") ||
		(ge.Status == http.StatusNotFound && ec.mailbox != ""):
		return app.Fail(CodeMailboxUnavailable, map[string]any{"mailbox": ec.mailbox}, err)
	}
	return err
}

// mailboxWide reports whether a failure stops the whole mailbox or drive
// (rather than one item): auth, consent, throttling beyond the client's
// patience, the mailbox gone, the store failing, the job cancelled.
func mailboxWide(err error) bool {
	var fe *app.FailureError
	if errors.As(err, &fe) {
		return fe.Code != CodeHashMismatch
	}
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// itemGone reports a message or file deleted since it was listed.
func itemGone(err error) bool {
	return graph.StatusOf(err) == http.StatusNotFound || graph.IsCode(err, "ErrorItemNotFound", "itemNotFound")
}

// invalidDelta reports an expired or invalid delta token.
func invalidDelta(err error) bool {
	return graph.StatusOf(err) == http.StatusGone ||
		graph.IsCode(err, "syncStateNotFound", "resyncRequired", "SyncStateInvalid",
			"resyncChangesApplyDifferences", "resyncChangesUploadDifferences")
}

// Check fetches a token (a refused client is an *graph.AuthError; the
// caller answers 422 source_auth_failed with its Reason) and reads
// /subscribedSkus once, so missing consent shows at creation as
// graph.consent_missing.
func Check(ctx context.Context, c *graph.Client) error {
	if _, err := c.Token(ctx); err != nil {
		return failure(c, errContext{}, err)
	}
	if _, err := c.SubscribedSkus(ctx); err != nil {
		return failure(c, errContext{permission: permOrganization}, err)
	}
	return nil
}

// MailFailure names the cause of a Graph error met reading userID's mail
// (graph.consent_missing, graph.auth_failed, graph.throttled,
// graph.mailbox_unavailable, …), as backups report it: for the archive's
// capture pollers.
func MailFailure(c *graph.Client, userID string, err error) error {
	return failure(c, errContext{permission: permMail, mailbox: userID}, err)
}
