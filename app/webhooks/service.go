package webhooks

import (
	"context"
	"slices"
	"strings"
	"time"

	"backstop/app"
)

var _ app.WebhookService = (*Service)(nil)

// MaxDescriptionLength bounds a webhook's description.
const MaxDescriptionLength = 500

// Service implements app.WebhookService: tenant isolation, validation
// (events, description, the URL through the Guard), secret generation and
// sealing, and waking the Dispatcher when it queues a delivery.
type Service struct {
	Store app.WebhookStore
	Guard *Guard
	Box   *SecretBox
	// Notify, if set, is called after a delivery was queued (test, replay)
	// and after a webhook was enabled (its pending deliveries are due).
	Notify func()
	Now    app.Clock
}

func (s *Service) now() time.Time {
	if s.Now == nil {
		return app.SystemClock()
	}
	return s.Now()
}

func (s *Service) notify() {
	if s.Notify != nil {
		s.Notify()
	}
}

// validEvents checks and de-duplicates a webhook's event list.
func validEvents(events []string) ([]string, error) {
	if len(events) == 0 {
		return nil, app.FieldError("events", "choose at least one event")
	}
	var out []string
	for _, e := range events {
		if !slices.Contains(app.SubscribableEvents, e) {
			return nil, app.FieldError("events", "unknown event %q; choose from %s", e, strings.Join(app.SubscribableEvents, ", "))
		}
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out, nil
}

func validDescription(d string) (string, error) {
	d = strings.TrimSpace(d)
	if len([]rune(d)) > MaxDescriptionLength {
		return "", app.FieldError("description", "description must be at most %d characters", MaxDescriptionLength)
	}
	return d, nil
}

// MaxWebhooksPerTenant bounds a tenant's webhooks: every event is signed and
// delivered once per webhook, so the count multiplies the delivery work.
const MaxWebhooksPerTenant = 25

// CreateWebhook validates w, assigns its id and secret and stores it.
// w.TenantID must be set; w.Enabled is stored as given. A tenant with
// MaxWebhooksPerTenant webhooks gets a validation error.
func (s *Service) CreateWebhook(ctx context.Context, w *app.Webhook) (string, error) {
	var err error
	if w.Events, err = validEvents(w.Events); err != nil {
		return "", err
	}
	if w.Description, err = validDescription(w.Description); err != nil {
		return "", err
	}
	if w.URL, err = s.Guard.ValidateURL(ctx, w.URL); err != nil {
		return "", err
	}
	existing, err := s.Store.Webhooks(ctx, app.WebhookFilter{TenantID: w.TenantID, Limit: MaxWebhooksPerTenant})
	if err != nil {
		return "", err
	}
	if len(existing) >= MaxWebhooksPerTenant {
		return "", app.Errorf(app.EINVALID, "a tenant can have at most %d webhooks; delete one first", MaxWebhooksPerTenant)
	}
	secret := NewSecret()
	w.ID = app.NewID(app.PrefixWebhook)
	w.CreatedAt = app.At(s.now())
	w.SealedSecret = s.Box.Seal(w.ID, secret)
	if err := s.Store.CreateWebhook(ctx, w); err != nil {
		return "", err
	}
	return secret, nil
}

// Webhook returns the tenant's webhook; another tenant's is not found.
func (s *Service) Webhook(ctx context.Context, tenantID, id string) (*app.Webhook, error) {
	w, err := s.Store.Webhook(ctx, id)
	if err != nil {
		return nil, err
	}
	if tenantID != "" && w.TenantID != tenantID {
		return nil, app.NotFound("webhook")
	}
	return w, nil
}

// Webhooks lists webhooks.
func (s *Service) Webhooks(ctx context.Context, f app.WebhookFilter) ([]*app.Webhook, error) {
	return s.Store.Webhooks(ctx, f)
}

// UpdateWebhook changes the fields set in u; a new URL is checked as on
// creation.
func (s *Service) UpdateWebhook(ctx context.Context, tenantID, id string, u app.WebhookUpdate) (*app.Webhook, error) {
	if _, err := s.Webhook(ctx, tenantID, id); err != nil {
		return nil, err
	}
	var err error
	if u.Events != nil {
		if u.Events, err = validEvents(u.Events); err != nil {
			return nil, err
		}
	}
	if u.Description != nil {
		d, err := validDescription(*u.Description)
		if err != nil {
			return nil, err
		}
		u.Description = &d
	}
	if u.URL != nil {
		// Resolved outside the write transaction: DNS may be slow.
		url, err := s.Guard.ValidateURL(ctx, *u.URL)
		if err != nil {
			return nil, err
		}
		u.URL = &url
	}
	w, err := s.Store.UpdateWebhook(ctx, id, func(w *app.Webhook) error {
		if u.URL != nil {
			w.URL = *u.URL
		}
		if u.Events != nil {
			w.Events = u.Events
		}
		if u.Description != nil {
			w.Description = *u.Description
		}
		if u.Enabled != nil {
			w.Enabled = *u.Enabled
		}
		return nil
	})
	if err == nil && w.Enabled {
		s.notify()
	}
	return w, err
}

// DeleteWebhook deletes the webhook; pending deliveries go with it.
func (s *Service) DeleteWebhook(ctx context.Context, tenantID, id string) error {
	if _, err := s.Webhook(ctx, tenantID, id); err != nil {
		return err
	}
	return s.Store.DeleteWebhook(ctx, id)
}

// RotateSecret gives the webhook a new secret. The old one, still sealed,
// becomes the previous secret and signs beside the new one for
// app.SecretOverlap; a second rotation within that time drops the oldest.
func (s *Service) RotateSecret(ctx context.Context, tenantID, id string) (string, *app.Webhook, error) {
	if _, err := s.Webhook(ctx, tenantID, id); err != nil {
		return "", nil, err
	}
	secret := NewSecret()
	until := s.now().Add(app.SecretOverlap)
	w, err := s.Store.UpdateWebhook(ctx, id, func(w *app.Webhook) error {
		w.SealedPrevious, w.PreviousUntil = w.SealedSecret, &until
		w.SealedSecret = s.Box.Seal(w.ID, secret)
		return nil
	})
	if err != nil {
		return "", nil, err
	}
	return secret, w, nil
}

// TestEventData is the data of a webhook.test event.
type TestEventData struct {
	Webhook struct {
		ID  string `json:"id"`
		URL string `json:"url"`
	} `json:"webhook"`
	Message string `json:"message"`
}

// SendTest queues a webhook.test event to the webhook alone, whatever
// events it chose. Like every delivery of a disabled webhook, it waits
// until the webhook is enabled again.
func (s *Service) SendTest(ctx context.Context, tenantID, id string) (*app.Delivery, error) {
	w, err := s.Webhook(ctx, tenantID, id)
	if err != nil {
		return nil, err
	}
	var data TestEventData
	data.Webhook.ID, data.Webhook.URL = w.ID, w.URL
	data.Message = "Test event from Backstop: this webhook is reachable and its signature can be verified."
	e := &app.Event{Type: app.EventWebhookTest, TenantID: w.TenantID, CreatedAt: app.At(s.now()), Data: data}
	d, err := s.Store.EnqueueTestEvent(ctx, w.ID, e)
	if err != nil {
		return nil, err
	}
	s.notify()
	return d, nil
}

// Deliveries lists the webhook's deliveries, newest first.
func (s *Service) Deliveries(ctx context.Context, tenantID string, f app.DeliveryFilter) ([]*app.Delivery, error) {
	if _, err := s.Webhook(ctx, tenantID, f.WebhookID); err != nil {
		return nil, err
	}
	return s.Store.Deliveries(ctx, f)
}

// Replay queues the delivery's event again as a new delivery.
func (s *Service) Replay(ctx context.Context, tenantID, webhookID, deliveryID string) (*app.Delivery, error) {
	if _, err := s.Webhook(ctx, tenantID, webhookID); err != nil {
		return nil, err
	}
	d, err := s.Store.ReplayDelivery(ctx, webhookID, deliveryID)
	if err != nil {
		return nil, err
	}
	s.notify()
	return d, nil
}
