package app

import "context"

// Event types integrators subscribe to through webhooks.
const (
	EventJobFailed       = "job.failed"
	EventJobCompleted    = "job.completed"
	EventVerifyCompleted = "verify.completed"
	EventWebhookTest     = "webhook.test"
)

// Event is the envelope of every webhook payload (CONTRACT §5).
type Event struct {
	ID        string `json:"id"` // evt_…
	Type      string `json:"type"`
	CreatedAt Time   `json:"createdAt"`
	TenantID  string `json:"tenantId"`
	Data      any    `json:"data"`
}

// EventService is the event outbox. An event is a row committed together
// with the state change that caused it (a job's end), so no event is lost
// between the two; the webhook dispatcher fans undispatched events out to
// deliveries. Events are kept as long as any delivery refers to them.
type EventService interface {
	// PublishEvent stores an event outside any other change (test events).
	PublishEvent(ctx context.Context, e *Event) error
	// UndispatchedEvents returns up to limit events not yet fanned out, oldest first.
	UndispatchedEvents(ctx context.Context, limit int) ([]*StoredEvent, error)
}

// StoredEvent is an event as kept in the outbox: its envelope as JSON.
type StoredEvent struct {
	ID       string
	Type     string
	TenantID string
	Body     []byte // the exact JSON envelope sent to receivers
}
