package imapbackup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"backstop/app"
	"backstop/app/blobstore"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// Append batching: a MULTIAPPEND carries up to appendBatch messages or
// appendBatchBytes bytes (read from the store into memory first, so a
// store error fails one message, not a half-sent command); a message
// larger than appendStreamed streams from the store in a command of its
// own. Two commands are in flight at once. 2 MiB batches keep a restore's
// peak RSS near 60 MiB (8 MiB ones needed over 100 MiB) at about the same
// speed: the round trips, not the batch size, bound it.
const (
	appendBatch      = 500
	appendBatchBytes = 2 << 20
	appendStreamed   = 1 << 20
	appendInFlight   = 2
)

// Restore appends the messages of req.Items into req.Folder, recreating
// the source folder structure below it with the server's delimiter (an
// empty req.Folder restores into the original folders). Folder items are
// created even when empty. Messages already in a destination folder are
// skipped (see dedupKey), so running the same restore again adds nothing
// and a restore cut short resumes without duplicates. A message that
// cannot be read from the store or that the server refuses is listed in
// Failed; a full mailbox stops the restore with imap.quota_exceeded.
func Restore(ctx context.Context, a Account, req RestoreRequest, open Opener, progress Progress) (*RestoreResult, error) {
	s, err := connect(ctx, a)
	if err != nil {
		return nil, err
	}
	defer s.close()
	r := &restoreRun{ctx: ctx, a: a, s: s, open: open, prog: app.NewProgressReporter(progress), res: &RestoreResult{}}
	defer func() {
		if r.ac != nil {
			r.ac.close()
		}
	}()
	if err := r.run(req); err != nil {
		return nil, classify(ctx, a, err)
	}
	r.prog.Flush()
	return r.res, nil
}

type restoreRun struct {
	ctx   context.Context
	a     Account
	s     *session
	ac    *appendConn
	open  Opener
	prog  *app.ProgressReporter
	res   *RestoreResult
	delim string
}

type restoreMsg struct {
	item blobstore.Item
	meta MessageMeta
}

func (r *restoreRun) run(req RestoreRequest) error {
	r.prog.Phase("scanning")
	list, err := r.s.c.List("", "", nil).Collect()
	if err != nil {
		return err
	}
	r.delim = "/"
	if len(list) > 0 && list[0].Delim != 0 {
		r.delim = string(list[0].Delim)
	}
	folders := map[string][]restoreMsg{}
	var total, bytes int64
	for _, it := range req.Items {
		switch it.Kind {
		case KindFolder:
			if _, ok := folders[it.Path]; !ok {
				folders[it.Path] = nil
			}
		case KindMessage:
			var m MessageMeta
			json.Unmarshal(it.Meta, &m) // a message without meta is appended without flags or date
			folders[it.Path] = append(folders[it.Path], restoreMsg{item: it, meta: m})
			total++
			bytes += it.Size
		}
	}
	r.prog.SetTotals(total, bytes)
	paths := make([]string, 0, len(folders))
	for p := range folders {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	existing, err := r.mailboxes()
	if err != nil {
		return err
	}
	r.prog.Phase("transferring")
	for _, p := range paths {
		dest := r.destination(req.Folder, p)
		if err := r.ensureMailbox(dest, existing); err != nil {
			return err
		}
		msgs := folders[p]
		if len(msgs) == 0 {
			continue
		}
		todo, err := r.missing(dest, msgs)
		if err != nil {
			return err
		}
		r.res.Skipped += int64(len(msgs) - len(todo))
		r.prog.AddDone(int64(len(msgs)-len(todo)), 0)
		if err := r.appendAll(dest, todo); err != nil {
			return err
		}
	}
	return nil
}

// destination is the mailbox a source folder path is restored into.
func (r *restoreRun) destination(root, path string) string {
	var segs []string
	if root != "" {
		segs = append(segs, root)
	}
	for _, s := range strings.Split(path, "/") {
		segs = append(segs, strings.ReplaceAll(s, r.delim, "_"))
	}
	return strings.Join(segs, r.delim)
}

func (r *restoreRun) mailboxes() (map[string]bool, error) {
	list, err := r.s.c.List("", "*", nil).Collect()
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, l := range list {
		sel := true
		for _, at := range l.Attrs {
			if strings.EqualFold(string(at), string(imap.MailboxAttrNoSelect)) || strings.EqualFold(string(at), string(imap.MailboxAttrNonExistent)) {
				sel = false
			}
		}
		if sel {
			out[l.Mailbox] = true
		}
	}
	return out, nil
}

// ensureMailbox creates a mailbox and its parents where missing.
func (r *restoreRun) ensureMailbox(name string, existing map[string]bool) error {
	segs := strings.Split(name, r.delim)
	for i := range segs {
		n := strings.Join(segs[:i+1], r.delim)
		if existing[n] || strings.EqualFold(n, "INBOX") {
			continue
		}
		if err := r.s.c.Create(n, nil).Wait(); err != nil {
			var ie *imap.Error
			if !errors.As(err, &ie) || ie.Code != imap.ResponseCodeAlreadyExists {
				return err
			}
		}
		existing[n] = true
	}
	return nil
}

// dedupKey identifies a message for "already there": its Message-ID and
// size when it has a Message-ID (a header servers keep, and the size of
// the exact bytes we append), else the SHA-256 of its bytes. Equal keys
// are counted, so a folder holding the same message twice gets both.
func dedupKey(messageID string, size int64, sha string) string {
	if messageID != "" {
		return "id\x00" + messageID + "\x00" + strconv.FormatInt(size, 10)
	}
	return "sha\x00" + sha
}

// missing reads what the destination folder holds (one UID FETCH of sizes,
// dates and Message-IDs; the bodies only of messages without a
// Message-ID whose size and date match one to restore) and returns the
// messages not yet there.
func (r *restoreRun) missing(dest string, msgs []restoreMsg) ([]restoreMsg, error) {
	sel, err := r.s.c.Select(dest, &imap.SelectOptions{ReadOnly: true}).Wait()
	if err != nil {
		return nil, err
	}
	defer func() { r.s.c.Unselect().Wait() }()
	if sel.NumMessages == 0 {
		return msgs, nil
	}
	type sizeDate struct {
		size int64
		date int64
	}
	wantNoID := map[sizeDate]bool{}
	for _, m := range msgs {
		if m.meta.MessageID == "" {
			wantNoID[sizeDate{m.item.Size, m.meta.InternalDate.Unix()}] = true
		}
	}
	have := map[string]int{}
	var hashUIDs imap.UIDSet
	hdr := &imap.FetchItemBodySection{Specifier: imap.PartSpecifierHeader, HeaderFields: []string{"Message-ID"}, Peek: true}
	cmd := r.s.c.Fetch(allUIDs(1), &imap.FetchOptions{UID: true, RFC822Size: true, InternalDate: true,
		BodySection: []*imap.FetchItemBodySection{hdr}})
	for msg := cmd.Next(); msg != nil; msg = cmd.Next() {
		var uid imap.UID
		var size int64
		var date time.Time
		var id string
		for item := msg.Next(); item != nil; item = msg.Next() {
			switch it := item.(type) {
			case imapclient.FetchItemDataUID:
				uid = it.UID
			case imapclient.FetchItemDataRFC822Size:
				size = it.Size
			case imapclient.FetchItemDataInternalDate:
				date = it.Time
			case imapclient.FetchItemDataBodySection:
				if it.Literal != nil {
					b, _ := io.ReadAll(io.LimitReader(it.Literal, maxHeader))
					id = parseHeader(b).MessageID
				}
			}
		}
		if id != "" {
			have[dedupKey(id, size, "")]++
		} else if wantNoID[sizeDate{size, date.Unix()}] {
			hashUIDs.AddNum(uid)
		}
	}
	if err := cmd.Close(); err != nil {
		return nil, err
	}
	if len(hashUIDs) > 0 {
		cmd := r.s.c.Fetch(hashUIDs, &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{{Peek: true}}})
		for msg := cmd.Next(); msg != nil; msg = cmd.Next() {
			for item := msg.Next(); item != nil; item = msg.Next() {
				if it, ok := item.(imapclient.FetchItemDataBodySection); ok && it.Literal != nil {
					h := sha256.New()
					if _, err := io.Copy(h, it.Literal); err != nil {
						cmd.Close()
						return nil, err
					}
					have[dedupKey("", 0, hex.EncodeToString(h.Sum(nil)))]++
				}
			}
		}
		if err := cmd.Close(); err != nil {
			return nil, err
		}
	}
	var todo []restoreMsg
	for _, m := range msgs {
		k := dedupKey(m.meta.MessageID, m.item.Size, m.item.SHA256)
		if have[k] > 0 {
			have[k]--
			continue
		}
		todo = append(todo, m)
	}
	return todo, nil
}

// batch is one APPEND command in flight.
type batch struct {
	tag  string
	msgs []restoreMsg
	bufs [][]byte
}

// appendAll appends msgs to dest in MULTIAPPEND batches (one message per
// command if the server lacks MULTIAPPEND), two commands in flight.
func (r *restoreRun) appendAll(dest string, msgs []restoreMsg) error {
	if len(msgs) == 0 {
		return nil
	}
	if r.ac == nil {
		ac, err := dialAppend(r.ctx, r.a)
		if err != nil {
			return err
		}
		r.ac = ac
	}
	perCommand := appendBatch
	inFlight := appendInFlight
	if !r.ac.multiAppend {
		perCommand = 1
	}
	if !r.ac.literalPlus {
		inFlight = 1
	}
	var pending []*batch
	cur := &batch{}
	var curBytes int64
	send := func(b *batch) error {
		if len(b.msgs) == 0 {
			return nil
		}
		am := make([]appendMsg, len(b.msgs))
		for i, m := range b.msgs {
			am[i] = appendMsg{flags: m.meta.Flags, date: m.meta.InternalDate, size: m.item.Size}
			if b.bufs != nil && b.bufs[i] != nil {
				buf := b.bufs[i]
				am[i].body = func(w io.Writer) error { _, err := w.Write(buf); return err }
			} else {
				item := m.item
				am[i].body = func(w io.Writer) error { return r.stream(w, item) }
			}
		}
		tag, err := r.ac.sendAppend(dest, am)
		if err != nil {
			return err
		}
		b.tag = tag
		pending = append(pending, b)
		for len(pending) >= inFlight {
			if err := r.finish(dest, pending[0]); err != nil {
				return err
			}
			pending = pending[1:]
		}
		return nil
	}
	drain := func() error {
		for _, b := range pending {
			if err := r.finish(dest, b); err != nil {
				return err
			}
		}
		pending = nil
		return nil
	}
	for _, m := range msgs {
		if err := r.ctx.Err(); err != nil {
			// Cancelled: read the answers to what was sent, so nothing
			// lands after this restore returns.
			if derr := drain(); derr != nil && r.ctx.Err() == nil {
				return derr
			}
			return err
		}
		if m.item.Size > appendStreamed {
			// Large: its own command, streamed from the store, after
			// everything before it is answered. A store error in the
			// middle breaks the command: the connection is dropped (and
			// made again) and the message listed as failed.
			if err := send(cur); err != nil {
				return err
			}
			cur, curBytes = &batch{}, 0
			if err := drain(); err != nil {
				return err
			}
			if r.ac == nil {
				ac, err := dialAppend(r.ctx, r.a)
				if err != nil {
					return err
				}
				r.ac = ac
			}
			err := send(&batch{msgs: []restoreMsg{m}})
			if err == nil {
				err = drain()
			}
			if err != nil {
				var se storeError
				if r.ctx.Err() != nil || !errors.As(err, &se) {
					return err
				}
				r.failItem(m, se.error)
				r.ac.close()
				r.ac, pending = nil, nil
			}
			continue
		}
		if r.ac == nil {
			ac, err := dialAppend(r.ctx, r.a)
			if err != nil {
				return err
			}
			r.ac = ac
		}
		buf, err := r.readItem(m.item)
		if err != nil {
			if r.ctx.Err() != nil {
				return r.ctx.Err()
			}
			r.failItem(m, err)
			continue
		}
		if len(cur.msgs) > 0 && (len(cur.msgs) >= perCommand || curBytes+int64(len(buf)) > appendBatchBytes) {
			if err := send(cur); err != nil {
				return err
			}
			cur, curBytes = &batch{}, 0
		}
		cur.msgs = append(cur.msgs, m)
		cur.bufs = append(cur.bufs, buf)
		curBytes += int64(len(buf))
	}
	if err := send(cur); err != nil {
		return err
	}
	return drain()
}

// storeError is a failure reading an item from the store while it streams.
type storeError struct{ error }

func (e storeError) Unwrap() error { return e.error }

func (r *restoreRun) stream(w io.Writer, it blobstore.Item) error {
	rc, err := r.open(r.ctx, it.Content)
	if err != nil {
		return storeError{err}
	}
	defer rc.Close()
	n, err := io.Copy(w, rc)
	if err != nil {
		var we interface{ Timeout() bool }
		if errors.As(err, &we) {
			return err // the connection, not the store
		}
		return storeError{err}
	}
	if n != it.Size {
		return storeError{fmt.Errorf("the stored message has %d bytes, not %d", n, it.Size)}
	}
	return nil
}

func (r *restoreRun) readItem(it blobstore.Item) ([]byte, error) {
	rc, err := r.open(r.ctx, it.Content)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	buf := make([]byte, 0, it.Size)
	buf, err = readAllInto(buf, rc)
	if err != nil {
		return nil, err
	}
	if int64(len(buf)) != it.Size {
		return nil, fmt.Errorf("the stored message has %d bytes, not %d", len(buf), it.Size)
	}
	return buf, nil
}

// finish reads a batch's answer. A quota refusal stops the restore; any
// other refusal is retried one message per command, so only the messages
// the server refuses fail.
func (r *restoreRun) finish(dest string, b *batch) error {
	resp, err := r.ac.wait(b.tag)
	if err != nil {
		return err
	}
	if resp.Status == "OK" {
		var n int64
		for _, m := range b.msgs {
			n += m.item.Size
		}
		r.res.Restored += int64(len(b.msgs))
		r.prog.AddDone(int64(len(b.msgs)), n)
		return nil
	}
	if isQuota(resp) {
		return quotaFailure(r.a, fmt.Errorf("the server refused the append: %s", resp.Text))
	}
	if len(b.msgs) == 1 {
		r.failItem(b.msgs[0], fmt.Errorf("the server refused the message: %s %s", resp.Status, resp.Text))
		return nil
	}
	for i, m := range b.msgs {
		one := &batch{msgs: []restoreMsg{m}}
		if b.bufs != nil {
			one.bufs = [][]byte{b.bufs[i]}
		}
		buf := one.bufs
		am := []appendMsg{{flags: m.meta.Flags, date: m.meta.InternalDate, size: m.item.Size,
			body: func(w io.Writer) error { _, err := w.Write(buf[0]); return err }}}
		tag, err := r.ac.sendAppend(dest, am)
		if err != nil {
			return err
		}
		one.tag = tag
		if err := r.finish(dest, one); err != nil {
			return err
		}
	}
	return nil
}

func isQuota(resp response) bool {
	return resp.Code == "OVERQUOTA" || strings.Contains(strings.ToLower(resp.Text), "quota")
}

func (r *restoreRun) failItem(m restoreMsg, err error) {
	var fe *app.FailureError
	if !errors.As(err, &fe) {
		err = app.Fail("imap.message_not_restored", map[string]any{"folder": m.item.Path, "uid": m.meta.UID}, err)
	}
	r.res.Failed = append(r.res.Failed, ItemFailure{ItemID: m.item.ID, Folder: m.item.Path, UID: m.meta.UID, Err: err})
}
