package imapbackup

import (
	"context"
	"errors"
	"io"
	"slices"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// captureBatch is how many messages one body FETCH of a capture asks for.
const captureBatch = 50

// FolderCursor is where a capture stands in one folder: the folder's
// UIDVALIDITY and the next UID to capture.
type FolderCursor struct {
	UIDValidity uint32 `json:"uidValidity"`
	Next        uint32 `json:"next"`
}

// CapturedMessage is one new message a capture hands to Deliver.
type CapturedMessage struct {
	Mailbox     string // the folder's name on the server
	Path        string // the folder's path, "/"-separated
	UIDValidity uint32
	UID         uint32
	Size        int64     // RFC822.SIZE as listed
	Body        io.Reader // the exact bytes (BODY.PEEK[]); valid during Deliver only
}

// CaptureRequest is what Capture polls and where it delivers.
type CaptureRequest struct {
	// Cursor is the state of the previous capture by mailbox name; Capture
	// updates it in place. A nil map is not allowed.
	Cursor map[string]FolderCursor
	// Baseline says this is the first capture: every folder starts at its
	// current UIDNEXT, so nothing already there is delivered. Otherwise a
	// folder missing from Cursor (created since the previous capture)
	// starts at UID 1: all it holds arrived since.
	Baseline bool
	// Deliver receives each new message in UID order, one at a time. It
	// need not read Body to its end. An error stops the capture (the
	// message stays new: the next capture delivers it again).
	Deliver func(CapturedMessage) error
	// Save, if set, is called with Cursor after each delivered message
	// and once at the end when a folder's state changed, so a crash loses
	// at most the message being delivered.
	Save func(map[string]FolderCursor) error
}

// CaptureResult says what a capture did.
type CaptureResult struct {
	Delivered int
	// Rebaselined are the folders whose UIDVALIDITY changed: they restart
	// at their UIDNEXT (what arrived between the two captures is not
	// delivered; the server renumbered the folder, so it cannot be told
	// from what was there).
	Rebaselined []string
}

// Capture delivers the messages that arrived in the account's selectable
// folders since req.Cursor: one LIST-STATUS (or LIST and STATUS) round,
// and for each folder whose UIDNEXT moved an EXAMINE (read-only: nothing
// is marked read), a listing of the new UIDs and their bodies fetched with
// BODY.PEEK[]. Folders gone from the server are dropped from the cursor.
// Errors are those of Backup (imap.auth_failed, imap.tls_failed,
// imap.connection_failed) or Deliver's or Save's, unchanged.
func Capture(ctx context.Context, a Account, req CaptureRequest) (*CaptureResult, error) {
	s, err := connect(ctx, a)
	if err != nil {
		return nil, err
	}
	defer s.close()
	b := &backupRun{s: s, ctx: ctx, condstore: false}
	res, err := b.capture(req)
	var de *deliverError
	if errors.As(err, &de) {
		return res, de.err
	}
	if err != nil {
		return res, classify(ctx, a, err)
	}
	return res, nil
}

// deliverError wraps the caller's own errors (Deliver's, Save's) so they
// pass unclassified.
type deliverError struct{ err error }

func (e *deliverError) Error() string { return e.err.Error() }

func (b *backupRun) capture(req CaptureRequest) (*CaptureResult, error) {
	res := &CaptureResult{}
	folders, err := b.listFolders()
	if err != nil {
		return res, err
	}
	changed := false
	seen := map[string]bool{}
	for _, f := range folders {
		seen[f.mailbox] = true
		cur, known := req.Cursor[f.mailbox]
		uidNext := uint32(f.status.UIDNext)
		switch {
		case !known && req.Baseline:
			cur = FolderCursor{UIDValidity: f.status.UIDValidity, Next: uidNext}
		case !known:
			cur = FolderCursor{UIDValidity: f.status.UIDValidity, Next: 1}
		case cur.UIDValidity != f.status.UIDValidity:
			cur = FolderCursor{UIDValidity: f.status.UIDValidity, Next: uidNext}
			res.Rebaselined = append(res.Rebaselined, f.path)
		}
		if !known || req.Cursor[f.mailbox] != cur {
			req.Cursor[f.mailbox] = cur
			changed = true
		}
		if uidNext != 0 && cur.Next >= uidNext {
			continue
		}
		n, err := b.captureFolder(f, req)
		res.Delivered += n
		if err != nil {
			return res, err
		}
		if c := req.Cursor[f.mailbox]; uidNext > c.Next {
			c.Next = uidNext
			req.Cursor[f.mailbox] = c
			changed = true
		}
	}
	for mb := range req.Cursor {
		if !seen[mb] {
			delete(req.Cursor, mb)
			changed = true
		}
	}
	if changed && req.Save != nil {
		if err := req.Save(req.Cursor); err != nil {
			return res, &deliverError{err}
		}
	}
	return res, nil
}

// captureFolder delivers the folder's messages from its cursor on.
func (b *backupRun) captureFolder(f folderState, req CaptureRequest) (int, error) {
	sel, err := b.s.c.Select(f.mailbox, &imap.SelectOptions{ReadOnly: true}).Wait()
	if err != nil {
		var ie *imap.Error
		if errors.As(err, &ie) { // gone between LIST and SELECT
			return 0, nil
		}
		return 0, err
	}
	defer func() { b.s.c.Unselect().Wait() }()
	cur := req.Cursor[f.mailbox]
	if sel.UIDValidity != cur.UIDValidity || sel.NumMessages == 0 {
		return 0, nil // renumbered since STATUS: the next capture rebaselines
	}
	list := map[uint32]listed{}
	if err := b.collectListing(b.s.c.Fetch(allUIDs(cur.Next), &imap.FetchOptions{UID: true, RFC822Size: true}), list, cur.Next); err != nil {
		return 0, err
	}
	uids := make([]uint32, 0, len(list))
	for uid := range list {
		uids = append(uids, uid)
	}
	slices.Sort(uids)
	delivered := 0
	opts := &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{{Peek: true}}}
	for len(uids) > 0 {
		n := min(len(uids), captureBatch)
		var set imap.UIDSet
		for _, uid := range uids[:n] {
			set.AddNum(imap.UID(uid))
		}
		uids = uids[n:]
		cmd := b.s.c.Fetch(set, opts)
		for msg := cmd.Next(); msg != nil; msg = cmd.Next() {
			var uid uint32
			for item := msg.Next(); item != nil; item = msg.Next() {
				switch it := item.(type) {
				case imapclient.FetchItemDataUID:
					uid = uint32(it.UID)
				case imapclient.FetchItemDataBodySection:
					if it.Literal == nil || uid == 0 || uid < req.Cursor[f.mailbox].Next {
						continue
					}
					lit := &exactReader{r: it.Literal, left: it.Literal.Size()}
					m := CapturedMessage{Mailbox: f.mailbox, Path: f.path, UIDValidity: cur.UIDValidity, UID: uid,
						Size: list[uid].size, Body: lit}
					if err := req.Deliver(m); err != nil {
						return delivered, b.abandon(&deliverError{err})
					}
					if _, err := io.Copy(io.Discard, lit); err != nil {
						return delivered, b.abandon(err)
					}
					delivered++
					c := req.Cursor[f.mailbox]
					c.Next = uid + 1
					req.Cursor[f.mailbox] = c
					if req.Save != nil {
						if err := req.Save(req.Cursor); err != nil {
							return delivered, b.abandon(&deliverError{err})
						}
					}
				}
			}
		}
		if err := cmd.Close(); err != nil {
			return delivered, err
		}
	}
	return delivered, nil
}
