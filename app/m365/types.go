package m365

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"strings"
	"time"

	"backstop/app"
	"backstop/app/blobstore"
)

// Item kinds of a Microsoft 365 snapshot.
const (
	KindFolder  = "folder"
	KindMessage = "message"
	KindFile    = "file"
)

// DirectoryUser is one entry of the tenant's directory as the engine
// reports it.
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

// MessageItemID is the stable item id of a Graph message id.
func MessageItemID(graphID string) string { return hashID("m", "message", graphID) }

// MailFolderItemID is the stable item id of a Graph mail folder id.
func MailFolderItemID(folderID string) string { return hashID("f", "folder", folderID) }

// DriveItemID is the stable item id of a drive item id.
func DriveItemID(driveItemID string) string { return hashID("d", "drive", driveItemID) }

func hashID(prefix, kind, id string) string {
	sum := sha256.Sum256([]byte(kind + "\x00" + id))
	return prefix + hex.EncodeToString(sum[:16])
}

var (
	nameEscaper   = strings.NewReplacer("%", "%25", "/", "%2F")
	nameUnescaper = strings.NewReplacer("%25", "%", "%2F", "/", "%2f", "/")
)

// EscapeName makes a display name one segment of a '/'-separated path.
func EscapeName(name string) string { return nameEscaper.Replace(name) }

// UnescapeName is the display name of a path segment.
func UnescapeName(seg string) string { return nameUnescaper.Replace(seg) }

// splitPath is the display names of a folder path ("" for none).
func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = UnescapeName(s)
	}
	return segs
}

func lastSegment(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}
