package mailpoll

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"backstop/app/archive"
	"backstop/app/graph"
	"backstop/app/m365"
)

// seenWindow is how long an m365 channel remembers the messages it
// captured (by Internet message id): a message received within it that
// shows up again in a delta (a flag change, a move to another folder) is
// not captured twice. Older entries are forgotten once a poll of the
// mailbox succeeded, and the mailbox's Since moves up to the poll's start
// minus seenWindow, so what is forgotten can no longer qualify.
const seenWindow = 24 * time.Hour

// m365Cursor is an m365 channel's cursor, per mailbox (Graph user id).
type m365Cursor struct {
	Mailboxes map[string]*mailboxCursor `json:"mailboxes"`
}

// mailboxCursor: Since is the oldest receivedDateTime a message may have
// to be captured (the channel's creation for the mailboxes there at the
// first poll, the poll that found it for a mailbox protected later);
// Folders holds each folder's deltaLink; Seen the captured messages' keys
// with their receivedDateTime (Unix seconds).
type mailboxCursor struct {
	Since   time.Time         `json:"since"`
	Folders map[string]string `json:"folders"`
	Seen    map[string]int64  `json:"seen,omitempty"`
}

// pollM365 captures the messages received since each protected mailbox's
// Since: per folder, the message delta from the kept deltaLink (from the
// start for a new folder or an invalid token: the Since and Seen filter
// keeps that from capturing old mail again), the exact MIME ($value) of
// each entry not removed, not a draft, received since Since and not seen.
// The cursor is saved after each folder and every few messages. One
// mailbox's failure does not stop the others; the first is returned.
func (p *Poller) pollM365(ctx context.Context, req archive.PollRequest) (int, error) {
	ch, log := req.Channel, req.Logger
	cur := m365Cursor{}
	if ch.Cursor != "" {
		if err := json.Unmarshal([]byte(ch.Cursor), &cur); err != nil {
			log.Warn("unreadable m365 cursor: starting again from now", slog.Any("error", err))
			cur = m365Cursor{}
		}
	}
	first := cur.Mailboxes == nil
	if first {
		cur.Mailboxes = map[string]*mailboxCursor{}
	}
	c, err := p.src.GraphClient(ctx, ch.SourceID)
	if err != nil {
		return 0, err
	}
	boxes, err := p.src.Mailboxes(ctx, ch.SourceID)
	if err != nil {
		return 0, err
	}
	start := p.now()
	save := func() error {
		raw, err := json.Marshal(cur)
		if err != nil {
			return err
		}
		return req.Save(ctx, string(raw))
	}
	live := map[string]bool{}
	total := 0
	var firstErr error
	for _, mb := range boxes {
		live[mb.UserID] = true
		mc := cur.Mailboxes[mb.UserID]
		if mc == nil {
			since := start
			if first {
				since = ch.CreatedAt
			}
			mc = &mailboxCursor{Since: since, Folders: map[string]string{}}
			cur.Mailboxes[mb.UserID] = mc
		}
		if mc.Folders == nil {
			mc.Folders = map[string]string{}
		}
		if mc.Seen == nil {
			mc.Seen = map[string]int64{}
		}
		n, err := p.pollMailbox(ctx, req, c, mb, mc, save)
		total += n
		if err != nil {
			if ctx.Err() != nil {
				return total, ctx.Err()
			}
			log.Warn("capturing a mailbox failed", slog.String("mailbox", mb.Address), slog.Any("error", err))
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if floor := start.Add(-seenWindow); floor.After(mc.Since) {
			mc.Since = floor
		}
		for k, at := range mc.Seen {
			if at < mc.Since.Unix() {
				delete(mc.Seen, k)
			}
		}
	}
	for id := range cur.Mailboxes {
		if !live[id] {
			delete(cur.Mailboxes, id) // unprotected: captured again from the moment it is protected again
		}
	}
	if err := save(); err != nil {
		return total, err
	}
	return total, firstErr
}

// saveEvery is how many captured messages of a folder go between cursor
// saves (the deltaLink moves only at the folder's end; Seen meanwhile).
const saveEvery = 20

func (p *Poller) pollMailbox(ctx context.Context, req archive.PollRequest, c *graph.Client, mb MailboxRef, mc *mailboxCursor, save func() error) (int, error) {
	type folder struct {
		id, path string
	}
	var folders []folder
	err := c.MailFolders(ctx, mb.UserID, func(f graph.MailFolder, path []string) error {
		segs := make([]string, len(path))
		for i, s := range path {
			segs[i] = m365.EscapeName(s)
		}
		folders = append(folders, folder{id: f.ID, path: strings.Join(segs, "/")})
		return nil
	})
	if err != nil {
		return 0, m365.MailFailure(c, mb.UserID, err)
	}
	present := map[string]bool{}
	captured := 0
	for _, f := range folders {
		present[f.id] = true
		sinceSave := 0
		capturePage := func(page []graph.Message) error {
			for _, m := range page {
				if m.Removed != nil || (m.IsDraft != nil && *m.IsDraft) || m.ReceivedDateTime == nil {
					continue
				}
				if m.ReceivedDateTime.Before(mc.Since.Truncate(time.Second)) { // Graph's times have whole seconds
					continue
				}
				key := m.InternetMessageID
				if key == "" {
					key = "id:" + m.ID
				}
				if _, ok := mc.Seen[key]; ok {
					continue
				}
				ok, err := captureGraphMessage(ctx, req, c, mb, f.path, m)
				if err != nil {
					return err
				}
				mc.Seen[key] = m.ReceivedDateTime.Unix()
				if ok {
					captured++
					if sinceSave++; sinceSave >= saveEvery {
						sinceSave = 0
						if err := save(); err != nil {
							return err
						}
					}
				}
			}
			return nil
		}
		link, err := c.MessagesDelta(ctx, mb.UserID, f.id, mc.Folders[f.id], capturePage)
		if err != nil && mc.Folders[f.id] != "" && invalidDelta(err) {
			req.Logger.Info("the folder's delta token is no longer valid: reading the folder again",
				slog.String("mailbox", mb.Address), slog.String("folder", f.path))
			link, err = c.MessagesDelta(ctx, mb.UserID, f.id, "", capturePage)
		}
		if err != nil {
			if graph.StatusOf(err) == http.StatusNotFound && graph.IsCode(err, "ErrorItemNotFound") {
				continue // the folder went away meanwhile
			}
			return captured, m365.MailFailure(c, mb.UserID, err)
		}
		mc.Folders[f.id] = link
		if err := save(); err != nil {
			return captured, err
		}
	}
	for id := range mc.Folders {
		if !present[id] {
			delete(mc.Folders, id)
		}
	}
	return captured, nil
}

// captureGraphMessage ingests one message's exact MIME. A message deleted
// since the delta listed it is skipped (false, nil).
func captureGraphMessage(ctx context.Context, req archive.PollRequest, c *graph.Client, mb MailboxRef, folderPath string, m graph.Message) (bool, error) {
	body, err := c.MessageMIME(ctx, mb.UserID, m.ID)
	if err != nil {
		if graph.StatusOf(err) == http.StatusNotFound && !graph.IsCode(err, "MailboxNotEnabledForRESTAPI", "MailboxNotFound") {
			return false, nil
		}
		return false, err
	}
	defer body.Close()
	env := archive.Envelope{Source: "m365:" + mb.Address + "/" + folderPath + "/" + m.ID}
	if err := req.Ingest(ctx, env, body); err != nil {
		return false, err
	}
	return true, nil
}

// invalidDelta is an expired or invalid delta token (the folder restarts).
func invalidDelta(err error) bool {
	return graph.StatusOf(err) == http.StatusGone ||
		graph.IsCode(err, "syncStateNotFound", "resyncRequired", "SyncStateInvalid",
			"resyncChangesApplyDifferences", "resyncChangesUploadDifferences")
}
