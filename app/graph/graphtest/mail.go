package graphtest

import (
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// mailErr answers for a user whose mailbox cannot be reached
// (Corso api/users.go EvaluateMailboxError: 404 MailboxNotEnabledForRESTAPI).
func (c *call) noMailbox() answer {
	return c.errAnswer(http.StatusNotFound, "MailboxNotEnabledForRESTAPI", "The mailbox is either inactive, soft-deleted, or is hosted on-premise.")
}

func (c *call) folderNotFound() answer {
	return c.errAnswer(http.StatusNotFound, "ErrorItemNotFound", "The specified object was not found in the store.")
}

func folderJSON(mb *mailbox, f *folder) map[string]any {
	unread := 0
	for _, m := range f.msgs {
		if !m.isRead {
			unread++
		}
	}
	children := 0
	for _, id := range f.children {
		if !mb.folders[id].hidden {
			children++
		}
	}
	out := map[string]any{
		"id": f.id, "displayName": f.name, "parentFolderId": f.parentID, "childFolderCount": children,
		"unreadItemCount": unread, "totalItemCount": len(f.msgs), "sizeInBytes": 0, "isHidden": f.hidden,
	}
	if f.search {
		out["@odata.type"] = "#microsoft.graph.mailSearchFolder"
		out["isSupported"] = true
		out["includeNestedFolders"] = true
		out["sourceFolderIds"] = []string{mb.rootID}
		out["filterQuery"] = "isRead eq false"
	}
	return out
}

// pageParams reads $top (1..max) and $skip for the Outlook collections
// that page with $skip (paging.md; default page size def).
func (c *call) pageParams(def, max int) (top, skip int, bad *answer) {
	top = def
	// Outlook honours Prefer: odata.maxpagesize on collections too
	// (paging.md); $top wins when both are given.
	if m := maxPageSize.FindStringSubmatch(c.header.Get("Prefer")); m != nil {
		if n, err := strconv.Atoi(m[1]); err == nil && n > 0 {
			top = min(n, max)
		}
	}
	if t := c.query.Get("$top"); t != "" {
		n, err := strconv.Atoi(t)
		if err != nil || n < 1 || n > max {
			a := c.errAnswer(http.StatusBadRequest, "ErrorInvalidParameter", "The value '"+t+"' of parameter 'Top' should be between 1 and "+strconv.Itoa(max)+".")
			return 0, 0, &a
		}
		top = n
	}
	if sk := c.query.Get("$skip"); sk != "" {
		n, err := strconv.Atoi(sk)
		if err != nil || n < 0 {
			a := c.errAnswer(http.StatusBadRequest, "ErrorInvalidParameter", "Invalid $skip.")
			return 0, 0, &a
		}
		skip = n
	}
	return top, skip, nil
}

// nextSkip is the nextLink of a $skip-paged collection: this request's
// query with $skip moved on.
func (s *Server) nextSkip(c *call, skip int) string {
	q := url.Values{}
	for k, v := range c.query {
		q[k] = v
	}
	q.Set("$skip", strconv.Itoa(skip))
	return s.absolute(c, c.path+"?"+q.Encode())
}

// listFolders is GET /users/{id}/mailFolders (only the folders under the
// root; user-list-mailfolders.md) and …/mailFolders/{id}/childFolders
// (mailfolder-list-childfolders.md): 10 per page by default, hidden folders
// only with includeHiddenFolders=true.
func (s *Server) listFolders(c *call, u *user, parent string) answer {
	top, skip, bad := c.pageParams(10, 999)
	if bad != nil {
		return *bad
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := u.mb.folder(parent)
	if p == nil {
		return c.folderNotFound()
	}
	hidden := strings.EqualFold(c.query.Get("includeHiddenFolders"), "true")
	var all []*folder
	for _, id := range p.children {
		if f := u.mb.folders[id]; hidden || !f.hidden {
			all = append(all, f)
		}
	}
	sel := selectOf(c)
	vals := []map[string]any{}
	for i := skip; i < len(all) && i < skip+top; i++ {
		j := folderJSON(u.mb, all[i])
		if sel != nil {
			t := j["@odata.type"]
			j = project(j, sel, nil)
			if t != nil {
				j["@odata.type"] = t
			}
		}
		vals = append(vals, j)
	}
	body := map[string]any{"value": vals}
	if skip+top < len(all) {
		body["@odata.nextLink"] = s.nextSkip(c, skip+top)
	}
	return jsonAnswer(http.StatusOK, body)
}

func (s *Server) getFolder(c *call, u *user, id string) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := u.mb.folder(id)
	if f == nil {
		return c.folderNotFound()
	}
	return jsonAnswer(http.StatusOK, folderJSON(u.mb, f))
}

// createFolder is POST …/mailFolders/{id}/childFolders
// (mailfolder-post-childfolders.md); a duplicate displayName is 409
// ErrorFolderExists.
func (s *Server) createFolder(c *call, u *user, parent string) answer {
	var in struct {
		DisplayName string `json:"displayName"`
		IsHidden    bool   `json:"isHidden"`
	}
	if err := json.Unmarshal(c.body, &in); err != nil {
		return c.errAnswer(http.StatusBadRequest, "RequestBodyRead", "Invalid JSON body: "+err.Error())
	}
	if strings.TrimSpace(in.DisplayName) == "" {
		return c.errAnswer(http.StatusBadRequest, "ErrorInvalidRequest", "The request is invalid: displayName is required.")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := u.mb.folder(parent)
	if p == nil {
		return c.folderNotFound()
	}
	for _, id := range p.children {
		if strings.EqualFold(u.mb.folders[id].name, in.DisplayName) {
			return c.errAnswer(http.StatusConflict, "ErrorFolderExists", "A folder with the specified name already exists.")
		}
	}
	f := u.mb.addFolder(p.id, in.DisplayName, in.IsHidden)
	return jsonAnswer(http.StatusCreated, folderJSON(u.mb, f))
}

// messageJSON is a message resource (resources/message.md).
func messageJSON(m *message) map[string]any {
	rcpt := func(a *address) any {
		if a == nil {
			return nil
		}
		return map[string]any{"emailAddress": map[string]any{"name": a.name, "address": a.addr}}
	}
	list := func(as []address) []any {
		out := []any{}
		for i := range as {
			out = append(out, rcpt(&as[i]))
		}
		return out
	}
	cats := m.categories
	if cats == nil {
		cats = []string{}
	}
	return map[string]any{
		"@odata.etag": "W/\"" + m.changeKey + "\"", "id": m.id,
		"createdDateTime": fmtTime(m.created), "lastModifiedDateTime": fmtTime(m.modified),
		"changeKey": m.changeKey, "categories": cats,
		"receivedDateTime": fmtTime(m.received), "sentDateTime": fmtTime(m.sent),
		"hasAttachments": len(m.attachments) > 0, "internetMessageId": m.internetMessageID,
		"subject": m.subject, "bodyPreview": m.bodyPreview, "importance": "normal",
		"parentFolderId": m.folderID, "conversationId": "AAQkAD" + m.id[6:20],
		"isRead": m.isRead, "isDraft": m.isDraft, "inferenceClassification": "focused",
		"body":   map[string]any{"contentType": m.bodyType, "content": m.body},
		"sender": rcpt(m.from), "from": rcpt(m.from),
		"toRecipients": list(m.to), "ccRecipients": list(m.cc), "bccRecipients": []any{}, "replyTo": []any{},
		"flag": map[string]any{"flagStatus": m.flagStatus},
	}
}

func projectMessage(m *message, sel []string) map[string]any {
	j := messageJSON(m)
	if sel == nil {
		return j
	}
	etag := j["@odata.etag"]
	j = project(j, sel, nil)
	j["@odata.etag"] = etag
	return j
}

// listMessages is GET …/mailFolders/{id}/messages
// (user-list-messages.md): newest first, 10 per page by default, $top up
// to 1000, $skip in the nextLink. It works for over-quota mailboxes.
func (s *Server) listMessages(c *call, u *user, folderID string) answer {
	top, skip, bad := c.pageParams(10, 1000)
	if bad != nil {
		return *bad
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f := u.mb.folder(folderID)
	if f == nil {
		return c.folderNotFound()
	}
	all := make([]*message, 0, len(f.msgs))
	for _, m := range f.msgs {
		all = append(all, m)
	}
	sort.Slice(all, func(i, j int) bool {
		if !all[i].received.Equal(all[j].received) {
			return all[i].received.After(all[j].received)
		}
		return all[i].id < all[j].id
	})
	sel := selectOf(c)
	vals := []map[string]any{}
	for i := skip; i < len(all) && i < skip+top; i++ {
		vals = append(vals, projectMessage(all[i], sel))
	}
	body := map[string]any{"value": vals}
	if skip+top < len(all) {
		body["@odata.nextLink"] = s.nextSkip(c, skip+top)
	}
	return jsonAnswer(http.StatusOK, body)
}

func (s *Server) getMessage(c *call, u *user, id string) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := u.mb.messages[id]
	if m == nil {
		return c.folderNotFound()
	}
	return jsonAnswer(http.StatusOK, projectMessage(m, selectOf(c)))
}

// messageValue is GET /users/{id}/messages/{id}/$value: the MIME stream
// (outlook-get-mime-message; observed Content-Type text/plain,
// msgraph-sdk-java #722).
func (s *Server) messageValue(c *call, u *user, id string) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := u.mb.messages[id]
	if m == nil {
		return c.folderNotFound()
	}
	h := http.Header{}
	h.Set("Content-Type", "text/plain")
	return answer{status: http.StatusOK, header: h, body: append([]byte(nil), m.mime...)}
}

// deleteMessage is DELETE /users/{id}/messages/{id} (message-delete.md).
func (s *Server) deleteMessage(c *call, u *user, id string) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := u.mb.messages[id]
	if m == nil {
		return c.folderNotFound()
	}
	u.mb.remove(m)
	return answer{status: http.StatusNoContent}
}
