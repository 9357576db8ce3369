// Package archive is the email archive (CONTRACT §14): capture channels
// (SMTP journaling, IMAP and Microsoft 365 polling), messages stored once
// per tenant by the SHA-256 of their exact bytes, the per-tenant
// transparency log (app/archive/chain) with signed checkpoints, retention
// and legal holds, verification, evidence reports, search and export.
//
// This file holds the package's types and the Service; its parts live in
// their own files: intake*.go (Ingest, the SMTP server, the checkpointer,
// the spool mover, verification), policy*.go (holds, retention, purge,
// search, export, evidence) and capture.go (the scheduler of polling
// channels; the pollers are in app/archive/mailpoll).
//
// Where things are:
//   - schema: store/migrations/0015_archive.sql (read its comments);
//   - SQL: store/archive*.go, implementing the Store interfaces below;
//   - message bytes: first the spool, data_dir/archive/spool/<tenant>/,
//     before the record commits (250 follows both): a message of at most
//     1 MiB is appended by the group-commit batcher to the tenant's
//     current segment seg-<n> with the rest of its batch, one fdatasync
//     per batch, its row naming the slice (spool_segment, spool_offset,
//     spool_length); a larger one is its own file <sha256> (temp file +
//     fsync + rename, directory synced by the batcher). Then the mover
//     puts them into the blob store in large packs (archive_messages.content
//     set, the file removed, a segment deleted once no unmoved message
//     needs it). A purge wipes the message's segment slice (hole punched),
//     deletes its spool file, or drops the row's content (the blob store's
//     garbage collection then frees the blobs: blobstore.Config.ExtraRoots
//     lists the archive's live blobs). See intake_segment.go.
package archive

import (
	"context"
	"database/sql"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"backstop/app"
	"backstop/app/archive/chain"
	"backstop/app/blobstore"
)

// Id prefixes.
const (
	PrefixChannel = "ch_"
	PrefixMessage = "am_"
	PrefixHold    = "hd_"
)

// Channel kinds and states.
const (
	KindSMTPJournal = "smtp_journal"
	KindIMAP        = "imap"
	KindM365        = "m365"

	ChannelOK      = "ok"
	ChannelIdle    = "idle"
	ChannelFailing = "failing"
)

// Queues and job kinds.
const (
	QueueArchiveVerify = app.QueueArchiveVerify
	// TargetArchive is the job target type of archive jobs (target id: the
	// tenant id).
	TargetArchive = "archive"
)

// Channel is a capture channel (CONTRACT §14).
type Channel struct {
	ID            string
	TenantID      string
	Kind          string
	DisplayName   string
	Address       string // smtp_journal: <token>@<archive.smtp_domain>
	SourceID      string // imap, m365
	State         string
	LastError     string
	LastMessageAt *time.Time
	MessagesTotal int64
	Messages24h   int64 // read with the channel
	Rejected24h   int64
	Cursor        string // the poller's state
	CreatedAt     time.Time
}

// ChannelView is the API shape.
type ChannelView struct {
	ID            string    `json:"id"`
	TenantID      string    `json:"tenantId"`
	Kind          string    `json:"kind" enum:"smtp_journal,imap,m365"`
	DisplayName   string    `json:"displayName"`
	Address       *string   `json:"address" doc:"The journal recipient address (smtp_journal)."`
	SourceID      *string   `json:"sourceId"`
	State         string    `json:"state" enum:"ok,idle,failing"`
	LastMessageAt *app.Time `json:"lastMessageAt"`
	MessagesTotal int64     `json:"messagesTotal"`
	Messages24h   int64     `json:"messages24h"`
	Rejected24h   int64     `json:"rejected24h"`
	LastError     *string   `json:"lastError"`
	CreatedAt     app.Time  `json:"createdAt"`
}

// ChannelSpec is POST /archive/channels.
type ChannelSpec struct {
	TenantID    string
	Kind        string
	DisplayName string
	SourceID    string
}

// Envelope is how a message arrived: the SMTP envelope and, for an
// Exchange journal report, the report's envelope (parsed for search;
// the whole report is what is stored and hashed).
type Envelope struct {
	MailFrom string   `json:"mailFrom,omitempty"`
	RcptTo   []string `json:"rcptTo,omitempty"`
	Journal  *Journal `json:"journal,omitempty"`
	// Source is where a polled message came from (folder, Graph id).
	Source string `json:"source,omitempty"`
}

// Journal is the envelope of an Exchange journal report ([MS-XJRNL]).
type Journal struct {
	Sender     string             `json:"sender"`
	Subject    string             `json:"subject,omitempty"`
	MessageID  string             `json:"messageId,omitempty"`
	OnBehalfOf string             `json:"onBehalfOf,omitempty"`
	Recipients []JournalRecipient `json:"recipients"`
}

// JournalRecipient is one To/Cc/Bcc/Recipient line.
type JournalRecipient struct {
	Field     string `json:"field"` // To, Cc, Bcc, Recipient
	Address   string `json:"address"`
	Expanded  string `json:"expanded,omitempty"`
	Forwarded string `json:"forwarded,omitempty"`
}

// Message is an archived message as stored.
type Message struct {
	ID          string
	TenantID    string
	SHA256      string
	Size        int64
	RecordIndex int64 // its first message record
	CapturedAt  time.Time
	ChannelID   string // first channel
	Subject     string
	From        string
	To          []string
	Date        *time.Time
	MessageID   string
	Custodians  []string
	Journal     bool
	PurgedAt    *time.Time
}

// MessageView is the API shape of an archived message.
type MessageView struct {
	ID          string    `json:"id"`
	TenantID    string    `json:"tenantId"`
	SHA256      string    `json:"sha256"`
	Size        int64     `json:"size"`
	RecordIndex int64     `json:"recordIndex"`
	CapturedAt  app.Time  `json:"capturedAt"`
	ChannelID   string    `json:"channelId"`
	Subject     string    `json:"subject"`
	From        string    `json:"from"`
	To          []string  `json:"to"`
	Date        *app.Time `json:"date"`
	MessageID   string    `json:"messageId"`
	Journal     bool      `json:"journal" doc:"Captured as an Exchange journal report (kept whole)."`
	Held        bool      `json:"held" doc:"Covered by an active legal hold."`
	Purged      bool      `json:"purged"`
}

// Parsed is what the intake reads from a message for search (never
// changing the stored bytes).
type Parsed struct {
	Subject    string
	From       string
	To         []string // to, cc, bcc
	Date       *time.Time
	MessageID  string
	Custodians []string
	Body       string // text for the index (text parts, html stripped), bounded
	Journal    *Journal
}

// Hold is a legal hold.
type Hold struct {
	ID                 string
	TenantID           string
	Name               string
	Matter             string
	Custodians         []string
	From, To           *time.Time
	Query              string
	CreatedAt          time.Time
	CreatedBy          string
	RecordIndex        int64
	ReleasedAt         *time.Time
	ReleaseReason      string
	ReleasedBy         string
	ReleaseRecordIndex *int64
}

// HoldSpec is POST /archive/holds.
type HoldSpec struct {
	TenantID   string
	Name       string
	Matter     string
	Custodians []string
	From, To   *time.Time
	Query      string
	By         string // who (audit)
}

// Retention is PUT /archive/retention (per tenant).
type Retention struct {
	DefaultDays int             `json:"defaultDays" minimum:"0"`
	Rules       []RetentionRule `json:"rules"`
}

// RetentionRule keeps matching messages for Days (first match wins).
type RetentionRule struct {
	Match struct {
		Channel         string `json:"channel,omitempty"`
		From            string `json:"from,omitempty" doc:"Sender address or @domain."`
		To              string `json:"to,omitempty" doc:"Recipient address or @domain."`
		SubjectContains string `json:"subjectContains,omitempty"`
	} `json:"match"`
	Days int `json:"days" minimum:"0"`
}

// DefaultRetentionDays is 7 years (CONTRACT §14).
const DefaultRetentionDays = 2557

// ChainView is GET /archive/chain.
type ChainView struct {
	TenantID       string    `json:"tenantId"`
	Origin         string    `json:"origin"`
	Size           int64     `json:"size"`
	RootHash       string    `json:"rootHash"`
	CheckpointAt   *app.Time `json:"checkpointAt"`
	State          string    `json:"state" enum:"ok,broken,empty"`
	LastVerifiedAt *app.Time `json:"lastVerifiedAt"`
	VerifierKey    string    `json:"verifierKey"`
}

// SearchQuery is GET /archive/messages.
type SearchQuery struct {
	TenantID  string
	Q         string // FTS5 query over subject, addresses, body (user text, quoted safely)
	From, To  *time.Time
	ChannelID string
	Custodian string
	Cursor    string
	Limit     int
}

// CoreStore is the log's SQL.
type CoreStore interface {
	// AppendArchiveRecords appends records to the tenant's log in one
	// transaction: their rows, their tlog stored hashes, and whatever also
	// writes in the same transaction (message, capture, hold or tombstone
	// rows), given the index of the first record. Appends of one tenant
	// are serialised.
	AppendArchiveRecords(ctx context.Context, tenantID string, recs []*chain.Record, also func(tx *sql.Tx, first int64) error) (first int64, err error)
	// ArchiveHashReader reads the tenant's stored hashes.
	ArchiveHashReader(tenantID string) chain.HashReader
	ArchiveSize(ctx context.Context, tenantID string) (int64, error)
	ArchiveRecord(ctx context.Context, tenantID string, index int64) ([]byte, error)
	// ArchiveRecords calls fn for records [from, to) in order.
	ArchiveRecords(ctx context.Context, tenantID string, from, to int64, fn func(index int64, text []byte) error) error
}

// CoreStore is the core's SQL (store/archive.go): see Store.
//
// Store is everything the archive keeps in the catalogue; store.DB
// implements it. Each part of the package declares its own part:
// CoreStore here (records, hashes), IntakeStore (channels, messages,
// captures, checkpoints, state), PolicyStore (holds, retention, purge,
// search) and CaptureStore (pollers' cursors) in their files.
type Store interface {
	CoreStore
	IntakeStore
	PolicyStore
	CaptureStore
}

// Config is what the Service works with.
type Config struct {
	Store   Store
	Blobs   *blobstore.Store
	DataDir string // spool: DataDir/archive/spool/<tenant>/
	Signer  *chain.Signer
	// Origin is a tenant's checkpoint origin: "<public host>/archive/<tenantId>".
	Origin func(tenantID string) string
	// TSAURL, when set, is the RFC 3161 time-stamp authority checkpoints
	// are stamped by (archive.tsa_url).
	TSAURL     string
	HTTP       *http.Client
	SMTPDomain string // archive.smtp_domain: channel addresses are <token>@SMTPDomain
	MaxBytes   int64  // archive.smtp_max_bytes (default 200 MB)
	// CheckpointEvery is the most time between a new record and a signed
	// checkpoint covering it (default 60 s; tests use less).
	CheckpointEvery time.Duration
	// Capture reads IMAP and Microsoft 365 sources for polling channels.
	Capture CaptureSources
	// CapturePollEvery is the most time between two polls of an imap or
	// m365 channel (default 5 min; tests use less).
	CapturePollEvery time.Duration
	Now              app.Clock
	Logger           *slog.Logger
}

// Service is the archive. One per appliance. Its parts keep their state
// in their own structs (intake, policy, capture), made by their init
// functions.
type Service struct {
	cfg     Config
	log     *slog.Logger
	intake  *intake
	policy  *policy
	capture *capture
}

// New returns the archive service; Run starts its background work.
func New(cfg Config) (*Service, error) {
	if cfg.Now == nil {
		cfg.Now = app.SystemClock
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 200 << 20
	}
	if cfg.CheckpointEvery <= 0 {
		cfg.CheckpointEvery = 60 * time.Second
	}
	s := &Service{cfg: cfg, log: cfg.Logger}
	var err error
	if s.intake, err = newIntake(s); err != nil {
		return nil, err
	}
	if s.policy, err = newPolicy(s); err != nil {
		return nil, err
	}
	if s.capture, err = newCapture(s); err != nil {
		return nil, err
	}
	return s, nil
}

// Run runs the background work (the checkpointer, the spool mover, the
// pollers) until ctx ends.
func (s *Service) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, run := range []func(context.Context){s.intake.run, s.policy.run, s.capture.run} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run(ctx)
		}()
	}
	wg.Wait()
}

// Ingest stores one captured message for channel ch: the exact bytes of
// r (in a spool segment or file, fsynced), its message record (a new archive_messages
// row, or only a capture if the tenant has the content already), intake
// counts, the search index. It returns only once all of it is durable;
// concurrent Ingests are group-committed. A message over the size limit is
// a *TooLarge error; any internal fault is an error (the SMTP answer is
// then 4xx). (intake.go)

// Parse reads what search needs from a message's bytes, without failing on
// malformed input (what cannot be parsed is left empty). (parse.go)
