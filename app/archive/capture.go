package archive

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"backstop/app"
)

// The capture part: pollers of imap and m365 channels (CONTRACT §14:
// every message that arrives in the source's mailboxes is captured,
// polling at most every 5 minutes).
//
// "Arrives" is read from the channel's creation on: a channel's first poll
// takes the source's current state as its starting point and captures
// nothing that was already there (an IMAP folder starts at its UIDNEXT; a
// Microsoft 365 mailbox captures only messages received after the channel
// was created). A folder that appears later is read whole (all it holds
// arrived since). A message moved between folders may be captured again
// under IMAP (it gets a new UID): the tenant keeps one copy of the bytes
// (dedup by SHA-256) but the move adds a capture record. Each poller keeps
// its state in the channel's cursor (JSON), saved as messages are
// ingested, so a crash re-captures at most the message in flight (again:
// one more record, no second copy).

// DefaultCapturePollEvery is the most time between two polls of a
// channel.
const DefaultCapturePollEvery = 5 * time.Minute

// captureWorkers is how many channels are polled at once.
const captureWorkers = 8

// CaptureStore is the capture part's SQL (store/archive_capture.go).
type CaptureStore interface {
	// ArchivePollingChannels lists the live (not deleted) channels of
	// kind imap and m365, with their cursors.
	ArchivePollingChannels(ctx context.Context) ([]*Channel, error)
	// SetArchiveChannelCursor saves a channel's poller state.
	SetArchiveChannelCursor(ctx context.Context, channelID, cursor string) error
	// SetArchiveChannelState sets a channel's state (ok, idle, failing)
	// and last error ("" clears it).
	SetArchiveChannelState(ctx context.Context, channelID, state, lastError string) error
}

// CaptureSources reads the IMAP and Microsoft 365 sources polling
// channels capture from; app/archive/mailpoll implements it over the
// protected-object layer (the archive itself imports no connector: the
// connectors' tests import the store, which imports the archive). Not
// found is an app.ENOTFOUND error.
type CaptureSources interface {
	// SourceInfo returns a source's tenant and kind (imap, m365).
	SourceInfo(ctx context.Context, sourceID string) (tenantID, kind string, err error)
	// Poll runs one poll of an imap or m365 channel: it delivers through
	// req.Ingest every message that arrived in the channel's source since
	// req.Channel.Cursor (the first poll, with an empty cursor, takes the
	// source's current state as its start and delivers nothing that was
	// there before the channel's creation), saving its new cursor through
	// req.Save as it goes. It returns how many messages it delivered; an
	// error is the reason the source could not be read (an
	// *app.FailureError where the connector names it), and the next poll
	// retries from the last saved cursor.
	Poll(ctx context.Context, req PollRequest) (delivered int, err error)
}

// PollRequest is one poll of a channel.
type PollRequest struct {
	Channel *Channel
	// Ingest stores one message's exact bytes durably (Service.Ingest for
	// the channel). A message refused for good (over the size limit) is
	// logged and answered nil, so a poll never stops at it.
	Ingest func(ctx context.Context, env Envelope, r io.Reader) error
	// Save stores the poller's new cursor (JSON).
	Save   func(ctx context.Context, cursor string) error
	Logger *slog.Logger
}

// capture schedules the polls: each polling channel at most every
// interval (jittered), one poll at a time per channel, captureWorkers
// channels at once.
type capture struct {
	s     *Service
	log   *slog.Logger
	every time.Duration
	wake  chan struct{}

	mu      sync.Mutex
	next    map[string]time.Time // channel id → when its next poll is due
	running map[string]bool
}

func newCapture(s *Service) (*capture, error) {
	every := s.cfg.CapturePollEvery
	if every <= 0 {
		every = DefaultCapturePollEvery
	}
	return &capture{s: s, log: s.log.With("component", "archive_capture"), every: every,
		wake: make(chan struct{}, 1), next: map[string]time.Time{}, running: map[string]bool{}}, nil
}

// PollNow makes a polling channel's next poll due now (a new channel's
// first poll, or an administrator's request); a poll already running is
// not doubled. It returns at once.
func (s *Service) PollNow(channelID string) {
	p := s.capture
	p.mu.Lock()
	p.next[channelID] = time.Time{}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run polls until ctx ends, then waits for the polls in flight. The
// channel list is read again every scan interval, so channels created or
// deleted are picked up without being told (PollNow only hurries it).
func (p *capture) run(ctx context.Context) {
	if p.s.cfg.Capture == nil {
		p.log.Info("no capture sources configured: imap and m365 channels are not polled")
		<-ctx.Done()
		return
	}
	scan := min(p.every, 30*time.Second)
	t := time.NewTicker(scan)
	defer t.Stop()
	sem := make(chan struct{}, captureWorkers)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		p.dispatch(ctx, sem, &wg)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-p.wake:
		}
	}
}

// dispatch starts the polls that are due.
func (p *capture) dispatch(ctx context.Context, sem chan struct{}, wg *sync.WaitGroup) {
	chans, err := p.s.cfg.Store.ArchivePollingChannels(ctx)
	if err != nil {
		if ctx.Err() == nil {
			p.log.Error("listing polling channels failed", slog.Any("error", err))
		}
		return
	}
	now := time.Now()
	live := map[string]bool{}
	for _, ch := range chans {
		live[ch.ID] = true
		p.mu.Lock()
		due, known := p.next[ch.ID]
		start := !p.running[ch.ID] && (!known || !now.Before(due))
		if start {
			p.running[ch.ID] = true
		}
		p.mu.Unlock()
		if !start {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				p.finished(ch.ID)
				return
			}
			p.poll(ctx, ch)
			<-sem
			p.finished(ch.ID)
		}()
	}
	p.mu.Lock()
	for id := range p.next {
		if !live[id] && !p.running[id] {
			delete(p.next, id)
		}
	}
	p.mu.Unlock()
}

// finished schedules the channel's next poll: interval ± 10 %.
func (p *capture) finished(id string) {
	jitter := time.Duration((rand.Float64()*0.2 - 0.1) * float64(p.every))
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.running, id)
	if due, ok := p.next[id]; ok && due.IsZero() {
		return // PollNow asked during the poll: poll again at the next scan
	}
	p.next[id] = time.Now().Add(p.every + jitter)
}

// poll runs one poll of a channel and records its outcome in the channel's
// state: failing with the error's text, or back to ok (idle while nothing
// was ever captured) after a failure. Ingest itself sets ok.
func (p *capture) poll(ctx context.Context, ch *Channel) {
	if ch.Kind != KindIMAP && ch.Kind != KindM365 {
		return
	}
	log := p.log.With(slog.String("channel_id", ch.ID), slog.String("tenant_id", ch.TenantID), slog.String("source_id", ch.SourceID))
	n, err := p.s.cfg.Capture.Poll(ctx, PollRequest{
		Channel: ch,
		Ingest: func(ctx context.Context, env Envelope, r io.Reader) error {
			_, err := p.s.Ingest(ctx, ch, env, r)
			if rejected(err) {
				log.Warn("captured message refused", slog.String("source", env.Source), slog.Any("error", err))
				return nil
			}
			return err
		},
		Save: func(ctx context.Context, cursor string) error {
			return p.s.cfg.Store.SetArchiveChannelCursor(ctx, ch.ID, cursor)
		},
		Logger: log,
	})
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		log.Warn("capture poll failed", slog.Int("captured", n), slog.Any("error", err))
		if serr := p.s.cfg.Store.SetArchiveChannelState(ctx, ch.ID, ChannelFailing, failureText(err)); serr != nil {
			log.Error("recording the channel's failure failed", slog.Any("error", serr))
		}
		return
	}
	if n > 0 {
		log.Info("captured messages", slog.Int("captured", n))
	}
	if ch.State == ChannelFailing || (ch.State == ChannelOK && ch.LastError != "") {
		state := ChannelIdle
		if ch.LastMessageAt != nil || n > 0 {
			state = ChannelOK
		}
		if serr := p.s.cfg.Store.SetArchiveChannelState(ctx, ch.ID, state, ""); serr != nil {
			log.Error("recording the channel's recovery failed", slog.Any("error", serr))
		}
	}
}

// failureText is a channel's lastError: the failure code and the cause,
// secrets redacted.
func failureText(err error) string {
	var ae *app.Error
	if errors.As(err, &ae) {
		return ae.Message
	}
	return app.RedactText(err.Error())
}

// checkCaptureSource validates the source of an imap or m365 channel
// spec: it exists, belongs to the spec's tenant (another tenant's is not
// found) and is of the channel's kind. Channel creation calls it.
func (s *Service) checkCaptureSource(ctx context.Context, spec ChannelSpec) error {
	if spec.Kind != KindIMAP && spec.Kind != KindM365 {
		return nil
	}
	if spec.SourceID == "" {
		return app.FieldError("sourceId", "an %s channel needs the id of an %s source", spec.Kind, spec.Kind)
	}
	if s.cfg.Capture == nil {
		return app.Errorf(app.EINVALID, "polling channels are not available on this appliance")
	}
	tenantID, kind, err := s.cfg.Capture.SourceInfo(ctx, spec.SourceID)
	if app.ErrorCode(err) == app.ENOTFOUND || (err == nil && tenantID != spec.TenantID) {
		return app.FieldError("sourceId", "source %s not found", spec.SourceID)
	}
	if err != nil {
		return err
	}
	if kind != spec.Kind {
		return app.FieldError("sourceId", "source %s is an %s source, not %s", spec.SourceID, kind, spec.Kind)
	}
	return nil
}

// rejected is an Ingest error that will not change on a retry (the message
// is over the size limit): the poller skips the message.
func rejected(err error) bool {
	var tl *TooLarge
	return errors.As(err, &tl)
}
