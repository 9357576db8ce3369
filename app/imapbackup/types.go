// Package imapbackup is the IMAP engine: it checks an account's login,
// backs up every folder of an account into the blob store (incrementally,
// by UIDVALIDITY, UIDNEXT and, where the server has CONDSTORE,
// HIGHESTMODSEQ), and restores stored messages with their exact bytes,
// flags and INTERNALDATE, never duplicating. It knows nothing of jobs,
// HTTP or the database: the protected-object layer calls it.
package imapbackup

import (
	"context"
	"io"
	"time"

	"backstop/app"
	"backstop/app/blobstore"
)

// Security is how the connection is protected.
const (
	SecurityNone     = "none"
	SecurityStartTLS = "starttls"
	SecurityTLS      = "tls"
)

// Account is how to reach one IMAP account.
type Account struct {
	Host     string
	Port     int
	Security string // none, starttls, tls
	Username string
	Password string
	// TrustFingerprint, when set, is the lowercase hex SHA-256 of the
	// server certificate (DER) to accept instead of verifying the chain:
	// for self-signed lab servers, chosen explicitly by the administrator.
	TrustFingerprint string
}

// MessageMeta is the Meta of a message item in a snapshot manifest.
type MessageMeta struct {
	Folder       string    `json:"folder"`
	UIDValidity  uint32    `json:"uidValidity"`
	UID          uint32    `json:"uid"`
	Flags        []string  `json:"flags,omitempty"`
	InternalDate time.Time `json:"internalDate"`
	ModSeq       uint64    `json:"modSeq,omitempty"`
	Subject      string    `json:"subject,omitempty"`
	From         string    `json:"from,omitempty"`
	Date         string    `json:"date,omitempty"` // the Date header as RFC 3339, when it parses
	MessageID    string    `json:"messageId,omitempty"`
}

// FolderMeta is the Meta of a folder item: the sync state the next backup
// starts from.
type FolderMeta struct {
	Delimiter     string `json:"delimiter,omitempty"`
	UIDValidity   uint32 `json:"uidValidity"`
	UIDNext       uint32 `json:"uidNext"`
	HighestModSeq uint64 `json:"highestModSeq,omitempty"`
	Messages      uint32 `json:"messages"`
	// Mailbox is the folder's name on the server (decoded from modified
	// UTF-7, with the server's delimiter), what a restore or a later
	// backup addresses.
	Mailbox string `json:"mailbox,omitempty"`
}

// ItemFailure is one message that could not be backed up or restored; the
// job goes on and ends partial.
type ItemFailure struct {
	ItemID string
	Folder string
	UID    uint32
	Err    error // an *app.FailureError names the cause
}

// BackupResult is what a backup found and stored.
type BackupResult struct {
	// Items are the snapshot's manifest, in order: for each folder (sorted
	// by path), its folder item, then its messages by UID.
	Items    []blobstore.Item
	Messages int64 // message items
	Added    int64 // messages new since the previous snapshot
	Removed  int64 // messages of the previous snapshot that are gone
	Failed   []ItemFailure
}

// RestoreRequest says what to restore where.
type RestoreRequest struct {
	// Items to restore (messages and folders; a folder item stands for its
	// messages), from one snapshot's manifest.
	Items []blobstore.Item
	// Folder is the destination folder under which the source folder
	// structure is recreated, e.g. "Restored 2026-11-20 03:00 UTC".
	Folder string
}

// RestoreResult is what a restore did.
type RestoreResult struct {
	Restored int64 // messages appended
	Skipped  int64 // already present in the destination (a second run, or a resumed one)
	Failed   []ItemFailure
}

// Opener returns the exact stored bytes of an item's content.
type Opener func(ctx context.Context, c blobstore.Content) (io.ReadCloser, error)

// Progress receives progress as the job stream shows it.
type Progress func(p app.JobProgress)

// The engine's entry points (engine.go); the protected-object layer holds
// them as function values so its tests can replace them:
//
//	func Check(ctx context.Context, a Account) error
//	func Backup(ctx context.Context, a Account, w *blobstore.Writer, prev []blobstore.Item, progress Progress) (*BackupResult, error)
//	func Restore(ctx context.Context, a Account, req RestoreRequest, open Opener, progress Progress) (*RestoreResult, error)
//
// Errors are *app.FailureError with the codes imap.auth_failed (not
// transient), imap.tls_failed, imap.connection_failed (transient) and
// imap.quota_exceeded (restore); a storage error from the writer passes
// through unchanged (storage.full, storage.unreachable).
