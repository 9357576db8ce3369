// Package graph is the Microsoft Graph client: plain net/http with small
// types for the endpoints Backstop uses, client-credentials tokens, one
// pager for @odata.nextLink/@odata.deltaLink, one error type that reads
// error.code and the inner codes (never the message text), and throttling
// done per mailbox: at most PerMailbox requests in flight per mailbox,
// Retry-After honoured per mailbox (and per tenant for SharePoint/OneDrive)
// before the next request of that scope, and an appliance-wide total.
//
// SEAM: this file pins the API that app/m365 and the fake in graphtest are
// written against. The implementation replaces the bodies.
package graph

import (
	"context"
	"encoding/json"
	"hash"
	"io"
	"net/http"
	"time"
)

// Default base URLs (the global cloud). National clouds and tests set
// their own.
const (
	DefaultGraphURL = "https://graph.microsoft.com/v1.0"
	DefaultLoginURL = "https://login.microsoftonline.com"
)

// Config is one Microsoft 365 tenant's client.
type Config struct {
	GraphURL      string // base including the version, e.g. https://graph.microsoft.com/v1.0
	LoginURL      string // e.g. https://login.microsoftonline.com
	AzureTenantID string
	ClientID      string
	ClientSecret  string
	HTTP          *http.Client // nil: a client with sane timeouts
	// Limits is the appliance-wide budget shared by every tenant's client;
	// nil gives the client its own (DefaultMaxConcurrency).
	Limits *Limits
	// PerMailbox is the most requests in flight per mailbox (Outlook's
	// documented limit is 4; default 4).
	PerMailbox int
	// MaxRetries bounds retries of one request after 429/503/504/5xx and
	// connection errors (default 6).
	MaxRetries int
	// MaxRetryAfter caps how long one Retry-After is waited in process; a
	// longer one ends the request with a *Error whose RetryAfter says how
	// long (the job is then retried later). Default 5 minutes.
	MaxRetryAfter time.Duration
}

// DefaultMaxConcurrency is the default appliance-wide total of requests in
// flight (graph.max_concurrency).
const DefaultMaxConcurrency = 256

// Limits is the appliance-wide total of Graph requests in flight.
type Limits struct{}

// NewLimits returns a budget of maxConcurrency requests in flight
// (DefaultMaxConcurrency when ≤ 0).
func NewLimits(maxConcurrency int) *Limits { panic("seam") }

// Client talks to one tenant. Safe for concurrent use; one per source, kept
// for the process's life so its token and per-mailbox limits are shared.
type Client struct{}

// New checks cfg (absolute http(s) URLs) and returns a client.
func New(cfg Config) (*Client, error) { panic("seam") }

// AzureTenantID is the tenant the client signs in to.
func (c *Client) AzureTenantID() string { panic("seam") }

// Token returns a valid access token, fetching one with the client
// credentials grant when none is cached or it expires within 5 minutes.
// A refused client is an *AuthError.
func (c *Client) Token(ctx context.Context) (string, error) { panic("seam") }

// Scope names whose throttling budget a request spends.
type Scope string

// Scopes: one mailbox (Outlook's per-mailbox limits), the tenant's
// directory, and the tenant's SharePoint/OneDrive budget (one Retry-After
// fence for every drive of the tenant).
const (
	ScopeDirectory  Scope = "directory"
	ScopeSharePoint Scope = "sharepoint"
)

// Mailbox is the scope of requests on one user's mailbox.
func Mailbox(userID string) Scope { return Scope("mailbox:" + userID) }

// Request is one HTTP request. URL is absolute (a nextLink, an upload URL)
// or relative to GraphURL ("/users/x/messages").
type Request struct {
	Method string
	URL    string
	Header http.Header
	Body   []byte
	// NoAuth leaves out the Authorization header (pre-authenticated
	// download and upload URLs must not get it).
	NoAuth bool
}

// Do sends req within scope's limits, retrying 429/503/504/5xx (waiting
// Retry-After, or backing off) and refreshing the token once after a 401.
// A final non-2xx answer is an *Error; the caller closes the body of a
// returned response.
func (c *Client) Do(ctx context.Context, scope Scope, req *Request) (*http.Response, error) {
	panic("seam")
}

// JSON sends in (nil: no body) as JSON and decodes a 2xx answer into out
// (nil: discarded).
func (c *Client) JSON(ctx context.Context, scope Scope, method, url string, header http.Header, in, out any) error {
	panic("seam")
}

// Pages GETs url and follows @odata.nextLink, handing each page's value
// to page, until a page without nextLink; it returns that page's
// @odata.deltaLink ("" for a collection that is not a delta).
func (c *Client) Pages(ctx context.Context, scope Scope, url string, header http.Header, page func(value []json.RawMessage) error) (deltaLink string, err error) {
	panic("seam")
}

// BatchRequest is one request of a JSON batch (URL relative to the
// version root, e.g. "/users/x/mailboxSettings").
type BatchRequest struct {
	ID        string            `json:"id"`
	Method    string            `json:"method"`
	URL       string            `json:"url"`
	Headers   map[string]string `json:"headers,omitempty"`
	Body      json.RawMessage   `json:"body,omitempty"`
	DependsOn []string          `json:"dependsOn,omitempty"`
}

// BatchResponse is one answer of a JSON batch.
type BatchResponse struct {
	ID      string            `json:"id"`
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    json.RawMessage   `json:"body,omitempty"`
}

// Err is nil for a 2xx answer and the *Error of the answer otherwise.
func (r *BatchResponse) Err() error { panic("seam") }

// MaxBatch is the most requests Graph takes in one $batch.
const MaxBatch = 20

// Batch sends up to MaxBatch requests in one POST /$batch and returns the
// answers in request order. Inner 429/503 answers are retried (after their
// Retry-After) within the client's retry budget; other inner failures are
// returned as they are.
func (c *Client) Batch(ctx context.Context, scope Scope, reqs []BatchRequest) ([]BatchResponse, error) {
	panic("seam")
}

// Error is a Graph error answer: the HTTP status, error.code and the inner
// codes (walked through every nested innerError), and what the headers say.
type Error struct {
	Status     int
	Code       string
	Inner      []string
	Message    string // for logs only: never branch on it
	RequestID  string
	RetryAfter time.Duration // from Retry-After, when present
	Location   string        // from Location (410 delta resets)
}

func (e *Error) Error() string { panic("seam") }

// HasCode reports whether code is the main or an inner code (ASCII case
// folded).
func (e *Error) HasCode(code string) bool { panic("seam") }

// IsCode reports whether err is (wraps) an *Error with one of codes.
func IsCode(err error, codes ...string) bool { panic("seam") }

// StatusOf is the HTTP status of a wrapped *Error, or 0.
func StatusOf(err error) int { panic("seam") }

// AuthError is a refused token request: the AADSTS codes and the reason.
type AuthError struct {
	Status      int
	Err         string // OAuth error, e.g. invalid_client
	Codes       []int  // error_codes, e.g. 7000215
	Description string // error_description (first line)
}

func (e *AuthError) Error() string { panic("seam") }

// Reason is "AADSTS7000215: <what it means>" for the first known code, or
// the description's first sentence.
func (e *AuthError) Reason() string { panic("seam") }

// ---- Directory ----

// User is a /users entry as $select'ed.
type User struct {
	ID                string            `json:"id"`
	DisplayName       string            `json:"displayName"`
	Mail              string            `json:"mail"`
	UserPrincipalName string            `json:"userPrincipalName"`
	AccountEnabled    bool              `json:"accountEnabled"`
	UserType          string            `json:"userType"`
	AssignedLicenses  []AssignedLicense `json:"assignedLicenses"`
}

// AssignedLicense is one licence of a user.
type AssignedLicense struct {
	SkuID string `json:"skuId"`
}

// SubscribedSku is one of the tenant's licence SKUs.
type SubscribedSku struct {
	SkuID         string `json:"skuId"`
	SkuPartNumber string `json:"skuPartNumber"`
}

// Users pages through every user (999 per page), calling fn per page.
func (c *Client) Users(ctx context.Context, fn func([]User) error) error { panic("seam") }

// SubscribedSkus lists the tenant's SKUs.
func (c *Client) SubscribedSkus(ctx context.Context) ([]SubscribedSku, error) { panic("seam") }

// UserPurposes reads mailboxSettings.userPurpose (user, shared, room,
// equipment, linked, others) of each user through $batch, 20 per batch.
// A user without a mailbox (MailboxNotEnabledForRESTAPI and the like) maps
// to "". Other failures are returned.
func (c *Client) UserPurposes(ctx context.Context, userIDs []string) (map[string]string, error) {
	panic("seam")
}

// ---- Mail ----

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

// MailFolders walks the user's whole folder tree (hidden folders included,
// search folders left out), parents before children; path is the folder's
// display-name path from the root.
func (c *Client) MailFolders(ctx context.Context, userID string, fn func(f MailFolder, path []string) error) error {
	panic("seam")
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

// MessagesDelta runs the folder's message delta: from deltaLink when set
// (an incremental), else from the start; fn gets each page (entries may
// repeat: the last one wins; @removed entries are removals). It returns
// the new deltaLink. An expired or invalid token is an *Error with code
// syncStateNotFound or resyncRequired, or status 410.
func (c *Client) MessagesDelta(ctx context.Context, userID, folderID, deltaLink string, fn func([]Message) error) (string, error) {
	panic("seam")
}

// ListMessages lists the folder's messages without delta (over-quota
// mailboxes refuse delta with ErrorQuotaExceeded).
func (c *Client) ListMessages(ctx context.Context, userID, folderID string, fn func([]Message) error) error {
	panic("seam")
}

// MessageMIME returns the exact MIME of a message (GET …/$value). The
// caller closes it.
func (c *Client) MessageMIME(ctx context.Context, userID, messageID string) (io.ReadCloser, error) {
	panic("seam")
}

// ChildFolders lists the direct children of a folder ("msgfolderroot" for
// the top level).
func (c *Client) ChildFolders(ctx context.Context, userID, parentID string) ([]MailFolder, error) {
	panic("seam")
}

// EnsureMailFolder returns the child folder of parentID named name,
// creating it if missing (ErrorFolderExists on a race is answered with the
// existing folder).
func (c *Client) EnsureMailFolder(ctx context.Context, userID, parentID, name string) (MailFolder, error) {
	panic("seam")
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
	panic("seam")
}

// LargeAttachmentMin is the size from which an attachment goes through an
// upload session instead of an inline POST (Graph: 3 MB).
const LargeAttachmentMin = 3 << 20

// AddAttachment attaches a file to an existing message: an inline POST
// under LargeAttachmentMin, else an upload session (chunks under 4 MiB,
// no Authorization header on the PUTs).
func (c *Client) AddAttachment(ctx context.Context, userID, messageID string, a FileAttachment) error {
	panic("seam")
}

// ---- Drives ----

// Drive is a user's OneDrive.
type Drive struct {
	ID        string `json:"id"`
	DriveType string `json:"driveType"`
}

// Hashes of a file; OneDrive for Business has only quickXorHash.
type Hashes struct {
	QuickXorHash string `json:"quickXorHash,omitempty"`
	SHA1Hash     string `json:"sha1Hash,omitempty"`
	SHA256Hash   string `json:"sha256Hash,omitempty"`
}

// ItemReference is a driveItem's parentReference.
type ItemReference struct {
	DriveID string `json:"driveId,omitempty"`
	ID      string `json:"id,omitempty"`
	Path    string `json:"path,omitempty"`
}

// DriveItem is a file or folder as delta returns it.
type DriveItem struct {
	ID                   string         `json:"id"`
	Name                 string         `json:"name,omitempty"`
	ETag                 string         `json:"eTag,omitempty"`
	CTag                 string         `json:"cTag,omitempty"`
	Size                 int64          `json:"size,omitempty"`
	CreatedDateTime      *time.Time     `json:"createdDateTime,omitempty"`
	LastModifiedDateTime *time.Time     `json:"lastModifiedDateTime,omitempty"`
	ParentReference      *ItemReference `json:"parentReference,omitempty"`
	File                 *struct {
		MimeType string `json:"mimeType,omitempty"`
		Hashes   Hashes `json:"hashes"`
	} `json:"file,omitempty"`
	Folder *struct {
		ChildCount int `json:"childCount"`
	} `json:"folder,omitempty"`
	Package     *struct{} `json:"package,omitempty"`
	Root        *struct{} `json:"root,omitempty"`
	Deleted     *struct{} `json:"deleted,omitempty"`
	DownloadURL string    `json:"@microsoft.graph.downloadUrl,omitempty"`
}

// UserDrive returns the user's OneDrive. A user without one is an *Error
// (404, or "mysite not found").
func (c *Client) UserDrive(ctx context.Context, userID string) (Drive, error) { panic("seam") }

// DriveDelta runs the drive's root delta from deltaLink ("" for a full
// enumeration) and returns the new deltaLink. A reset is an *Error with
// status 410 (Location holds the restart URL) or code resyncRequired.
func (c *Client) DriveDelta(ctx context.Context, driveID, deltaLink string, fn func([]DriveItem) error) (string, error) {
	panic("seam")
}

// DriveItem returns one item (with a fresh download URL).
func (c *Client) DriveItem(ctx context.Context, driveID, itemID string) (DriveItem, error) {
	panic("seam")
}

// DriveItemByPath returns the item at path below the drive root
// ("Restored …/a/b.txt").
func (c *Client) DriveItemByPath(ctx context.Context, driveID, path string) (DriveItem, error) {
	panic("seam")
}

// Download opens a pre-authenticated download URL (no Authorization).
// An expired URL is an *Error (401 or 403); the caller gets a fresh one
// with DriveItem and tries again.
func (c *Client) Download(ctx context.Context, url string) (io.ReadCloser, error) { panic("seam") }

// EnsureDriveFolder returns the child folder name of parentID ("root"
// for the drive root), creating it if missing.
func (c *Client) EnsureDriveFolder(ctx context.Context, driveID, parentID, name string) (DriveItem, error) {
	panic("seam")
}

// UploadChunk is the upload-session chunk size: a multiple of 320 KiB
// (Graph requires it of every chunk but the last), 10 × 320 KiB.
const UploadChunk = 10 * 320 << 10

// UploadFile creates name under parentID through an upload session with
// conflictBehavior fail (an existing name is an *Error 409
// nameAlreadyExists), sending size bytes from r in UploadChunk pieces
// without Authorization, and returns the created item.
func (c *Client) UploadFile(ctx context.Context, driveID, parentID, name string, size int64, r io.Reader) (DriveItem, error) {
	panic("seam")
}

// ---- quickXorHash ----

// NewQuickXorHash returns OneDrive's quickXorHash (160 bits; the digest is
// what file.hashes.quickXorHash holds, base64-encoded).
func NewQuickXorHash() hash.Hash { panic("seam") }
