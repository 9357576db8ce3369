package app

import (
	"context"
	"io"
)

// PrefixSnapshot begins every snapshot id.
const PrefixSnapshot = "sn_"

// Snapshot is one backup of a protected object (CONTRACT §12): the state
// of every item at one time, stored in the blob store.
type Snapshot struct {
	ID                string `json:"id"`
	ProtectedObjectID string `json:"protectedObjectId"`
	TenantID          string `json:"tenantId"`
	At                Time   `json:"at"`
	Items             int64  `json:"items"`
	Bytes             int64  `json:"bytes"`
	AddedItems        int64  `json:"addedItems"`
	RemovedItems      int64  `json:"removedItems"`
	JobID             string `json:"jobId"`
	// TargetID is the storage target the snapshot's manifest was written to.
	TargetID string `json:"-"`
}

// SnapshotFilter selects snapshots; empty fields match everything.
type SnapshotFilter struct {
	TenantID          string
	ProtectedObjectID string
	Before            string // snapshot id cursor: only older ones
	Limit             int
}

// SnapshotLister lists snapshots newest first.
type SnapshotLister interface {
	Snapshots(ctx context.Context, f SnapshotFilter) ([]*Snapshot, error)
}

// SnapshotItem is one item of a snapshot as the API shows it (CONTRACT §12).
type SnapshotItem struct {
	ID      string   `json:"id"`
	Kind    string   `json:"kind" enum:"message,file,folder"`
	Path    string   `json:"path" doc:"Folder path, /-separated: the folder a message or file is in; a folder's own path."`
	Name    string   `json:"name"`
	Subject string   `json:"subject,omitempty"`
	From    string   `json:"from,omitempty"`
	Date    *Time    `json:"date,omitempty" doc:"The message's Date header, when it parses."`
	Size    int64    `json:"size"`
	SHA256  string   `json:"sha256" doc:"SHA-256 of the exact stored bytes."`
	Flags   []string `json:"flags,omitempty"`
}

// SnapshotItemFilter selects items of a snapshot, in manifest order.
type SnapshotItemFilter struct {
	Folder string // one folder: its messages and files, and its direct subfolders ("/" for the top level)
	Query  string // case-insensitive substring of subject, sender or name
	Cursor string // opaque, from the previous page
	Limit  int
}

// SnapshotBrowser reads snapshots and their items (app/protect implements
// it over the blob store).
type SnapshotBrowser interface {
	SnapshotLister
	// Snapshot returns one snapshot, or a not-found error.
	Snapshot(ctx context.Context, id string) (*Snapshot, error)
	// SnapshotItems returns a page of a snapshot's items and the cursor of
	// the next page ("" at the end).
	SnapshotItems(ctx context.Context, snapshotID string, f SnapshotItemFilter) ([]SnapshotItem, string, error)
	// OpenSnapshotItem returns an item and its exact stored bytes. A damaged
	// item ends the reader with an error, never with bad data.
	OpenSnapshotItem(ctx context.Context, snapshotID, itemID string) (SnapshotItem, io.ReadCloser, error)
}
