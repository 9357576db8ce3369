package main

import (
	"context"

	"backstop/app"
	"backstop/app/archive/mailpoll"
	"backstop/app/graph"
	"backstop/app/imapbackup"
	"backstop/app/protect"
	"backstop/store"
)

// captureSources adapts the protected-object layer to mailpoll.Sources:
// the archive's imap and m365 channels read the same sources (and the same
// cached Graph clients, under the one graph.max_concurrency budget) as
// backups.
type captureSources struct {
	m  *protect.Manager
	db *store.DB
}

// newCaptureSources is what the archive's mount passes as
// archive.Config.Capture.
func newCaptureSources(m *protect.Manager, db *store.DB) *mailpoll.Poller {
	return mailpoll.New(&captureSources{m: m, db: db}, nil)
}

func (c *captureSources) SourceInfo(ctx context.Context, sourceID string) (string, string, error) {
	src, err := c.db.Source(ctx, sourceID)
	if err != nil {
		return "", "", err
	}
	return src.TenantID, src.Kind, nil
}

func (c *captureSources) IMAPAccount(ctx context.Context, sourceID string) (imapbackup.Account, error) {
	return c.m.Account(ctx, sourceID)
}

func (c *captureSources) GraphClient(ctx context.Context, sourceID string) (*graph.Client, error) {
	return c.m.GraphClient(ctx, sourceID)
}

// Mailboxes lists the source's protected mailbox objects (protection
// switched on): the mailboxes a backup of the source reads too.
func (c *captureSources) Mailboxes(ctx context.Context, sourceID string) ([]mailpoll.MailboxRef, error) {
	objs, err := c.db.ProtectedObjects(ctx, app.ProtectedObjectFilter{SourceID: sourceID, Kind: app.ObjectMailbox})
	if err != nil {
		return nil, err
	}
	var out []mailpoll.MailboxRef
	for _, o := range objs {
		if o.Protected && o.ExternalID != "" {
			out = append(out, mailpoll.MailboxRef{UserID: o.ExternalID, Address: o.Address})
		}
	}
	return out, nil
}
