package mailpoll

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"backstop/app/archive"
	"backstop/app/imapbackup"
)

// imapCursor is an imap channel's cursor: per folder (by its name on the
// server) the UIDVALIDITY and the next UID to capture. Started is set once
// the first poll took its baseline.
type imapCursor struct {
	Started bool                               `json:"started"`
	Folders map[string]imapbackup.FolderCursor `json:"folders"`
}

// pollIMAP captures what arrived in the account's folders since the
// cursor: the first poll starts every folder at its UIDNEXT (captures
// nothing), later polls fetch the new UIDs' BODY.PEEK[] (never marking
// them read) and ingest their exact bytes, saving the cursor after each.
// A changed UIDVALIDITY restarts the folder at its UIDNEXT (logged).
func (p *Poller) pollIMAP(ctx context.Context, req archive.PollRequest) (int, error) {
	ch, log := req.Channel, req.Logger
	cur := imapCursor{}
	if ch.Cursor != "" {
		if err := json.Unmarshal([]byte(ch.Cursor), &cur); err != nil {
			log.Warn("unreadable imap cursor: starting again from now", slog.Any("error", err))
			cur = imapCursor{}
		}
	}
	if cur.Folders == nil {
		cur.Folders = map[string]imapbackup.FolderCursor{}
	}
	acct, err := p.src.IMAPAccount(ctx, ch.SourceID)
	if err != nil {
		return 0, err
	}
	save := func(map[string]imapbackup.FolderCursor) error {
		cur.Started = true
		raw, err := json.Marshal(cur)
		if err != nil {
			return err
		}
		return req.Save(ctx, string(raw))
	}
	baseline := !cur.Started
	res, err := imapbackup.Capture(ctx, acct, imapbackup.CaptureRequest{
		Cursor:   cur.Folders,
		Baseline: baseline,
		Deliver: func(m imapbackup.CapturedMessage) error {
			env := archive.Envelope{Source: fmt.Sprintf("imap:%s/%d", m.Path, m.UID)}
			return req.Ingest(ctx, env, m.Body)
		},
		Save: save,
	})
	if res != nil {
		for _, f := range res.Rebaselined {
			log.Warn("the folder's UIDVALIDITY changed: capturing from its current UIDNEXT on",
				slog.String("folder", f))
		}
	}
	if err != nil {
		n := 0
		if res != nil {
			n = res.Delivered
		}
		return n, err
	}
	if baseline {
		// The baseline of an empty account changes no folder: mark it taken.
		if err := save(cur.Folders); err != nil {
			return res.Delivered, err
		}
	}
	return res.Delivered, nil
}
