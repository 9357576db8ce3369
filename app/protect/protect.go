// Package protect is the protected-object layer: IMAP sources (created and
// changed only after the engine's login check), the imap_backup and verify
// job kinds of protected objects, their schedules, and browsing snapshots
// and reading items for the API. It calls the IMAP engine
// (app/imapbackup) through function values, so the engine can be replaced
// in tests, and keeps what backups and verifies find as the object's facts,
// from which app.ProtectedObject.View computes readiness and attention.
package protect

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"backstop/app"
	"backstop/app/blobstore"
	"backstop/app/graph"
	"backstop/app/imapbackup"
	"backstop/app/m365"
)

// SecretBox seals secrets at rest, bound to the id of the row that holds
// them. *webhooks.SecretBox is one.
type SecretBox interface {
	Seal(id, secret string) []byte
	Open(id string, sealed []byte) (string, error)
}

// Engine is the IMAP engine's entry points (see app/imapbackup).
type Engine struct {
	Check   func(ctx context.Context, a imapbackup.Account) error
	Backup  func(ctx context.Context, a imapbackup.Account, w *blobstore.Writer, prev []blobstore.Item, progress imapbackup.Progress) (*imapbackup.BackupResult, error)
	Restore func(ctx context.Context, a imapbackup.Account, req imapbackup.RestoreRequest, open imapbackup.Opener, progress imapbackup.Progress) (*imapbackup.RestoreResult, error)
}

// M365Engine is the Microsoft 365 engine's entry points (see app/m365).
type M365Engine struct {
	Check         func(ctx context.Context, c *graph.Client) error
	ConsentURL    func(loginURL, azureTenantID, clientID string) string
	SyncDirectory func(ctx context.Context, c *graph.Client, progress m365.Progress) ([]m365.DirectoryUser, error)
	BackupMailbox func(ctx context.Context, c *graph.Client, userID string, w *blobstore.Writer, prev []blobstore.Item, progress m365.Progress) (*m365.BackupResult, error)
	BackupDrive   func(ctx context.Context, c *graph.Client, userID string, w *blobstore.Writer, prev []blobstore.Item, progress m365.Progress) (*m365.BackupResult, error)
	RestoreMail   func(ctx context.Context, c *graph.Client, req m365.RestoreRequest, open m365.Opener, progress m365.Progress) (*m365.RestoreResult, error)
	RestoreFiles  func(ctx context.Context, c *graph.Client, req m365.RestoreRequest, open m365.Opener, progress m365.Progress) (*m365.RestoreResult, error)
	// NewClient builds a tenant's client (graph.New when nil).
	NewClient func(cfg graph.Config) (*graph.Client, error)
}

// Catalog reads one snapshot row (app.BlobCatalog has it).
type Catalog interface {
	Snapshot(ctx context.Context, id string) (*app.Snapshot, []string, error)
}

// Config is what a Manager works with.
type Config struct {
	Sources app.SourceStore
	Objects app.ProtectedObjectService
	Box     SecretBox
	Blobs   *blobstore.Store
	Catalog Catalog
	Engine  Engine
	M365    M365Engine
	// Jobs queues directory syncs (the runner).
	Jobs app.JobSubmitter
	// Directory stores the Microsoft 365 directory (directory syncs and
	// protection of m365 entries).
	Directory app.DirectoryService
	// GraphLimits is the appliance-wide budget of Graph requests shared by
	// every source's client (graph.max_concurrency).
	GraphLimits *graph.Limits
	Now         app.Clock
	Logger      *slog.Logger
	// VerifySamples is how many items a verify reads back (default 20;
	// every item when the snapshot has fewer).
	VerifySamples int
	// SchedulesChanged, if set, is called after a change that affects
	// backup schedules (a source created, changed or deleted); serve
	// syncs the runner's schedules then.
	SchedulesChanged func()
}

// Manager implements app.SourceService and app.SnapshotBrowser and makes
// the job kinds of protected objects.
type Manager struct {
	cfg Config
	log *slog.Logger

	clientsMu sync.Mutex
	clients   map[string]cachedClient // by source id
}

var (
	_ app.SourceService   = (*Manager)(nil)
	_ app.SnapshotBrowser = (*Manager)(nil)
)

// New returns a manager with cfg's defaults filled in.
func New(cfg Config) *Manager {
	if cfg.Now == nil {
		cfg.Now = app.SystemClock
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.VerifySamples <= 0 {
		cfg.VerifySamples = 20
	}
	if cfg.M365.NewClient == nil {
		cfg.M365.NewClient = graph.New
	}
	return &Manager{cfg: cfg, log: cfg.Logger, clients: map[string]cachedClient{}}
}

// errNoEngine is what the engine's functions answer when none is set.
var errNoEngine = errors.New("IMAP engine not built into this binary")

func (m *Manager) changed() {
	if m.cfg.SchedulesChanged != nil {
		m.cfg.SchedulesChanged()
	}
}

// Account returns how to reach an IMAP source's account, with its
// password unsealed. Restores use it for the destination account.
func (m *Manager) Account(ctx context.Context, sourceID string) (imapbackup.Account, error) {
	src, err := m.cfg.Sources.Source(ctx, sourceID)
	if err != nil {
		return imapbackup.Account{}, err
	}
	return m.account(src)
}

func (m *Manager) account(src *app.Source) (imapbackup.Account, error) {
	pw, err := m.cfg.Box.Open(src.ID, src.SealedSecret)
	if err != nil {
		return imapbackup.Account{}, err
	}
	s := src.IMAP
	return imapbackup.Account{Host: s.Host, Port: s.Port, Security: s.Security, Username: s.Username, Password: pw,
		TrustFingerprint: s.TrustFingerprint}, nil
}
