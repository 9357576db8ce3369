package app

import (
	"context"
	"slices"
	"time"
)

// EWEBHOOKREFUSED is the code of a webhook target whose address lies in a
// refused network range (CONTRACT §5); answered 422 like other validation.
const EWEBHOOKREFUSED = "webhook_target_refused"

// SubscribableEvents are the event types a webhook can choose. The test
// event (EventWebhookTest) is sent on request whatever a webhook chose.
var SubscribableEvents = []string{EventJobFailed, EventJobCompleted, EventVerifyCompleted}

// Delivery states.
const (
	DeliveryPending   = "pending"
	DeliveryDelivered = "delivered"
	DeliveryFailed    = "failed"
	DeliveryGone      = "gone"
)

// RetrySchedule is the wait after each failed attempt (SPEC "Events"): an
// attempt that fails is retried after RetrySchedule[n-1], where n is its
// number; when attempt len(RetrySchedule)+1 fails the delivery is failed.
var RetrySchedule = []time.Duration{
	time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour,
}

// MaxDeliveryAttempts is the number of attempts before a delivery fails.
var MaxDeliveryAttempts = len(RetrySchedule) + 1

// DeliveryRetention is how long a finished delivery and its attempts are kept.
const DeliveryRetention = 30 * 24 * time.Hour

// SecretOverlap is how long the previous secret keeps signing after a rotation.
const SecretOverlap = 24 * time.Hour

// Webhook is a tenant's registered receiver. The signing secret is never
// part of it in the clear: storage holds it sealed (see app/webhooks), and
// the API shows the plain secret once, on creation and rotation.
type Webhook struct {
	ID          string   `json:"id"`
	TenantID    string   `json:"tenantId"`
	URL         string   `json:"url"`
	Events      []string `json:"events"`
	Description string   `json:"description"`
	Enabled     bool     `json:"enabled"`
	CreatedAt   Time     `json:"createdAt"`
	UpdatedAt   Time     `json:"updatedAt"`

	// SealedSecret is the current signing secret, encrypted at rest.
	SealedSecret []byte `json:"-"`
	// SealedPrevious is the secret replaced by the last rotation; it keeps
	// signing (beside the current one) until PreviousUntil.
	SealedPrevious []byte     `json:"-"`
	PreviousUntil  *time.Time `json:"-"`
}

// Subscribes reports whether the webhook wants events of the type.
func (w *Webhook) Subscribes(eventType string) bool { return slices.Contains(w.Events, eventType) }

// WebhookFilter selects webhooks, oldest first.
type WebhookFilter struct {
	TenantID string // "" for every tenant (provider reads)
	AfterID  string // cursor: webhooks with a greater id
	Limit    int
}

// WebhookUpdate holds the fields a PATCH may change; nil leaves a field.
type WebhookUpdate struct {
	URL         *string
	Events      []string // nil leaves the events
	Description *string
	Enabled     *bool
}

// Delivery is one event sent (or to be sent) to one webhook, with every
// attempt. The id is the same on every retry; a replay is a new delivery of
// the same event.
type Delivery struct {
	ID            string             `json:"id"`
	WebhookID     string             `json:"webhookId"`
	TenantID      string             `json:"tenantId"`
	EventID       string             `json:"eventId"`
	Event         string             `json:"event" doc:"The event type."`
	State         string             `json:"state" enum:"pending,delivered,failed,gone"`
	CreatedAt     Time               `json:"createdAt"`
	FinishedAt    *Time              `json:"finishedAt"`
	NextAttemptAt *Time              `json:"nextAttemptAt" doc:"When the next attempt is due; null once finished."`
	Attempts      []*DeliveryAttempt `json:"attempts"`
}

// DeliveryAttempt is one logged HTTP attempt of a delivery.
type DeliveryAttempt struct {
	Number          int    `json:"number"`
	At              Time   `json:"at"`
	StatusCode      *int   `json:"statusCode" doc:"HTTP status of the answer; null when none came (refused target, timeout, connection error)."`
	DurationMs      int64  `json:"durationMs"`
	Error           string `json:"error,omitempty" doc:"Why the attempt failed, when it did."`
	ResponseExcerpt string `json:"responseExcerpt" doc:"The first KiB of the answer's body."`
}

// DeliveryFilter selects one webhook's deliveries, newest first.
type DeliveryFilter struct {
	WebhookID string
	BeforeID  string // cursor: deliveries with a smaller id
	Limit     int
}

// WebhookService is what the API offers on webhooks. tenantID is the tenant
// acted for; "" (provider reads across tenants) matches any tenant. Another
// tenant's webhook is not found. Implemented by app/webhooks.Service.
type WebhookService interface {
	// CreateWebhook validates and stores w (URL checked against the refused
	// network ranges) and returns the signing secret, shown only here.
	CreateWebhook(ctx context.Context, w *Webhook) (secret string, err error)
	Webhook(ctx context.Context, tenantID, id string) (*Webhook, error)
	Webhooks(ctx context.Context, f WebhookFilter) ([]*Webhook, error)
	UpdateWebhook(ctx context.Context, tenantID, id string, u WebhookUpdate) (*Webhook, error)
	DeleteWebhook(ctx context.Context, tenantID, id string) error
	// RotateSecret replaces the secret; the old one keeps signing beside
	// the new one for SecretOverlap.
	RotateSecret(ctx context.Context, tenantID, id string) (secret string, w *Webhook, err error)
	// SendTest queues a webhook.test event to this webhook alone.
	SendTest(ctx context.Context, tenantID, id string) (*Delivery, error)
	Deliveries(ctx context.Context, tenantID string, f DeliveryFilter) ([]*Delivery, error)
	// Replay queues a new delivery of a delivery's event to the same webhook.
	Replay(ctx context.Context, tenantID, webhookID, deliveryID string) (*Delivery, error)
}

// DueDelivery is a pending delivery claimed for an attempt, with what the
// attempt needs.
type DueDelivery struct {
	ID             string
	WebhookID      string
	URL            string
	EventID        string
	EventType      string
	Body           []byte // the event envelope, sent and signed as is
	Attempt        int    // number of the attempt to make (1, 2, …)
	SealedSecret   []byte
	SealedPrevious []byte
	PreviousUntil  *time.Time
}

// AttemptOutcome is the result of one attempt and the delivery state it
// leads to.
type AttemptOutcome struct {
	DeliveryID    string
	Attempt       DeliveryAttempt
	State         string
	FinishedAt    *time.Time
	NextAttemptAt *time.Time
}

// WebhookStore is the storage of webhooks, the delivery queue and the
// attempt log (implemented by store.DB).
type WebhookStore interface {
	CreateWebhook(ctx context.Context, w *Webhook) error
	// Webhook returns the webhook with the id of any tenant.
	Webhook(ctx context.Context, id string) (*Webhook, error)
	Webhooks(ctx context.Context, f WebhookFilter) ([]*Webhook, error)
	// UpdateWebhook applies fn to the stored webhook in one transaction.
	UpdateWebhook(ctx context.Context, id string, fn func(w *Webhook) error) (*Webhook, error)
	// DeleteWebhook removes the webhook with its deliveries and their log.
	DeleteWebhook(ctx context.Context, id string) error

	// EnqueueTestEvent stores e and one pending delivery of it to the
	// webhook, in one transaction; the event is never fanned out.
	EnqueueTestEvent(ctx context.Context, webhookID string, e *Event) (*Delivery, error)
	// ReplayDelivery adds a new pending delivery of the delivery's event.
	ReplayDelivery(ctx context.Context, webhookID, deliveryID string) (*Delivery, error)
	Delivery(ctx context.Context, id string) (*Delivery, error)
	Deliveries(ctx context.Context, f DeliveryFilter) ([]*Delivery, error)

	// FanOut creates a pending delivery of each event for every enabled
	// webhook of its tenant subscribed to its type and marks the events
	// dispatched, in one transaction. It returns the deliveries created.
	FanOut(ctx context.Context, events []*StoredEvent) (int, error)
	// DueDeliveries returns up to limit pending deliveries due at now,
	// oldest due first, leaving out the deliveries and webhooks named.
	DueDeliveries(ctx context.Context, now time.Time, skipDeliveries, skipWebhooks []string, limit int) ([]*DueDelivery, error)
	// NextDueAt is the earliest next attempt among pending deliveries (nil: none).
	NextDueAt(ctx context.Context) (*time.Time, error)
	// RecordAttempts logs attempts and moves their deliveries on, in one
	// transaction. Outcomes of deliveries deleted meanwhile are dropped.
	RecordAttempts(ctx context.Context, outcomes []*AttemptOutcome) error
	// PurgeDeliveries deletes deliveries finished before the time, with
	// their attempts, and dispatched events no delivery refers to any more.
	PurgeDeliveries(ctx context.Context, finishedBefore time.Time) (int, error)
}
