package graphtest

import (
	"encoding/json"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"
)

// Upload session rules (driveitem-createuploadsession.md): every range
// but the last is a multiple of 320 KiB, each under 60 MiB, in order, with
// the same total; the upload URL is pre-authenticated and must not get an
// Authorization header.
const (
	driveFragmentUnit = 327680
	maxDriveFragment  = 60 << 20
	maxSimpleUpload   = 4 << 20 // driveitem-put-content.md: simple upload up to 4 MB
	sessionLifetime   = 24 * time.Hour
)

type attachSession struct {
	userID, messageID string
	name, contentType string
	inline            bool
	size              int64
	data              []byte
	expires           time.Time
}

type driveSession struct {
	driveID, parentID, name string
	conflict                string
	size                    int64 // -1 until the first range
	data                    []byte
	expires                 time.Time
}

// contentRange reads "bytes a-b/total".
func contentRange(h string) (start, end, total int64, ok bool) {
	spec, found := strings.CutPrefix(strings.TrimSpace(h), "bytes ")
	if !found {
		return 0, 0, 0, false
	}
	rg, tot, found := strings.Cut(spec, "/")
	if !found {
		return 0, 0, 0, false
	}
	a, b, found := strings.Cut(rg, "-")
	if !found {
		return 0, 0, 0, false
	}
	var err1, err2, err3 error
	start, err1 = strconv.ParseInt(a, 10, 64)
	end, err2 = strconv.ParseInt(b, 10, 64)
	total, err3 = strconv.ParseInt(tot, 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || start < 0 || end < start || end >= total {
		return 0, 0, 0, false
	}
	return start, end, total, true
}

func (s *Server) uploadURL(kind, tok string) string {
	return s.base + "/upload/" + kind + "/" + tok + "?authtoken=" + tok
}

// createAttachmentSession is POST …/messages/{id}/attachments/
// createUploadSession (attachment-createuploadsession.md,
// outlook-large-attachments.md): 3 MB to 150 MB.
func (s *Server) createAttachmentSession(c *call, u *user, messageID string) answer {
	var in struct {
		AttachmentItem struct {
			AttachmentType string `json:"attachmentType"`
			Name           string `json:"name"`
			Size           int64  `json:"size"`
			ContentType    string `json:"contentType"`
			IsInline       bool   `json:"isInline"`
		} `json:"AttachmentItem"`
	}
	if err := json.Unmarshal(c.body, &in); err != nil || in.AttachmentItem.Name == "" {
		return c.errAnswer(http.StatusBadRequest, "ErrorInvalidRequest", "AttachmentItem with a name and a size is required.")
	}
	it := in.AttachmentItem
	if !strings.EqualFold(it.AttachmentType, "file") {
		return c.errAnswer(http.StatusBadRequest, "ErrorInvalidRequest", "Only attachmentType file is supported.")
	}
	if it.Size < maxInlineAttach {
		return c.errAnswer(http.StatusBadRequest, "ErrorAttachmentSizeShouldNotBeLessThanMinimumSize", "Attachment size should not be less than 3 MB.")
	}
	if it.Size > maxSessionAttach {
		return c.errAnswer(http.StatusBadRequest, "ErrorAttachmentSizeExceeded", "Attachment size exceeds the limit of 150 MB.")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if u.mb.messages[messageID] == nil {
		return c.folderNotFound()
	}
	sess := &attachSession{userID: u.ID, messageID: messageID, name: it.Name, contentType: it.ContentType,
		inline: it.IsInline, size: it.Size, expires: time.Now().Add(sessionLifetime)}
	tok := s.putOpaqueLocked(sess)
	return jsonAnswer(http.StatusCreated, map[string]any{
		"@odata.context":     s.absolute(c, "/$metadata#microsoft.graph.uploadSession"),
		"uploadUrl":          s.uploadURL("attachment", tok),
		"expirationDateTime": fmtTime(sess.expires),
		"nextExpectedRanges": []string{"0-"},
	})
}

// serveAttachmentUpload takes one PUT of an attachment upload session
// (outlook-large-attachments.md): no Authorization header, ranges in order
// under 4 MB each; 200 with nextExpectedRanges, 201 with Location at the
// end. The PUTs count against the mailbox's limits.
func (s *Server) serveAttachmentUpload(r *http.Request, tok string, body []byte, reqID string) answer {
	c := &call{reqID: reqID, method: r.Method}
	s.countRequest()
	s.mu.Lock()
	sess, _ := s.opaque[tok].(*attachSession)
	s.mu.Unlock()
	if sess == nil || r.URL.Query().Get("authtoken") != tok || time.Now().After(sess.expires) {
		s.sleep()
		return c.errAnswer(http.StatusNotFound, "ErrorItemNotFound", "The upload session was not found or has expired.")
	}
	release, a, ok := s.admitMailbox(c, sess.userID)
	if !ok {
		s.sleep()
		return a
	}
	defer release()
	s.sleep()
	if r.Header.Get("Authorization") != "" {
		// outlook-large-attachments.md: the uploadUrl carries its own
		// token; an Authorization header makes the PUT fail with 401.
		return c.errAnswer(http.StatusUnauthorized, "InvalidAuthenticationToken", "Do not send an Authorization header to a pre-authenticated upload URL.")
	}
	if r.Method == http.MethodDelete {
		s.mu.Lock()
		delete(s.opaque, tok)
		s.mu.Unlock()
		return answer{status: http.StatusNoContent}
	}
	if r.Method != http.MethodPut {
		return methodNotAllowed(c)
	}
	start, end, total, ok := contentRange(r.Header.Get("Content-Range"))
	switch {
	case !ok || int64(len(body)) != end-start+1:
		return c.errAnswer(http.StatusBadRequest, "ErrorInvalidRequest", "The Content-Range header is missing or does not match the body.")
	case total != sess.size:
		return c.errAnswer(http.StatusBadRequest, "ErrorInvalidRequest", "The total size in Content-Range does not match the session's size.")
	case len(body) > maxAttachChunk:
		return c.tooLarge()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if start != int64(len(sess.data)) {
		return withHeader(c.errAnswer(http.StatusRequestedRangeNotSatisfiable, "ErrorInvalidRange", "The range does not start at the next expected byte."),
			"Content-Range", "bytes */"+strconv.FormatInt(sess.size, 10))
	}
	sess.data = append(sess.data, body...)
	if int64(len(sess.data)) < sess.size {
		return jsonAnswer(http.StatusOK, map[string]any{"expirationDateTime": fmtTime(sess.expires),
			"nextExpectedRanges": []string{strconv.Itoa(len(sess.data)) + "-"}})
	}
	delete(s.opaque, tok)
	u := s.users[sess.userID]
	var m *message
	if u != nil {
		m = u.mb.messages[sess.messageID]
	}
	if m == nil {
		return c.folderNotFound()
	}
	att := &attachment{id: exchangeID(), name: sess.name, contentType: sess.contentType, inline: sess.inline, content: sess.data}
	m.attachments = append(m.attachments, att)
	m.mime = renderMIME(m)
	u.mb.touch(m)
	loc := s.base + "/v1.0/Users('" + u.ID + "')/Messages('" + m.id + "')/Attachments('" + att.id + "')"
	return withHeader(answer{status: http.StatusCreated}, "Location", loc)
}

// createDriveSession is POST …/items/{parent}:/{name}:/createUploadSession
// (driveitem-createuploadsession.md). conflictBehavior fail (also the
// fake's default, the strictest) refuses an existing name with 409
// nameAlreadyExists, here and again at commit.
func (s *Server) createDriveSession(c *call, d *drive, base *driveItem, rel string) answer {
	var in struct {
		Item struct {
			Conflict string `json:"@microsoft.graph.conflictBehavior"`
			Name     string `json:"name"`
		} `json:"item"`
	}
	if len(c.body) > 0 {
		if err := json.Unmarshal(c.body, &in); err != nil {
			return c.errAnswer(http.StatusBadRequest, "invalidRequest", "Invalid request body.")
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	parent, name := resolveParent(d, base, rel)
	if parent == nil {
		return c.itemNotFound()
	}
	conflict := in.Item.Conflict
	if conflict == "" {
		conflict = "fail"
	}
	if d.child(parent, name) != nil && conflict == "fail" {
		return c.errInner(http.StatusConflict, "nameAlreadyExists", "nameAlreadyExists", "The specified item name already exists.")
	}
	sess := &driveSession{driveID: d.id, parentID: parent.id, name: name, conflict: conflict, size: -1,
		expires: time.Now().Add(sessionLifetime)}
	tok := s.putOpaqueLocked(sess)
	return jsonAnswer(http.StatusOK, map[string]any{
		"@odata.context":     s.absolute(c, "/$metadata#microsoft.graph.uploadSession"),
		"uploadUrl":          s.uploadURL("drive", tok),
		"expirationDateTime": fmtTime(sess.expires),
		"nextExpectedRanges": []string{"0-"},
	})
}

func resolveParent(d *drive, base *driveItem, rel string) (*driveItem, string) {
	if base == nil {
		return nil, ""
	}
	dir, name := path.Split(strings.Trim(rel, "/"))
	parent := d.byPath(base, dir)
	if parent == nil || !parent.isFolder || name == "" {
		return nil, ""
	}
	return parent, name
}

// commitLocked creates or replaces name under parent.
func (s *Server) commitLocked(d *drive, parent *driveItem, name, conflict string, data []byte) (*driveItem, bool, bool) {
	old := d.child(parent, name)
	if old != nil {
		switch conflict {
		case "replace":
			if !old.isFolder {
				old.setContent(data)
				old.corrupt = false
				d.touch(old)
				return old, false, true
			}
			return nil, false, false
		case "rename":
			name = uniqueName(d, parent, name)
		default:
			return nil, false, false
		}
	}
	return d.add(parent.id, name, false, data), true, true
}

// serveDriveUpload takes the requests on a drive upload URL
// (driveitem-createuploadsession.md): PUT a range (202 with
// nextExpectedRanges, 201/200 with the driveItem at the end), GET the
// status, DELETE to cancel (204).
func (s *Server) serveDriveUpload(r *http.Request, tok string, body []byte, reqID string) answer {
	c := &call{reqID: reqID, method: r.Method}
	s.countRequest()
	s.mu.Lock()
	sess, _ := s.opaque[tok].(*driveSession)
	s.mu.Unlock()
	if sess == nil || r.URL.Query().Get("authtoken") != tok || time.Now().After(sess.expires) {
		s.sleep()
		return c.errInner(http.StatusNotFound, "itemNotFound", "uploadSessionNotFound", "The upload session was not found.")
	}
	release, a, ok := s.admitSharePoint(c, 1)
	if !ok {
		s.sleep()
		return a
	}
	defer release()
	s.sleep()
	if r.Header.Get("Authorization") != "" {
		// "Including the Authorization header when issuing the PUT call
		// may result in an HTTP 401 Unauthorized response."
		return c.errAnswer(http.StatusUnauthorized, "unauthenticated", "The upload URL is pre-authenticated: do not send an Authorization header.")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	status := func(code int) answer {
		next := []string{strconv.Itoa(len(sess.data)) + "-"}
		return jsonAnswer(code, map[string]any{"expirationDateTime": fmtTime(sess.expires), "nextExpectedRanges": next})
	}
	switch r.Method {
	case http.MethodDelete:
		delete(s.opaque, tok)
		return answer{status: http.StatusNoContent}
	case http.MethodGet:
		return status(http.StatusOK)
	case http.MethodPut:
	default:
		return methodNotAllowed(c)
	}
	start, end, total, ok := contentRange(r.Header.Get("Content-Range"))
	n := int64(len(body))
	switch {
	case !ok || n != end-start+1:
		return c.errInner(http.StatusBadRequest, "invalidRequest", "invalidRange", "The Content-Range header is missing, malformed or does not match the body.")
	case sess.size >= 0 && total != sess.size:
		return c.errInner(http.StatusBadRequest, "invalidRequest", "invalidRange", "The total size in Content-Range changed during the session.")
	case n >= maxDriveFragment:
		return c.errInner(http.StatusRequestEntityTooLarge, "invalidRequest", "invalidRange", "Each fragment must be smaller than 60 MiB.")
	case start < int64(len(sess.data)):
		// errors.md: fragmentOverlap; a range already received is 416.
		return c.errInner(http.StatusRequestedRangeNotSatisfiable, "invalidRange", "fragmentOverlap", "The uploaded fragment overlaps with data that has already been received.")
	case start > int64(len(sess.data)):
		return c.errInner(http.StatusRequestedRangeNotSatisfiable, "invalidRange", "fragmentOutOfOrder", "The uploaded fragment is out of order.")
	case end != total-1 && n%driveFragmentUnit != 0:
		// "the size of each byte range MUST be a multiple of 320 KiB
		// (327,680 bytes)": Graph fails such uploads; the fake refuses
		// the fragment at once.
		return c.errInner(http.StatusBadRequest, "invalidRequest", "invalidRange", "Fragment size must be a multiple of 320 KiB except for the last fragment.")
	}
	sess.size = total
	sess.data = append(sess.data, body...)
	if int64(len(sess.data)) < total {
		return status(http.StatusAccepted)
	}
	delete(s.opaque, tok)
	d := s.drives[sess.driveID]
	var parent *driveItem
	if d != nil {
		parent = d.items[sess.parentID]
	}
	if parent == nil || parent.deleted {
		return c.itemNotFound()
	}
	it, created, ok := s.commitLocked(d, parent, sess.name, sess.conflict, sess.data)
	if !ok {
		return c.errInner(http.StatusConflict, "nameAlreadyExists", "nameAlreadyExists", "The specified item name already exists.")
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	return jsonAnswer(code, s.itemJSON(c, d, it, false))
}

// putContent is PUT …/items/{parent}:/{name}:/content, the simple upload
// for files up to 4 MB (driveitem-put-content.md); conflictBehavior comes
// from the query and defaults to replace.
func (s *Server) putContent(c *call, d *drive, base *driveItem, rel string) answer {
	if len(c.body) > maxSimpleUpload {
		return c.errInner(http.StatusRequestEntityTooLarge, "invalidRequest", "maxFileSizeExceeded", "Simple upload is limited to 4 MB; use an upload session.")
	}
	conflict := c.query.Get("@microsoft.graph.conflictBehavior")
	if conflict == "" {
		conflict = "replace"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	parent, name := resolveParent(d, base, rel)
	if parent == nil {
		return c.itemNotFound()
	}
	it, created, ok := s.commitLocked(d, parent, name, conflict, c.body)
	if !ok {
		return c.errInner(http.StatusConflict, "nameAlreadyExists", "nameAlreadyExists", "The specified item name already exists.")
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	return jsonAnswer(code, s.itemJSON(c, d, it, false))
}
