package app

import (
	"context"
	"encoding/hex"
	"fmt"
	"time"
)

// BlobID names a blob: the HMAC-SHA-256 of its plaintext under the tenant's
// id key (app/blobstore), so equal content within a tenant has one id and
// storage never reveals whether a known file is present.
type BlobID [32]byte

// Blob types: data holds item content, tree a snapshot's item manifest.
const (
	BlobData byte = 'd'
	BlobTree byte = 't'
)

// BlobEntry is one blob inside a pack.
type BlobEntry struct {
	ID        BlobID
	Type      byte
	Offset    int64 // in the pack
	Length    int64 // stored (compressed and encrypted) bytes
	RawLength int64 // plaintext bytes
}

// BlobLocation is where a blob is stored.
type BlobLocation struct {
	PackID    string
	TargetID  string
	Offset    int64
	Length    int64
	RawLength int64
}

// PackRecord is one pack file as the catalogue knows it.
type PackRecord struct {
	TenantID  string
	PackID    string // hex SHA-256 of the pack file
	TargetID  string
	Size      int64
	CreatedAt time.Time
	Blobs     []BlobEntry
}

// GarbagePack is a pack garbage collection decided to delete: its blobs are
// already gone from the catalogue, its file may still be on the target.
type GarbagePack struct {
	TenantID, PackID, TargetID string
}

// BlobCatalog is the blob store's index in the database: tenant keys,
// packs, blob locations and snapshots. Every row can be rebuilt from the
// storage targets (the targets are the truth; the catalogue is an index).
type BlobCatalog interface {
	// TenantKey returns the tenant's sealed data key (NotFound if none).
	TenantKey(ctx context.Context, tenantID string) ([]byte, error)
	// AddTenantKey stores a sealed key; a tenant that already has one is a
	// conflict (the caller then reads the stored one).
	AddTenantKey(ctx context.Context, tenantID string, sealed []byte, at time.Time) error
	// LookupBlobs returns the locations of those of ids that are stored.
	LookupBlobs(ctx context.Context, tenantID string, ids []BlobID) (map[BlobID]BlobLocation, error)
	// AddPacks records packs and their blobs in one transaction. A blob
	// already recorded keeps its first location (a duplicate in a later
	// pack is garbage).
	AddPacks(ctx context.Context, packs []PackRecord) error
	// TenantPacks calls fn for every pack of the tenant with its blobs.
	TenantPacks(ctx context.Context, tenantID string, fn func(PackRecord) error) error
	// CollectPacks, in one transaction, records the repacked packs (their
	// blobs move there), removes the dead packs and the blobs still located
	// in them, and marks the dead packs as garbage.
	CollectPacks(ctx context.Context, tenantID string, repacked []PackRecord, dead []GarbagePack) error
	// Garbage lists packs marked for deletion whose files may remain.
	Garbage(ctx context.Context, tenantID string) ([]GarbagePack, error)
	// ForgetGarbage drops the marks of packs whose files are deleted.
	ForgetGarbage(ctx context.Context, tenantID string, packIDs []string) error
	// AddSnapshot records a snapshot whose manifest is stored; tree lists
	// the hex blob ids of its item manifest.
	AddSnapshot(ctx context.Context, s *Snapshot, tree []string) error
	// Snapshot returns one snapshot and its tree.
	Snapshot(ctx context.Context, id string) (*Snapshot, []string, error)
	// Snapshots lists snapshots newest first.
	Snapshots(ctx context.Context, f SnapshotFilter) ([]*Snapshot, error)
	// DeleteSnapshot removes a snapshot's row.
	DeleteSnapshot(ctx context.Context, tenantID, id string) error
	// TenantSnapshotTrees calls fn for every snapshot of the tenant.
	TenantSnapshotTrees(ctx context.Context, tenantID string, fn func(s *Snapshot, tree []string) error) error
	// BlobTenants lists the tenants with a data key.
	BlobTenants(ctx context.Context) ([]string, error)
}

// String is the id in lowercase hex.
func (id BlobID) String() string { return hex.EncodeToString(id[:]) }

// MarshalText writes the id as lowercase hex.
func (id BlobID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText reads an id written by MarshalText.
func (id *BlobID) UnmarshalText(b []byte) error {
	if len(b) != 64 {
		return fmt.Errorf("blob id: want 64 hex digits, got %d", len(b))
	}
	_, err := hex.Decode(id[:], b)
	return err
}

// ParseBlobID reads a hex blob id.
func ParseBlobID(s string) (BlobID, error) {
	var id BlobID
	return id, id.UnmarshalText([]byte(s))
}
