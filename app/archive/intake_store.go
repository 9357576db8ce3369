package archive

import (
	"context"
	"database/sql"
	"time"
)

// IntakeStore is the intake part's SQL (store/archive.go): channels,
// messages, captures, intake counts, checkpoints and the chain state.
// Not found is an app.ENOTFOUND error.
type IntakeStore interface {
	// CreateArchiveChannel inserts c (an smtp_journal address that a live
	// channel already has: app.ECONFLICT).
	CreateArchiveChannel(ctx context.Context, c *Channel) error
	// ArchiveChannel reads a channel that is not deleted, with its 24 h counts.
	ArchiveChannel(ctx context.Context, id string) (*Channel, error)
	// ArchiveChannelByAddress reads the live smtp_journal channel of an
	// address (lowercase).
	ArchiveChannelByAddress(ctx context.Context, address string) (*Channel, error)
	// ArchiveChannels lists a tenant's live channels ("" for every tenant).
	ArchiveChannels(ctx context.Context, tenantID string) ([]*Channel, error)
	// DeleteArchiveChannel marks a channel deleted (its row stays).
	DeleteArchiveChannel(ctx context.Context, id string, at time.Time) error
	// AddArchiveRejected counts one rejected message for a channel.
	AddArchiveRejected(ctx context.Context, channelID string, at time.Time) error

	// ArchiveMessageBySHA reads the tenant's message of that content.
	ArchiveMessageBySHA(ctx context.Context, tenantID, sha256 string) (*StoredMessage, error)
	// ArchiveMessage reads a message by id.
	ArchiveMessage(ctx context.Context, tenantID, id string) (*StoredMessage, error)
	// ArchiveMessagesAll calls fn for every message of the tenant, purged
	// ones included, in record order.
	ArchiveMessagesAll(ctx context.Context, tenantID string, fn func(*StoredMessage) error) error
	// ArchiveSpooled lists up to limit messages whose bytes are still in
	// the spool (content '', not purged).
	ArchiveSpooled(ctx context.Context, tenantID string, limit int) ([]*StoredMessage, error)
	// SetArchiveContent sets the blob store content (JSON) of spooled
	// messages, by message id; a message purged meanwhile keeps ''.
	SetArchiveContent(ctx context.Context, tenantID string, content map[string]string) error
	// ArchiveLiveSegments lists the tenant's spool segments that rows
	// still need (content '', not purged).
	ArchiveLiveSegments(ctx context.Context, tenantID string) (map[string]bool, error)
	// ArchivePurgedInSegments lists purged messages whose segment slice
	// is still to be wiped (spool_segment set).
	ArchivePurgedInSegments(ctx context.Context, tenantID string) ([]*StoredMessage, error)
	// ClearArchiveSpool drops the spool location (spool_*) of the rows
	// naming the segments (deleted), or of the messages by id (wiped).
	ClearArchiveSpool(ctx context.Context, tenantID string, segments, ids []string) error
	// CommitCapturesTx writes, in the append's transaction, the rows of
	// captured messages whose records were given indexes (c.Index).
	CommitCapturesTx(ctx context.Context, tx *sql.Tx, caps []*Capture) error
	// ArchiveStats counts a tenant's (or, for "", every tenant's) messages
	// not purged and their bytes.
	ArchiveStats(ctx context.Context, tenantID string) (messages, bytes int64, err error)
	// ArchiveTenants lists the tenants that have records.
	ArchiveTenants(ctx context.Context) ([]string, error)

	InsertArchiveCheckpoint(ctx context.Context, c *StoredCheckpoint) error
	// LatestArchiveCheckpoint reads the checkpoint of the greatest size.
	LatestArchiveCheckpoint(ctx context.Context, tenantID string) (*StoredCheckpoint, error)
	// ArchiveCheckpoint reads the checkpoint of a size.
	ArchiveCheckpoint(ctx context.Context, tenantID string, size int64) (*StoredCheckpoint, error)
	// ArchiveCheckpoints lists every checkpoint by size.
	ArchiveCheckpoints(ctx context.Context, tenantID string) ([]*StoredCheckpoint, error)
	// UnstampedArchiveCheckpoints lists checkpoints without a time-stamp.
	UnstampedArchiveCheckpoints(ctx context.Context, tenantID string) ([]*StoredCheckpoint, error)
	SetArchiveCheckpointStamp(ctx context.Context, tenantID string, size int64, tsr []byte, genTime time.Time) error

	// ArchiveState reads the tenant's chain state (state "ok", never
	// verified, when there is no row).
	ArchiveState(ctx context.Context, tenantID string) (*ChainState, error)
	SetArchiveState(ctx context.Context, st *ChainState) error
}

// StoredMessage is a message with where its bytes are.
type StoredMessage struct {
	Message
	// Content is the blobstore.Content JSON, "" while in the spool.
	Content string
	// Spool is the segment slice of the bytes ("" segment: none, a large
	// message's own spool file or the blob store).
	Spool SpoolSlice
}

// SpoolSlice is where a message's bytes are in a spool segment.
type SpoolSlice struct {
	Segment        string // seg-<n>, in the tenant's spool directory
	Offset, Length int64
}

// Capture is one captured message as the batcher commits it: the message
// row (when its content is new to the tenant) and the capture row.
type Capture struct {
	Message  *Message // Index set by the batcher when New
	New      bool     // insert the archive_messages row and its search row
	Revive   bool     // the content had been purged: it is back (spool)
	Body     string   // search text
	Envelope string   // JSON
	Index    int64    // the message record's index
	At       time.Time
	// Spool is where the bytes were appended (New or Revive; zero when
	// they are a large message's own spool file).
	Spool SpoolSlice
}

// StoredCheckpoint is a signed checkpoint as kept.
type StoredCheckpoint struct {
	TenantID string
	Size     int64
	Root     []byte
	Note     string
	At       time.Time
	TSR      []byte
	TSATime  *time.Time
}

// Chain states.
const (
	ChainOK     = "ok"
	ChainBroken = "broken"
	ChainEmpty  = "empty"
)

// ChainState is the tenant's archive_state row.
type ChainState struct {
	TenantID       string
	State          string // ok | broken
	LastVerifiedAt *time.Time
	LastVerifyJob  string
	BrokenReason   string
}
