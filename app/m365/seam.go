// Package m365 is the Microsoft 365 engine: the directory of a tenant,
// mailbox backups (per-folder message delta, exact MIME from $value),
// OneDrive backups (root delta, content checked against quickXorHash), and
// restores through Graph. It knows nothing of jobs, HTTP routes or the
// database: the protected-object layer (app/protect) calls it with a
// *graph.Client per source.
//
// SEAM: this file pins the API app/protect is written against. The
// implementation replaces the bodies.
package m365

import (
	"context"
	"io"
	"time"

	"backstop/app"
	"backstop/app/blobstore"
	"backstop/app/graph"
)

// Permissions are the application permissions Backstop needs (CONTRACT §13).
var Permissions = []string{"User.Read.All", "Organization.Read.All", "MailboxSettings.Read", "Mail.ReadWrite", "Files.ReadWrite.All"}

// ConsentURL is the admin-consent link for the customer's tenant.
func ConsentURL(loginURL, azureTenantID, clientID string) string { panic("seam") }

// Check fetches a token (a refused client is an *graph.AuthError; the
// caller answers 422 source_auth_failed with its Reason) and reads
// /subscribedSkus once, so missing consent shows at creation as
// graph.consent_missing.
func Check(ctx context.Context, c *graph.Client) error { panic("seam") }

// Directory entry kinds as the engine reports them (app.Directory*).
type DirectoryUser struct {
	ExternalID        string // Graph user id
	Kind              string // app.DirectoryUser, DirectorySharedMailbox, DirectoryRoom
	DisplayName       string
	Email             string
	UserPrincipalName string
	Enabled           bool
	Licensed          bool
	Licenses          []string // SKU part numbers, sorted
	HasMailbox        bool     // userPurpose was readable
}

// Progress receives progress as the job stream shows it.
type Progress func(p app.JobProgress)

// SyncDirectory reads every user with licences (SKU part numbers from
// /subscribedSkus) and mailbox purpose (through $batch).
func SyncDirectory(ctx context.Context, c *graph.Client, progress Progress) ([]DirectoryUser, error) {
	panic("seam")
}

// MessageMeta is the Meta of a message item.
type MessageMeta struct {
	GraphID           string     `json:"graphId"`
	FolderID          string     `json:"folderId"`
	InternetMessageID string     `json:"internetMessageId,omitempty"`
	Subject           string     `json:"subject,omitempty"`
	From              string     `json:"from,omitempty"`
	Date              string     `json:"date,omitempty"` // sentDateTime, RFC 3339
	ReceivedDateTime  *time.Time `json:"receivedDateTime,omitempty"`
	SentDateTime      *time.Time `json:"sentDateTime,omitempty"`
	IsRead            bool       `json:"isRead"`
	Flagged           bool       `json:"flagged,omitempty"`
	Categories        []string   `json:"categories,omitempty"`
	ChangeKey         string     `json:"changeKey,omitempty"`
}

// FolderMeta is the Meta of a mail folder item: the sync state the next
// backup starts from.
type FolderMeta struct {
	FolderID       string `json:"folderId"`
	ParentFolderID string `json:"parentFolderId,omitempty"`
	DeltaLink      string `json:"deltaLink,omitempty"` // "" when the folder was listed (over quota)
}

// FileMeta is the Meta of a drive file or folder item.
type FileMeta struct {
	DriveItemID  string     `json:"driveItemId"`
	ParentID     string     `json:"parentId,omitempty"`
	CTag         string     `json:"cTag,omitempty"`
	ETag         string     `json:"eTag,omitempty"`
	QuickXorHash string     `json:"quickXorHash,omitempty"`
	Modified     *time.Time `json:"modified,omitempty"`
	// DeltaLink (on the drive root's folder item) is where the next
	// backup's delta starts; DriveID names the drive.
	DeltaLink string `json:"deltaLink,omitempty"`
	DriveID   string `json:"driveId,omitempty"`
}

// ItemFailure is one item that could not be backed up or restored; the job
// goes on and ends partial.
type ItemFailure struct {
	ItemID string
	Ref    string // what a person recognises: folder/subject or file path
	Err    error  // an *app.FailureError names the cause
}

// BackupResult is what a backup found and stored.
type BackupResult struct {
	// Items is the snapshot's manifest: folder items (with their sync
	// state in Meta) and message or file items, a message's or file's Path
	// being its folder's '/'-separated path.
	Items   []blobstore.Item
	Count   int64 // messages or files
	Added   int64
	Removed int64
	Failed  []ItemFailure
}

// BackupMailbox backs up one user's mailbox incrementally from prev (the
// previous snapshot's manifest; nil for a full backup).
func BackupMailbox(ctx context.Context, c *graph.Client, userID string, w *blobstore.Writer, prev []blobstore.Item, progress Progress) (*BackupResult, error) {
	panic("seam")
}

// BackupDrive backs up one user's OneDrive incrementally from prev.
func BackupDrive(ctx context.Context, c *graph.Client, userID string, w *blobstore.Writer, prev []blobstore.Item, progress Progress) (*BackupResult, error) {
	panic("seam")
}

// Opener returns the exact stored bytes of an item's content.
type Opener func(ctx context.Context, c blobstore.Content) (io.ReadCloser, error)

// RestoreRequest says what to restore where.
type RestoreRequest struct {
	UserID string // the destination user (the source's or another of the tenant)
	// Items from one snapshot's manifest (a folder item stands for what is
	// below it).
	Items []blobstore.Item
	// Folder is the new top folder the snapshot's structure is recreated
	// under: "Restored 2026-11-20 03:00 UTC" (mail) or
	// "Restored 2026-11-20 03-00 UTC" (files).
	Folder string
}

// RestoreResult is what a restore did.
type RestoreResult struct {
	Restored int64
	Skipped  int64 // already in the destination (a second run adds nothing)
	Failed   []ItemFailure
}

// RestoreMail recreates messages as real (not draft) messages with their
// sent and received times and attachments, skipping those already in the
// destination folder.
func RestoreMail(ctx context.Context, c *graph.Client, req RestoreRequest, open Opener, progress Progress) (*RestoreResult, error) {
	panic("seam")
}

// RestoreFiles uploads files under req.Folder at the drive root, keeping
// the folder structure, skipping files already there with the same
// content.
func RestoreFiles(ctx context.Context, c *graph.Client, req RestoreRequest, open Opener, progress Progress) (*RestoreResult, error) {
	panic("seam")
}
