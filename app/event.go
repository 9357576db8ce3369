package app

import (
	"context"
	"time"
)

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
// deliveries and the event feed (GET /api/v1/events) reads it. An event is
// kept EventRetention after it was raised, and longer while a delivery
// refers to it.
type EventService interface {
	// PublishEvent stores an event outside any other change (test events).
	PublishEvent(ctx context.Context, e *Event) error
	// UndispatchedEvents returns up to limit events not yet fanned out, oldest first.
	UndispatchedEvents(ctx context.Context, limit int) ([]*StoredEvent, error)
	// EventFeed returns up to f.Limit events after f.After in the order they
	// were raised (oldest first), of f.TenantID's tenant or every tenant
	// when empty; webhook.test events are left out. An f.After that names
	// no event the filter can see (never raised, purged, another tenant's)
	// is ENOTFOUND.
	EventFeed(ctx context.Context, f EventFilter) ([]*StoredEvent, error)
}

// EventRetention is how long the outbox keeps an event for the feed, even
// when every webhook delivery of it has long ended.
const EventRetention = 30 * 24 * time.Hour

// EventFilter selects a page of the event feed.
type EventFilter struct {
	TenantID string // "" for every tenant
	After    string // evt_… id; "" from the oldest kept event
	Limit    int
}

// StoredEvent is an event as kept in the outbox: its envelope as JSON.
type StoredEvent struct {
	ID       string
	Type     string
	TenantID string
	Body     []byte // the exact JSON envelope sent to receivers
}
