package m365

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/mail"
	"sort"
	"strings"
	"time"

	"backstop/app"
	"backstop/app/blobstore"
	"backstop/app/graph"
)

// Restore limits Graph sets on a created message.
const (
	// inlineAttachmentsMax is the most attachment bytes posted with the
	// message itself; above it each attachment is added on its own
	// (AddAttachment, with an upload session from 3 MB).
	inlineAttachmentsMax = 3 << 20
	// maxXHeaders is how many X- headers are carried over: Graph accepts
	// only X- headers on create and rejects a message with too many.
	maxXHeaders    = 5
	maxXHeaderSize = 900
)

// RestoreMail recreates messages as real (not draft) messages with their
// sent and received times and attachments, skipping those already in the
// destination folder. The snapshot's folder structure is recreated under
// req.Folder below the mailbox root. A message already in its destination
// folder (same internetMessageId) is skipped, so a second run adds
// nothing; nothing is ever overwritten. A message that cannot be read or
// created is in Failed; failures of the whole mailbox end the restore.
func RestoreMail(ctx context.Context, c *graph.Client, req RestoreRequest, open Opener, progress Progress) (*RestoreResult, error) {
	ec := errContext{permission: permMail, mailbox: req.UserID, restore: true}
	prog := app.NewProgressReporter(progress)
	prog.Phase("transferring")
	res := &RestoreResult{}
	var msgs []blobstore.Item
	for _, it := range req.Items {
		if it.Kind == KindMessage {
			msgs = append(msgs, it)
		}
	}
	prog.AddTotals(int64(len(msgs)), 0)
	sort.SliceStable(msgs, func(i, j int) bool { return msgs[i].Path < msgs[j].Path })
	top, err := c.EnsureMailFolder(ctx, req.UserID, "msgfolderroot", req.Folder)
	if err != nil {
		return nil, failure(c, ec, err)
	}
	folders := map[string]string{"": top.ID}
	existing := map[string]map[string]struct{}{}
	ensure := func(path string) (string, error) {
		if id, ok := folders[path]; ok {
			return id, nil
		}
		parent, cur := top.ID, ""
		for _, seg := range strings.Split(strings.Trim(path, "/"), "/") {
			if cur == "" {
				cur = seg
			} else {
				cur += "/" + seg
			}
			if id, ok := folders[cur]; ok {
				parent = id
				continue
			}
			f, err := c.EnsureMailFolder(ctx, req.UserID, parent, UnescapeName(seg))
			if err != nil {
				return "", err
			}
			folders[cur], parent = f.ID, f.ID
		}
		return parent, nil
	}
	// Empty folders of the selection are recreated too.
	for _, it := range req.Items {
		if it.Kind == KindFolder && strings.Trim(it.Path, "/") != "" {
			if _, err := ensure(strings.Trim(it.Path, "/")); err != nil {
				return nil, failure(c, ec, err)
			}
		}
	}
	for _, it := range msgs {
		path := strings.Trim(it.Path, "/")
		folderID, err := ensure(path)
		if err != nil {
			return nil, failure(c, ec, err)
		}
		have := existing[folderID]
		if have == nil {
			have = map[string]struct{}{}
			err := c.ListMessages(ctx, req.UserID, folderID, func(page []graph.Message) error {
				for _, m := range page {
					if m.InternetMessageID != "" {
						have[normalizeMessageID(m.InternetMessageID)] = struct{}{}
					}
				}
				return nil
			})
			if err != nil {
				return nil, failure(c, ec, err)
			}
			existing[folderID] = have
		}
		skipped, err := restoreMessage(ctx, c, req.UserID, folderID, it, open, have)
		switch {
		case err == nil && skipped:
			res.Skipped++
		case err == nil:
			res.Restored++
		default:
			fe := failure(c, ec, err)
			if mailboxWide(fe) && !isItemLevel(fe) {
				return nil, fe
			}
			res.Failed = append(res.Failed, ItemFailure{ItemID: it.ID, Ref: path + "/" + it.Name, Err: fe})
		}
		prog.AddDone(1, it.Size)
	}
	prog.Flush()
	return res, nil
}

// isItemLevel reports a failure of one message that the next one may not
// share (a refused message body).
func isItemLevel(err error) bool {
	return graph.StatusOf(err) == 400 || graph.StatusOf(err) == 413
}

func normalizeMessageID(id string) string {
	return strings.ToLower(strings.Trim(strings.TrimSpace(id), "<>"))
}

// restoreMessage creates one message unless its internetMessageId is in
// have; it adds the id to have.
func restoreMessage(ctx context.Context, c *graph.Client, userID, folderID string, it blobstore.Item, open Opener, have map[string]struct{}) (bool, error) {
	rc, err := open(ctx, it.Content)
	if err != nil {
		return false, err
	}
	raw, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return false, err
	}
	var meta MessageMeta
	if len(it.Meta) > 0 {
		json.Unmarshal(it.Meta, &meta)
	}
	nm, large, err := buildMessage(raw, meta, it.SHA256)
	if err != nil {
		return false, err
	}
	key := normalizeMessageID(nm.InternetMessageID)
	if _, ok := have[key]; ok {
		return true, nil
	}
	created, err := c.CreateMessage(ctx, userID, folderID, nm)
	if err != nil {
		return false, err
	}
	have[key] = struct{}{}
	for _, a := range large {
		if err := c.AddAttachment(ctx, userID, created.ID, a); err != nil {
			return false, err
		}
	}
	return false, nil
}

// buildMessage turns stored MIME into the message Graph creates, and the
// attachments to add after it when they are too large to post with it.
func buildMessage(raw []byte, meta MessageMeta, sha string) (*graph.NewMessage, []graph.FileAttachment, error) {
	p, err := parseMIME(raw)
	if err != nil {
		// Not a readable message: keep it whole as an attachment.
		p = &parsedMessage{header: mail.Header{}, attachments: []attachment{{name: "message.eml", contentType: "message/rfc822", data: raw}}}
	}
	h := p.header
	nm := &graph.NewMessage{Subject: decodeHeader(h.Get("Subject")), IsRead: meta.IsRead, Categories: meta.Categories}
	if nm.Subject == "" {
		nm.Subject = meta.Subject
	}
	switch {
	case p.html != "":
		nm.Body = graph.ItemBody{ContentType: "html", Content: p.html}
	default:
		nm.Body = graph.ItemBody{ContentType: "text", Content: p.text}
	}
	if from := recipients(h, "From"); len(from) > 0 {
		nm.From = &from[0]
		nm.Sender = &from[0]
		if s := recipients(h, "Sender"); len(s) > 0 {
			nm.Sender = &s[0]
		}
	}
	nm.ToRecipients = recipients(h, "To")
	nm.CcRecipients = recipients(h, "Cc")
	nm.BccRecipients = recipients(h, "Bcc")
	nm.ReplyTo = recipients(h, "Reply-To")
	nm.InternetMessageID = strings.TrimSpace(h.Get("Message-Id"))
	if nm.InternetMessageID == "" {
		nm.InternetMessageID = meta.InternetMessageID
	}
	if nm.InternetMessageID == "" {
		if sha == "" {
			s := sha256.Sum256(raw)
			sha = hex.EncodeToString(s[:])
		}
		nm.InternetMessageID = "<" + sha + "@backstop.restore>"
	}
	for name, vals := range h {
		if len(nm.InternetMessageHeaders) == maxXHeaders {
			break
		}
		if !strings.HasPrefix(strings.ToLower(name), "x-") || strings.HasPrefix(strings.ToLower(name), "x-ms-exchange") {
			continue
		}
		if len(vals) > 0 && len(vals[0]) <= maxXHeaderSize {
			nm.InternetMessageHeaders = append(nm.InternetMessageHeaders, graph.InternetHeader{Name: name, Value: vals[0]})
		}
	}
	sort.Slice(nm.InternetMessageHeaders, func(i, j int) bool {
		return nm.InternetMessageHeaders[i].Name < nm.InternetMessageHeaders[j].Name
	})
	switch strings.ToLower(h.Get("Importance")) {
	case "high", "low":
		nm.Importance = strings.ToLower(h.Get("Importance"))
	}
	sent := meta.SentDateTime
	if sent == nil {
		if t, err := mail.ParseDate(h.Get("Date")); err == nil {
			sent = &t
		}
	}
	received := meta.ReceivedDateTime
	if received == nil {
		received = sent
	}
	flags := "0"
	if meta.IsRead {
		flags = "1" // MSGFLAG_READ, and never MSGFLAG_UNSENT: not a draft
	}
	nm.SingleValueExtendedProperties = []graph.ExtendedProperty{{ID: "Integer 0x0E07", Value: flags}}
	if sent != nil {
		nm.SingleValueExtendedProperties = append(nm.SingleValueExtendedProperties,
			graph.ExtendedProperty{ID: "SystemTime 0x0039", Value: sent.UTC().Format(time.RFC3339)})
	}
	if received != nil {
		nm.SingleValueExtendedProperties = append(nm.SingleValueExtendedProperties,
			graph.ExtendedProperty{ID: "SystemTime 0x0E06", Value: received.UTC().Format(time.RFC3339)})
	}
	var total int
	var atts []graph.FileAttachment
	for _, a := range p.attachments {
		total += len(a.data)
		atts = append(atts, graph.FileAttachment{ODataType: "#microsoft.graph.fileAttachment", Name: a.name,
			ContentType: a.contentType, ContentID: a.contentID, IsInline: a.inline, ContentBytes: a.data})
	}
	if total < inlineAttachmentsMax {
		nm.Attachments = atts
		return nm, nil, nil
	}
	return nm, atts, nil
}

// recipients reads an address list header; unparsable ones are left out.
func recipients(h mail.Header, field string) []graph.Recipient {
	v := h.Get(field)
	if v == "" {
		return nil
	}
	list, err := (&mail.AddressParser{WordDecoder: wordDecoder}).ParseList(v)
	if err != nil {
		return nil
	}
	out := make([]graph.Recipient, 0, len(list))
	for _, a := range list {
		var r graph.Recipient
		r.EmailAddress.Name, r.EmailAddress.Address = a.Name, a.Address
		out = append(out, r)
	}
	return out
}
