package graphtest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Size limits of Outlook writes: a request carries at most 4 MB
// (user-post-messages.md, outlook-large-attachments.md), an attachment
// posted inline is under 3 MB, an upload session takes 3 MB to 150 MB.
const (
	maxRequestBody    = 4 << 20
	maxInlineAttach   = 3 << 20
	maxSessionAttach  = 150 << 20
	maxAttachChunk    = 4 << 20
	pidTagMsgFlags    = "integer 0x0e07"
	pidTagSubmitTime  = "systemtime 0x0039"
	pidTagDeliveryTim = "systemtime 0x0e06"
	msgFlagUnsent     = 0x8
)

func (c *call) tooLarge() answer {
	// The 413 is documented; the code is what Exchange sends for an
	// oversized request as far as we know.
	return c.errAnswer(http.StatusRequestEntityTooLarge, "ErrorRequestEntityTooLarge", "The request payload exceeds the limit of 4 MB.")
}

type jsonRecipient struct {
	EmailAddress struct {
		Name    string `json:"name"`
		Address string `json:"address"`
	} `json:"emailAddress"`
}

type jsonFileAttachment struct {
	ODataType    string `json:"@odata.type"`
	Name         string `json:"name"`
	ContentType  string `json:"contentType"`
	ContentID    string `json:"contentId"`
	IsInline     bool   `json:"isInline"`
	ContentBytes []byte `json:"contentBytes"`
}

type jsonNewMessage struct {
	Subject string `json:"subject"`
	Body    struct {
		ContentType string `json:"contentType"`
		Content     string `json:"content"`
	} `json:"body"`
	From                   *jsonRecipient  `json:"from"`
	ToRecipients           []jsonRecipient `json:"toRecipients"`
	CcRecipients           []jsonRecipient `json:"ccRecipients"`
	InternetMessageID      string          `json:"internetMessageId"`
	InternetMessageHeaders []struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"internetMessageHeaders"`
	IsRead                        bool     `json:"isRead"`
	Categories                    []string `json:"categories"`
	SingleValueExtendedProperties []struct {
		ID    string `json:"id"`
		Value string `json:"value"`
	} `json:"singleValueExtendedProperties"`
	Attachments []jsonFileAttachment `json:"attachments"`
	Flag        *struct {
		FlagStatus string `json:"flagStatus"`
	} `json:"flag"`
}

// createMessage is POST /users/{id}/messages (folderID "") and
// POST /users/{id}/mailFolders/{id}/messages (user-post-messages.md).
func (s *Server) createMessage(c *call, u *user, folderID string) answer {
	if len(c.body) > maxRequestBody {
		return c.tooLarge()
	}
	ct, _, _ := mime.ParseMediaType(c.header.Get("Content-Type"))
	switch ct {
	case "text/plain":
		return s.createFromMIME(c, u, folderID)
	case "application/json", "":
	default:
		return c.errAnswer(http.StatusUnsupportedMediaType, "UnsupportedMediaType", "Content-Type '"+ct+"' is not supported.")
	}
	var in jsonNewMessage
	if err := json.Unmarshal(c.body, &in); err != nil {
		return c.errAnswer(http.StatusBadRequest, "RequestBodyRead", "Invalid JSON: "+err.Error())
	}
	// resources/internetmessageheader.md and "Add custom data to
	// messages": only x- headers, at most 5 of them.
	if len(in.InternetMessageHeaders) > 5 {
		return c.errAnswer(http.StatusBadRequest, "InvalidInternetMessageHeaderCollection", "Maximum number of headers in one message should be less than or equal to 5.")
	}
	for _, h := range in.InternetMessageHeaders {
		if !strings.HasPrefix(strings.ToLower(h.Name), "x-") {
			return c.errAnswer(http.StatusBadRequest, "InvalidInternetMessageHeader", "The internet message header name '"+h.Name+"' should start with 'x-' or 'X-'.")
		}
	}
	now := time.Now().UTC().Truncate(time.Second)
	m := &message{id: exchangeID(), created: now, sent: now, received: now, isDraft: true,
		subject: in.Subject, internetMessageID: in.InternetMessageID, isRead: in.IsRead,
		categories: in.Categories, flagStatus: "notFlagged", bodyType: "text", body: in.Body.Content}
	if strings.EqualFold(in.Body.ContentType, "html") {
		m.bodyType = "html"
	}
	if in.Flag != nil && in.Flag.FlagStatus != "" {
		m.flagStatus = in.Flag.FlagStatus
	}
	if in.From != nil {
		m.from = &address{name: in.From.EmailAddress.Name, addr: in.From.EmailAddress.Address}
	}
	for _, r := range in.ToRecipients {
		m.to = append(m.to, address{name: r.EmailAddress.Name, addr: r.EmailAddress.Address})
	}
	for _, r := range in.CcRecipients {
		m.cc = append(m.cc, address{name: r.EmailAddress.Name, addr: r.EmailAddress.Address})
	}
	// extended-properties-overview.md: PidTagMessageFlags (0x0E07)
	// without MSGFLAG_UNSENT makes a non-draft, settable only on create;
	// PidTagClientSubmitTime (0x0039) and PidTagMessageDeliveryTime
	// (0x0E06) are the sent and received times.
	for _, p := range in.SingleValueExtendedProperties {
		switch strings.ToLower(strings.TrimSpace(p.ID)) {
		case pidTagMsgFlags:
			n, err := strconv.ParseInt(p.Value, 10, 32)
			if err != nil {
				return c.errAnswer(http.StatusBadRequest, "ErrorInvalidExtendedPropertyValue", "The extended property value is invalid.")
			}
			m.isDraft = n&msgFlagUnsent != 0
		case pidTagSubmitTime, pidTagDeliveryTim:
			t, err := time.Parse(time.RFC3339, p.Value)
			if err != nil {
				return c.errAnswer(http.StatusBadRequest, "ErrorInvalidExtendedPropertyValue", "The extended property value is invalid.")
			}
			if strings.EqualFold(p.ID, pidTagSubmitTime) {
				m.sent = t.UTC()
			} else {
				m.received = t.UTC()
			}
		}
	}
	for _, a := range in.Attachments {
		if a.ODataType != "#microsoft.graph.fileAttachment" {
			return c.errAnswer(http.StatusBadRequest, "ErrorInvalidRequest", "Only fileAttachment is supported by the fake.")
		}
		m.attachments = append(m.attachments, &attachment{id: exchangeID(), name: a.Name, contentType: a.ContentType, inline: a.IsInline, content: a.ContentBytes})
	}
	if m.internetMessageID == "" {
		m.internetMessageID = "<" + randToken(16) + "@fake.prod.outlook.com>"
	}
	var hdrs [][2]string
	for _, h := range in.InternetMessageHeaders {
		hdrs = append(hdrs, [2]string{h.Name, h.Value})
	}
	m.extraHeaders = hdrs
	m.mime = renderMIME(m)
	s.mu.Lock()
	defer s.mu.Unlock()
	f := u.mb.folder("drafts")
	if folderID != "" {
		if f = u.mb.folder(folderID); f == nil {
			return c.folderNotFound()
		}
	}
	u.mb.put(m, f)
	return jsonAnswer(http.StatusCreated, messageJSON(m))
}

// createFromMIME takes a base64 MIME body (user-post-messages.md "MIME
// format"): the message is created as a draft; malformed base64 is 400
// ErrorMimeContentInvalidBase64String. It only works on /users/{id}/messages
// (glenscales.substack.com, "Work around for importing Mime messages"):
// on a folder's messages it is refused.
func (s *Server) createFromMIME(c *call, u *user, folderID string) answer {
	if folderID != "" {
		return c.errAnswer(http.StatusBadRequest, "ErrorInvalidRequest", "MIME content is only supported when creating a message in the mailbox (POST /users/{id}/messages).")
	}
	raw, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(string(c.body)), ""))
	if err != nil || len(raw) == 0 {
		return c.errAnswer(http.StatusBadRequest, "ErrorMimeContentInvalidBase64String", "Invalid base64 string for MIME content.")
	}
	m := messageFromMIME(raw)
	m.isDraft = true
	m.received = time.Now().UTC().Truncate(time.Second)
	if m.sent.IsZero() {
		m.sent = m.received
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	u.mb.put(m, u.mb.folder("drafts"))
	return jsonAnswer(http.StatusCreated, messageJSON(m))
}

// renderMIME is the MIME Exchange would give for a message created from
// JSON: enough headers and parts for assertions.
func renderMIME(m *message) []byte {
	var b bytes.Buffer
	addr := func(a address) string {
		if a.name == "" {
			return "<" + a.addr + ">"
		}
		return mime.QEncoding.Encode("utf-8", a.name) + " <" + a.addr + ">"
	}
	list := func(as []address) string {
		var parts []string
		for _, a := range as {
			parts = append(parts, addr(a))
		}
		return strings.Join(parts, ", ")
	}
	if m.from != nil {
		b.WriteString("From: " + addr(*m.from) + "\r\n")
	}
	if len(m.to) > 0 {
		b.WriteString("To: " + list(m.to) + "\r\n")
	}
	if len(m.cc) > 0 {
		b.WriteString("Cc: " + list(m.cc) + "\r\n")
	}
	b.WriteString("Subject: " + mime.QEncoding.Encode("utf-8", m.subject) + "\r\n")
	b.WriteString("Date: " + m.sent.Format(time.RFC1123Z) + "\r\n")
	b.WriteString("Message-ID: " + m.internetMessageID + "\r\n")
	for _, h := range m.extraHeaders {
		b.WriteString(h[0] + ": " + h[1] + "\r\n")
	}
	b.WriteString("MIME-Version: 1.0\r\n")
	bodyType := "text/plain"
	if m.bodyType == "html" {
		bodyType = "text/html"
	}
	part := func(ct string, extra string, content []byte) {
		b.WriteString("Content-Type: " + ct + "\r\n" + extra + "Content-Transfer-Encoding: base64\r\n\r\n")
		enc := base64.StdEncoding.EncodeToString(content)
		for len(enc) > 76 {
			b.WriteString(enc[:76] + "\r\n")
			enc = enc[76:]
		}
		b.WriteString(enc + "\r\n")
	}
	if len(m.attachments) == 0 {
		part(bodyType+"; charset=\"utf-8\"", "", []byte(m.body))
		return b.Bytes()
	}
	boundary := "_000_" + strings.ToUpper(randToken(8)) + "_"
	b.WriteString("Content-Type: multipart/mixed; boundary=\"" + boundary + "\"\r\n\r\n")
	b.WriteString("--" + boundary + "\r\n")
	part(bodyType+"; charset=\"utf-8\"", "", []byte(m.body))
	for _, a := range m.attachments {
		ct := a.contentType
		if ct == "" {
			ct = "application/octet-stream"
		}
		disp := "attachment"
		if a.inline {
			disp = "inline"
		}
		b.WriteString("--" + boundary + "\r\n")
		part(ct+"; name=\""+a.name+"\"", "Content-Disposition: "+disp+"; filename=\""+a.name+"\"; size="+strconv.Itoa(len(a.content))+"\r\n", a.content)
	}
	b.WriteString("--" + boundary + "--\r\n")
	return b.Bytes()
}

func attachmentJSON(a *attachment, withContent bool) map[string]any {
	out := map[string]any{"@odata.type": "#microsoft.graph.fileAttachment", "id": a.id, "name": a.name,
		"contentType": a.contentType, "size": len(a.content), "isInline": a.inline,
		"lastModifiedDateTime": fmtTime(time.Now())}
	if withContent {
		out["contentBytes"] = a.content
	}
	return out
}

// addAttachment is POST /users/{id}/messages/{id}/attachments with a
// fileAttachment under 3 MB (message-post-attachments.md).
func (s *Server) addAttachment(c *call, u *user, messageID string) answer {
	if len(c.body) > maxRequestBody {
		return c.tooLarge()
	}
	var in jsonFileAttachment
	if err := json.Unmarshal(c.body, &in); err != nil {
		return c.errAnswer(http.StatusBadRequest, "RequestBodyRead", "Invalid JSON: "+err.Error())
	}
	if in.ODataType != "#microsoft.graph.fileAttachment" || in.Name == "" {
		return c.errAnswer(http.StatusBadRequest, "ErrorInvalidRequest", "A fileAttachment with a name is required.")
	}
	if len(in.ContentBytes) > maxInlineAttach {
		return c.tooLarge()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := u.mb.messages[messageID]
	if m == nil {
		return c.folderNotFound()
	}
	a := &attachment{id: exchangeID(), name: in.Name, contentType: in.ContentType, inline: in.IsInline, content: in.ContentBytes}
	m.attachments = append(m.attachments, a)
	m.mime = renderMIME(m)
	u.mb.touch(m)
	return jsonAnswer(http.StatusCreated, attachmentJSON(a, false))
}

func (s *Server) listAttachments(c *call, u *user, messageID string) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := u.mb.messages[messageID]
	if m == nil {
		return c.folderNotFound()
	}
	vals := []map[string]any{}
	for _, a := range m.attachments {
		vals = append(vals, attachmentJSON(a, true))
	}
	return jsonAnswer(http.StatusOK, map[string]any{"value": vals})
}
