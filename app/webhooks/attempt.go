package webhooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"backstop/app"
)

const (
	// excerptBytes of the answer are kept in the attempt log.
	excerptBytes = 1024
	// drainBytes more are read so the connection can be reused; a larger
	// answer closes the connection instead of being read to the end.
	drainBytes = 64 << 10
)

// attempt makes one HTTP attempt of a delivery and returns its outcome, or
// nil when the component is stopping (the attempt does not count).
func (d *Dispatcher) attempt(ctx context.Context, dd *app.DueDelivery) *app.AttemptOutcome {
	at := d.Now()
	started := time.Now()
	status, excerpt, failure := d.post(ctx, dd, at)
	if ctx.Err() != nil {
		return nil
	}
	elapsed := time.Since(started)
	end := d.Now() // the retry waits count from the attempt's end
	o := &app.AttemptOutcome{DeliveryID: dd.ID, Attempt: app.DeliveryAttempt{
		Number: dd.Attempt, At: app.At(at), StatusCode: status, DurationMs: elapsed.Milliseconds(),
		Error: failure, ResponseExcerpt: excerpt,
	}}
	switch {
	case status != nil && *status >= 200 && *status < 300:
		o.State, o.FinishedAt = app.DeliveryDelivered, &end
	case status != nil && *status == http.StatusGone:
		o.State, o.FinishedAt = app.DeliveryGone, &end
	case dd.Attempt >= app.MaxDeliveryAttempts:
		o.State, o.FinishedAt = app.DeliveryFailed, &end
	default:
		next := end.Add(app.RetrySchedule[dd.Attempt-1])
		o.State, o.NextAttemptAt = app.DeliveryPending, &next
	}
	if o.State != app.DeliveryDelivered {
		d.Logger.Info("webhook attempt failed", slog.String("webhook_id", dd.WebhookID), slog.String("delivery_id", dd.ID),
			slog.Int("attempt", dd.Attempt), slog.String("state", o.State), slog.String("reason", failure))
	}
	return o
}

// post sends the delivery and reads a bounded part of the answer. It
// returns the status (nil when no answer came), the answer's first KiB and,
// for a failed attempt, the reason.
func (d *Dispatcher) post(ctx context.Context, dd *app.DueDelivery, at time.Time) (*int, string, string) {
	secrets, err := d.signingSecrets(dd, at)
	if err != nil {
		return nil, "", err.Error()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, dd.URL, bytes.NewReader(dd.Body))
	if err != nil {
		return nil, "", "invalid target URL"
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", d.UserAgent)
	h.Set(HeaderEvent, dd.EventType)
	h.Set(HeaderDelivery, dd.ID)
	h.Set(HeaderAttempt, strconv.Itoa(dd.Attempt))
	if err := signHeaders(h, secrets, dd.ID, at, dd.Body); err != nil {
		return nil, "", "signing failed: " + err.Error()
	}
	resp, err := d.Client.Do(req)
	if err != nil {
		return nil, "", describe(err)
	}
	defer resp.Body.Close()
	head, _ := io.ReadAll(io.LimitReader(resp.Body, excerptBytes))
	_, _ = io.CopyN(io.Discard, resp.Body, drainBytes)
	code := resp.StatusCode
	excerpt := strings.ToValidUTF8(string(head), "\uFFFD")
	switch {
	case code >= 300 && code < 400:
		return &code, excerpt, fmt.Sprintf("redirect not followed (HTTP %d to %q)", code, resp.Header.Get("Location"))
	case code == http.StatusGone:
		return &code, excerpt, "receiver answered 410 Gone: delivery ended"
	case code < 200 || code >= 300:
		return &code, excerpt, fmt.Sprintf("receiver answered HTTP %d", code)
	}
	// The status decides: a 2xx whose body is cut short still delivered.
	return &code, excerpt, ""
}

// signingSecrets opens the current secret and, until its overlap ends, the
// previous one.
func (d *Dispatcher) signingSecrets(dd *app.DueDelivery, at time.Time) ([]string, error) {
	cur, err := d.Box.Open(dd.WebhookID, dd.SealedSecret)
	if err != nil {
		return nil, fmt.Errorf("signing secret unreadable: %w", err)
	}
	secrets := []string{cur}
	if len(dd.SealedPrevious) > 0 && dd.PreviousUntil != nil && at.Before(*dd.PreviousUntil) {
		if prev, err := d.Box.Open(dd.WebhookID, dd.SealedPrevious); err == nil {
			secrets = append(secrets, prev)
		}
	}
	return secrets, nil
}

// describe turns a transport error into the reason logged with the attempt,
// without the URL (it is in the webhook) and naming refused targets.
func describe(err error) string {
	var re *RefusedError
	if errors.As(err, &re) {
		return re.Error()
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return fmt.Sprintf("no complete answer within %s", AttemptTimeout)
		}
		err = ue.Err
	}
	return err.Error()
}
