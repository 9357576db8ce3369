package app

import "context"

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
