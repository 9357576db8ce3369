// Package graphtest is a fake Microsoft Graph and Microsoft identity
// platform on 127.0.0.1, for tests and benchmarks: the only stand-in for
// the real service, so it is never looser than the service. Every behaviour
// cites the Graph documentation it follows.
//
// SEAM: this file pins the API that tests of app/m365 and the appliance
// are written against. The implementation replaces the bodies.
package graphtest

import (
	"time"
)

// Options tune a fake.
type Options struct {
	// Latency is added to every HTTP request (benchmarks use 50 ms).
	Latency time.Duration
	// MailboxConcurrency is the most requests in flight per mailbox
	// before 429 ApplicationThrottled (Graph: 4). Default 4.
	MailboxConcurrency int
	// MailboxRequestsPer10Min is Outlook's per-app-per-mailbox window
	// (Graph: 10,000). Default 10,000.
	MailboxRequestsPer10Min int
	// TokenLifetime is expires_in of issued tokens (default 3599 s).
	TokenLifetime time.Duration
	// DownloadURLLifetime is how long a download URL works (default 1 h).
	DownloadURLLifetime time.Duration
}

// Server is a running fake with one Microsoft 365 tenant.
type Server struct{}

// Tenant identifies the fake's tenant and its app registration.
type Tenant struct {
	AzureTenantID string
	ClientID      string
	ClientSecret  string
	// Roles are the application permissions consented (e.g.
	// "User.Read.All"); nil means every one Backstop needs.
	Roles []string
	// SecretExpired makes the token endpoint answer AADSTS7000222.
	SecretExpired bool
}

// New starts a fake serving tenant t on 127.0.0.1; Close stops it.
func New(t Tenant, opt Options) *Server { panic("seam") }

// Close stops the server.
func (s *Server) Close() { panic("seam") }

// GraphURL is the Graph base to configure, ".../v1.0".
func (s *Server) GraphURL() string { panic("seam") }

// LoginURL is the identity platform base to configure.
func (s *Server) LoginURL() string { panic("seam") }

// SetRoles changes the consented application permissions (nil: all).
func (s *Server) SetRoles(roles ...string) { panic("seam") }

// Sku adds a licence SKU and returns its skuId.
func (s *Server) Sku(partNumber string) string { panic("seam") }

// User is a directory user to add.
type User struct {
	ID                string // generated when empty
	DisplayName       string
	UserPrincipalName string
	Mail              string
	Disabled          bool
	Licenses          []string // skuIds
	// Purpose is mailboxSettings.userPurpose: user (default), shared, room, equipment.
	Purpose string
	// NoMailbox: mailbox calls answer 404 MailboxNotEnabledForRESTAPI.
	NoMailbox bool
	// NoDrive: /drive answers 404 (no OneDrive provisioned).
	NoDrive bool
}

// AddUser adds a user with a mailbox (Inbox, Sent Items, Deleted Items,
// Drafts and a search folder) and a drive, and returns its id.
func (s *Server) AddUser(u User) string { panic("seam") }

// RemoveUser deletes a user from the directory.
func (s *Server) RemoveUser(id string) { panic("seam") }

// WellKnownFolder returns the id of a user's well-known folder ("inbox",
// "sentitems", "deleteditems", "drafts", "msgfolderroot").
func (s *Server) WellKnownFolder(userID, name string) string { panic("seam") }

// AddFolder adds a mail folder under parentID and returns its id.
func (s *Server) AddFolder(userID, parentID, name string) string { panic("seam") }

// AddMessage delivers raw MIME into a folder as a received, non-draft
// message and returns its id.
func (s *Server) AddMessage(userID, folderID string, mime []byte, received time.Time) string {
	panic("seam")
}

// DeleteMessage removes a message (delta reports @removed).
func (s *Server) DeleteMessage(userID, messageID string) { panic("seam") }

// MoveMessage moves a message to another folder (remove in one folder's
// delta, add in the other's).
func (s *Server) MoveMessage(userID, messageID, folderID string) { panic("seam") }

// StoredMessage is a message as the fake holds it, for assertions.
type StoredMessage struct {
	ID                string
	FolderID          string
	FolderPath        string // display names from the root, '/'-separated
	IsDraft           bool
	IsRead            bool
	Subject           string
	InternetMessageID string
	SentDateTime      time.Time
	ReceivedDateTime  time.Time
	MIME              []byte   // as delivered, or as Graph renders a created message
	Attachments       []string // names
	AttachmentSizes   []int64
}

// Messages returns the user's messages in every folder.
func (s *Server) Messages(userID string) []StoredMessage { panic("seam") }

// AddFile stores content at path in the user's drive ("a/b.txt";
// folders are created) and returns the item id.
func (s *Server) AddFile(userID, path string, content []byte) string { panic("seam") }

// DeleteFile deletes the item at path (delta reports deleted).
func (s *Server) DeleteFile(userID, path string) { panic("seam") }

// StoredFile is a drive file as the fake holds it.
type StoredFile struct {
	ID           string
	Path         string // from the drive root, '/'-separated
	Content      []byte
	QuickXorHash string
}

// Files returns the user's drive files.
func (s *Server) Files(userID string) []StoredFile { panic("seam") }

// CorruptHash makes the file at path report a wrong quickXorHash (a
// download that does not match what Graph claims).
func (s *Server) CorruptHash(userID, path string) { panic("seam") }

// InvalidateDeltaTokens makes the user's current delta tokens (mail and
// drive) answer as expired (syncStateNotFound for mail, 410 for drives).
func (s *Server) InvalidateDeltaTokens(userID string) { panic("seam") }

// SetOverQuota makes message delta of the user answer ErrorQuotaExceeded
// (listing still works), as Exchange does for a full mailbox.
func (s *Server) SetOverQuota(userID string, over bool) { panic("seam") }

// Throttle answers the next n requests on the user's mailbox with 429 and
// Retry-After retryAfter (whole seconds, as Graph sends them).
func (s *Server) Throttle(userID string, n int, retryAfter time.Duration) { panic("seam") }

// ReplayDelta makes the next delta pages of the user repeat entries
// already sent (Graph's documented replays).
func (s *Server) ReplayDelta(userID string, on bool) { panic("seam") }

// Stats are the fake's counters.
type Stats struct {
	Requests int64
	// Violations counts requests that arrived while the mailbox already
	// had MailboxConcurrency in flight, or before a Retry-After the fake
	// sent for that mailbox had passed. A correct client makes none.
	Violations int64
	Throttled  int64 // 429/503 answers sent
	// MaxInFlight is the most requests in flight on one mailbox seen.
	MaxInFlight int64
}

// Stats returns the counters so far.
func (s *Server) Stats() Stats { panic("seam") }
