// Package mailpoll polls IMAP accounts and Microsoft 365 mailboxes for the
// archive's imap and m365 capture channels (CONTRACT §14): it implements
// archive.CaptureSources over the protected-object layer's sources, and
// the archive schedules its polls, ingests what it delivers and keeps the
// channels' states.
//
// "Every message that arrives" is read from the channel's creation on: a
// channel's first poll takes the source's current state as its start and
// captures nothing that was already there (an IMAP folder starts at its
// UIDNEXT; a Microsoft 365 mailbox captures only messages received after
// the channel was created, or after it was protected when that was
// later). A folder that appears later is read whole under IMAP (all it
// holds arrived since) and filtered by received time under Microsoft 365.
// A message moved between IMAP folders gets a new UID and is captured
// again: the tenant keeps one copy of its bytes (dedup by SHA-256) but the
// move adds a capture record. Each poller keeps its state in the channel's
// cursor (JSON), saved as messages are ingested, so a crash re-captures at
// most the messages since the last save (again one more record each, no
// second copy).
package mailpoll

import (
	"context"
	"fmt"

	"backstop/app"
	"backstop/app/archive"
	"backstop/app/graph"
	"backstop/app/imapbackup"
)

// MailboxRef is one Microsoft 365 mailbox a channel captures: a protected
// mailbox object of the source.
type MailboxRef struct {
	UserID  string // Graph user id (the object's ExternalID)
	Address string
}

// Sources reads the protected-object layer's sources (the root package
// adapts app/protect). Not found is an app.ENOTFOUND error.
type Sources interface {
	// SourceInfo returns a source's tenant and kind (imap, m365).
	SourceInfo(ctx context.Context, sourceID string) (tenantID, kind string, err error)
	// IMAPAccount returns an imap source's account with its password.
	IMAPAccount(ctx context.Context, sourceID string) (imapbackup.Account, error)
	// GraphClient returns an m365 source's (cached) Graph client.
	GraphClient(ctx context.Context, sourceID string) (*graph.Client, error)
	// Mailboxes lists the protected mailbox objects of an m365 source.
	Mailboxes(ctx context.Context, sourceID string) ([]MailboxRef, error)
}

// Poller implements archive.CaptureSources.
type Poller struct {
	src Sources
	now app.Clock
}

var _ archive.CaptureSources = (*Poller)(nil)

// New returns a poller over src; now is the clock (app.SystemClock when
// nil).
func New(src Sources, now app.Clock) *Poller {
	if now == nil {
		now = app.SystemClock
	}
	return &Poller{src: src, now: now}
}

// SourceInfo implements archive.CaptureSources.
func (p *Poller) SourceInfo(ctx context.Context, sourceID string) (string, string, error) {
	return p.src.SourceInfo(ctx, sourceID)
}

// Poll implements archive.CaptureSources.
func (p *Poller) Poll(ctx context.Context, req archive.PollRequest) (int, error) {
	switch req.Channel.Kind {
	case archive.KindIMAP:
		return p.pollIMAP(ctx, req)
	case archive.KindM365:
		return p.pollM365(ctx, req)
	}
	return 0, fmt.Errorf("mailpoll: channel kind %q is not polled", req.Channel.Kind)
}
