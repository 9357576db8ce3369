package graph

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// MailFolder is a mail folder.
type MailFolder struct {
	ODataType        string `json:"@odata.type,omitempty"`
	ID               string `json:"id"`
	DisplayName      string `json:"displayName"`
	ParentFolderID   string `json:"parentFolderId"`
	ChildFolderCount int    `json:"childFolderCount"`
	TotalItemCount   int    `json:"totalItemCount"`
	IsHidden         bool   `json:"isHidden"`
}

// IsSearchFolder reports a search folder (never backed up).
func (f *MailFolder) IsSearchFolder() bool { return f.ODataType == "#microsoft.graph.mailSearchFolder" }

// folderPageSize: the folder collections default to 10 a page.
const folderPageSize = 250

func userPath(userID string) string { return "/users/" + url.PathEscape(userID) }

// MailFolders walks the user's whole folder tree (hidden folders included,
// search folders left out), parents before children; path is the folder's
// display-name path from the root.
func (c *Client) MailFolders(ctx context.Context, userID string, fn func(f MailFolder, path []string) error) error {
	top, err := collect[MailFolder](ctx, c, Mailbox(userID),
		userPath(userID)+"/mailFolders?includeHiddenFolders=true", preferPageSize(folderPageSize))
	if err != nil {
		return err
	}
	return c.walkFolders(ctx, userID, top, nil, fn)
}

func (c *Client) walkFolders(ctx context.Context, userID string, folders []MailFolder, parent []string, fn func(MailFolder, []string) error) error {
	for _, f := range folders {
		if f.IsSearchFolder() {
			continue
		}
		path := append(append([]string(nil), parent...), f.DisplayName)
		if err := fn(f, path); err != nil {
			return err
		}
		// childFolderCount may leave hidden children out, so always ask.
		children, err := c.ChildFolders(ctx, userID, f.ID)
		if err != nil {
			return err
		}
		if err := c.walkFolders(ctx, userID, children, path, fn); err != nil {
			return err
		}
	}
	return nil
}

// ChildFolders lists the direct children of a folder ("msgfolderroot" for
// the top level).
func (c *Client) ChildFolders(ctx context.Context, userID, parentID string) ([]MailFolder, error) {
	return collect[MailFolder](ctx, c, Mailbox(userID),
		userPath(userID)+"/mailFolders/"+url.PathEscape(parentID)+"/childFolders?includeHiddenFolders=true",
		preferPageSize(folderPageSize))
}

// Recipient is an e-mail address with its name.
type Recipient struct {
	EmailAddress struct {
		Name    string `json:"name,omitempty"`
		Address string `json:"address"`
	} `json:"emailAddress"`
}

// Removed marks a delta entry as removed.
type Removed struct {
	Reason string `json:"reason"` // changed, deleted
}

// Message is a message as delta and list pages $select it.
type Message struct {
	ID                string     `json:"id"`
	Removed           *Removed   `json:"@removed,omitempty"`
	InternetMessageID string     `json:"internetMessageId,omitempty"`
	Subject           string     `json:"subject,omitempty"`
	From              *Recipient `json:"from,omitempty"`
	ReceivedDateTime  *time.Time `json:"receivedDateTime,omitempty"`
	SentDateTime      *time.Time `json:"sentDateTime,omitempty"`
	IsRead            *bool      `json:"isRead,omitempty"`
	IsDraft           *bool      `json:"isDraft,omitempty"`
	ParentFolderID    string     `json:"parentFolderId,omitempty"`
	ChangeKey         string     `json:"changeKey,omitempty"`
	Flag              *struct {
		FlagStatus string `json:"flagStatus"`
	} `json:"flag,omitempty"`
	Categories []string `json:"categories,omitempty"`
}

// MessageSelect is the $select of delta and list pages.
const MessageSelect = "id,internetMessageId,subject,from,receivedDateTime,sentDateTime,isRead,isDraft,parentFolderId,changeKey,flag,categories"

// deltaPageSize is the largest page message delta gives (research §1).
const deltaPageSize = 500

// MessagesDelta runs the folder's message delta: from deltaLink when set
// (an incremental), else from the start; fn gets the entries in order, up
// to pageBatch at a time (entries may repeat: the last one wins; @removed
// entries are removals). It returns
// the new deltaLink. An expired or invalid token is an *Error with code
// syncStateNotFound or resyncRequired, or status 410.
func (c *Client) MessagesDelta(ctx context.Context, userID, folderID, deltaLink string, fn func([]Message) error) (string, error) {
	u := deltaLink
	if u == "" {
		u = userPath(userID) + "/mailFolders/" + url.PathEscape(folderID) + "/messages/delta?$select=" + MessageSelect
	}
	return pagesOf(ctx, c, Mailbox(userID), u, preferPageSize(deltaPageSize), fn)
}

// ListMessages lists the folder's messages without delta (over-quota
// mailboxes refuse delta with ErrorQuotaExceeded).
func (c *Client) ListMessages(ctx context.Context, userID, folderID string, fn func([]Message) error) error {
	_, err := pagesOf(ctx, c, Mailbox(userID),
		userPath(userID)+"/mailFolders/"+url.PathEscape(folderID)+"/messages?$select="+MessageSelect+"&$top=999", nil, fn)
	return err
}

// MessageMIME returns the exact MIME of a message (GET …/$value). The
// caller closes it; until then it holds one of the mailbox's slots.
func (c *Client) MessageMIME(ctx context.Context, userID, messageID string) (io.ReadCloser, error) {
	resp, err := c.Do(ctx, Mailbox(userID), &Request{
		Method: http.MethodGet,
		URL:    userPath(userID) + "/messages/" + url.PathEscape(messageID) + "/$value",
	})
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// EnsureMailFolder returns the child folder of parentID named name,
// creating it if missing (ErrorFolderExists on a race is answered with the
// existing folder).
func (c *Client) EnsureMailFolder(ctx context.Context, userID, parentID, name string) (MailFolder, error) {
	var f MailFolder
	err := c.JSON(ctx, Mailbox(userID), http.MethodPost,
		userPath(userID)+"/mailFolders/"+url.PathEscape(parentID)+"/childFolders", nil,
		map[string]any{"displayName": name, "isHidden": false}, &f)
	if !IsCode(err, "ErrorFolderExists") {
		return f, err
	}
	children, lerr := c.ChildFolders(ctx, userID, parentID)
	if lerr != nil {
		return MailFolder{}, lerr
	}
	for _, child := range children {
		if strings.EqualFold(child.DisplayName, name) {
			return child, nil
		}
	}
	return MailFolder{}, err
}

// ItemBody is a message body.
type ItemBody struct {
	ContentType string `json:"contentType"` // text, html
	Content     string `json:"content"`
}

// ExtendedProperty is a singleValueExtendedProperty, e.g.
// {"id":"Integer 0x0E07","value":"1"}.
type ExtendedProperty struct {
	ID    string `json:"id"`
	Value string `json:"value"`
}

// InternetHeader is one of internetMessageHeaders (Graph accepts only
// X- headers on create).
type InternetHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// FileAttachment is an attachment posted inline (under 3 MB).
type FileAttachment struct {
	ODataType    string `json:"@odata.type"` // #microsoft.graph.fileAttachment
	Name         string `json:"name"`
	ContentType  string `json:"contentType,omitempty"`
	ContentID    string `json:"contentId,omitempty"`
	IsInline     bool   `json:"isInline"`
	ContentBytes []byte `json:"contentBytes"` // base64 in JSON
}

// NewMessage is the JSON body of a created message. Restores set
// PidTagMessageFlags (Integer 0x0E07) without the unsent bit so the message
// is not a draft, and the sent (SystemTime 0x0039) and received
// (SystemTime 0x0E06) times.
type NewMessage struct {
	Subject                       string             `json:"subject"`
	Body                          ItemBody           `json:"body"`
	From                          *Recipient         `json:"from,omitempty"`
	Sender                        *Recipient         `json:"sender,omitempty"`
	ToRecipients                  []Recipient        `json:"toRecipients,omitempty"`
	CcRecipients                  []Recipient        `json:"ccRecipients,omitempty"`
	BccRecipients                 []Recipient        `json:"bccRecipients,omitempty"`
	ReplyTo                       []Recipient        `json:"replyTo,omitempty"`
	InternetMessageID             string             `json:"internetMessageId,omitempty"`
	InternetMessageHeaders        []InternetHeader   `json:"internetMessageHeaders,omitempty"`
	IsRead                        bool               `json:"isRead"`
	Importance                    string             `json:"importance,omitempty"`
	Categories                    []string           `json:"categories,omitempty"`
	SingleValueExtendedProperties []ExtendedProperty `json:"singleValueExtendedProperties,omitempty"`
	Attachments                   []FileAttachment   `json:"attachments,omitempty"`
}

// CreateMessage creates m in the folder (POST
// /users/{id}/mailFolders/{folderId}/messages, JSON) and returns it.
func (c *Client) CreateMessage(ctx context.Context, userID, folderID string, m *NewMessage) (Message, error) {
	var out Message
	err := c.JSON(ctx, Mailbox(userID), http.MethodPost,
		userPath(userID)+"/mailFolders/"+url.PathEscape(folderID)+"/messages", nil, m, &out)
	return out, err
}

// LargeAttachmentMin is the size from which an attachment goes through an
// upload session instead of an inline POST (Graph: 3 MB).
const LargeAttachmentMin = 3 << 20

// AttachmentChunk is the piece size of attachment upload sessions (Graph:
// each under 4 MB).
const AttachmentChunk = 3 << 20

// AddAttachment attaches a file to an existing message: an inline POST
// under LargeAttachmentMin, else an upload session (chunks under 4 MiB,
// no Authorization header on the PUTs).
func (c *Client) AddAttachment(ctx context.Context, userID, messageID string, a FileAttachment) error {
	scope := Mailbox(userID)
	base := userPath(userID) + "/messages/" + url.PathEscape(messageID) + "/attachments"
	if len(a.ContentBytes) < LargeAttachmentMin {
		if a.ODataType == "" {
			a.ODataType = "#microsoft.graph.fileAttachment"
		}
		return c.JSON(ctx, scope, http.MethodPost, base, nil, a, nil)
	}
	item := map[string]any{"attachmentType": "file", "name": a.Name, "size": len(a.ContentBytes)}
	if a.ContentType != "" {
		item["contentType"] = a.ContentType
	}
	if a.IsInline {
		item["isInline"] = true
	}
	if a.ContentID != "" {
		item["contentId"] = a.ContentID
	}
	var session struct {
		UploadURL string `json:"uploadUrl"`
	}
	if err := c.JSON(ctx, scope, http.MethodPost, base+"/createUploadSession", nil,
		map[string]any{"AttachmentItem": item}, &session); err != nil {
		return err
	}
	if session.UploadURL == "" {
		return fmt.Errorf("graph: attachment upload session without uploadUrl")
	}
	_, err := c.uploadSession(ctx, scope, session.UploadURL, int64(len(a.ContentBytes)),
		bytes.NewReader(a.ContentBytes), AttachmentChunk)
	return err
}
