// Package blobstore is where Backstop keeps what it backs up itself (IMAP
// accounts, Microsoft 365 mail and files, the archive): a content-addressed,
// deduplicated, compressed and encrypted store on a storage target (a local
// directory or an S3 bucket) that describes itself, so that the catalogue
// can be rebuilt from the target and the appliance key alone.
//
// Items (a message, a file) are stored as the exact bytes the source gave.
// An item up to 128 KiB is one blob; a larger one is cut by a keyed FastCDC
// chunker (16/64/256 KiB) so a repeated attachment is stored once. A blob is
// named by HMAC-SHA-256 of its plaintext under the tenant's key, compressed
// with zstd when that helps, encrypted with XChaCha20-Poly1305 and appended
// to a pack of about 16 MiB. Packs are written once (create-only) and never
// modified; index files map blobs to packs; snapshot manifests list a
// snapshot's items in "tree" blobs. docs/blobstore.md documents the format
// and its reasons.
//
// The database catalogue (app.BlobCatalog) indexes what the targets hold.
// Order of writes keeps every crash safe: a pack is durable on the target
// before the catalogue names it; a snapshot's manifest is durable before
// its row exists; garbage collection removes blobs from the catalogue (and
// marks their packs) in one transaction before it deletes any file.
package blobstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"backstop/app"
)

// Targets is what the blob store needs of the storage targets
// (app/targets implements it).
type Targets interface {
	// ForTenant returns the target new data of the tenant goes to.
	ForTenant(ctx context.Context, tenantID string) (targetID string, b Backend, err error)
	// Backend returns the backend of a target by id.
	Backend(ctx context.Context, targetID string) (Backend, error)
	// WriteFailed reports a failed write, so the target's state is checked.
	WriteFailed(targetID string, err error)
}

// Config configures a Store.
type Config struct {
	Key     *ApplianceKey
	Catalog app.BlobCatalog
	Targets Targets
	Now     app.Clock
	Logger  *slog.Logger
	// PackSize is the size at which a pack is closed (default 16 MiB).
	PackSize int
	// Uploads is the number of pack uploads in flight per writer (default
	// 2): uploads (and their fsyncs) overlap while the writer fills the
	// next pack.
	Uploads int
	// TempDir holds packs being assembled for targets that cannot take a
	// file of their own (S3); default os.TempDir(). Packs for a local
	// target are assembled in the target's own temporary directory.
	TempDir string
	// TenantName, if set, names tenants in their key files on the target,
	// so a rebuilt catalogue can recreate them with their names.
	TenantName func(ctx context.Context, tenantID string) (string, error)
	// ExtraRoots, if set, calls fn for every blob that is live outside
	// snapshots (the archive's moved messages), so garbage collection keeps
	// them.
	ExtraRoots func(ctx context.Context, tenantID string, fn func(app.BlobID)) error
}

// Store is the blob store of the appliance, for every tenant and target.
// Its methods are safe for concurrent use.
type Store struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	keys    map[string]*tenantKeys
	ensured map[string]bool // target + "/" + tenant: marker and key file written
	tenants map[string]*tenantState
	// sealSlots bounds the blobs being compressed and encrypted at once
	// over every writer (GOMAXPROCS).
	sealSlots chan struct{}
}

// tenantState coordinates writers and garbage collection of one tenant.
// Writers look blobs up in the catalogue and mark them used under rw's read
// lock; garbage collection decides under its write lock, so a blob a
// running backup may still reference is never collected.
type tenantState struct {
	rw      sync.RWMutex
	gc      sync.Mutex // one collection at a time
	writers map[*Writer]struct{}
	// While a collection runs, writers that close hand their used blobs
	// here, and opened counts writers that started meanwhile.
	collecting bool
	closedUsed map[app.BlobID]struct{}
	opened     int
}

// New returns a store.
func New(cfg Config) (*Store, error) {
	if cfg.Key == nil || cfg.Catalog == nil || cfg.Targets == nil {
		return nil, errors.New("blobstore: Key, Catalog and Targets are required")
	}
	if cfg.Now == nil {
		cfg.Now = app.SystemClock
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.PackSize <= 0 {
		cfg.PackSize = 16 << 20
	}
	if cfg.TempDir == "" {
		cfg.TempDir = os.TempDir()
	}
	if cfg.Uploads <= 0 {
		cfg.Uploads = 2
	}
	return &Store{cfg: cfg, log: cfg.Logger, keys: map[string]*tenantKeys{}, ensured: map[string]bool{},
		tenants: map[string]*tenantState{}, sealSlots: make(chan struct{}, runtime.GOMAXPROCS(0))}, nil
}

// spoolPrefix names the packs being assembled in TempDir.
const spoolPrefix = "pack-"

// RemoveStale removes packs a crashed process left half-assembled in
// TempDir (those for local targets are removed by NewLocal). Call it before
// the first writer opens.
func (s *Store) RemoveStale() error {
	names, err := filepath.Glob(filepath.Join(s.cfg.TempDir, spoolPrefix+"*"))
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := os.Remove(n); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

func (s *Store) tenant(id string) *tenantState {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := s.tenants[id]
	if ts == nil {
		ts = &tenantState{writers: map[*Writer]struct{}{}}
		s.tenants[id] = ts
	}
	return ts
}

// tenantKeys returns the tenant's keys, creating its data key on first use.
func (s *Store) tenantKeys(ctx context.Context, tenantID string, create bool) (*tenantKeys, error) {
	s.mu.Lock()
	k := s.keys[tenantID]
	s.mu.Unlock()
	if k != nil {
		return k, nil
	}
	sealed, err := s.cfg.Catalog.TenantKey(ctx, tenantID)
	if app.ErrorCode(err) == app.ENOTFOUND && create {
		master := make([]byte, 32)
		randRead(master)
		err = s.cfg.Catalog.AddTenantKey(ctx, tenantID, s.cfg.Key.sealTenantKey(tenantID, master), s.cfg.Now())
		if err != nil && app.ErrorCode(err) != app.ECONFLICT {
			return nil, err
		}
		sealed, err = s.cfg.Catalog.TenantKey(ctx, tenantID)
	}
	if err != nil {
		return nil, err
	}
	master, err := s.cfg.Key.openTenantKey(tenantID, sealed)
	if err != nil {
		return nil, err
	}
	if k, err = newTenantKeys(master); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.keys[tenantID] = k
	s.mu.Unlock()
	return k, nil
}

// marker is the plaintext file at a target's root.
type marker struct {
	Format   string `json:"format"`
	Version  int    `json:"version"`
	TargetID string `json:"targetId"`
}

// keyFile is a tenant's key file on a target.
type keyFile struct {
	TenantID string `json:"tenantId"`
	Name     string `json:"name,omitempty"`
	Sealed   []byte `json:"sealed"`
}

// ensureTarget writes the target marker and the tenant's sealed key to a
// target before the first pack of the tenant goes there, so the target
// alone describes itself.
func (s *Store) ensureTarget(ctx context.Context, targetID string, b Backend, tenantID string) error {
	k := targetID + "/" + tenantID
	s.mu.Lock()
	done := s.ensured[k]
	s.mu.Unlock()
	if done {
		return nil
	}
	m, _ := json.Marshal(marker{Format: formatName, Version: formatVersion, TargetID: targetID})
	if err := createBytes(ctx, b, markerName, m); err != nil && !errors.Is(err, ErrExists) {
		return err
	}
	sealed, err := s.cfg.Catalog.TenantKey(ctx, tenantID)
	if err != nil {
		return err
	}
	kf := keyFile{TenantID: tenantID, Sealed: sealed}
	if s.cfg.TenantName != nil {
		kf.Name, _ = s.cfg.TenantName(ctx, tenantID)
	}
	body, _ := json.Marshal(kf)
	if err := createBytes(ctx, b, keyName(tenantID), body); err != nil && !errors.Is(err, ErrExists) {
		return err
	}
	s.mu.Lock()
	s.ensured[k] = true
	s.mu.Unlock()
	return nil
}

// Snapshots lists snapshots newest first.
func (s *Store) Snapshots(ctx context.Context, f app.SnapshotFilter) ([]*app.Snapshot, error) {
	return s.cfg.Catalog.Snapshots(ctx, f)
}

// Failure converts a storage error into the job failure it causes:
// storage.full, storage.unreachable (transient), or the error itself.
func Failure(targetID string, err error) error {
	switch {
	case errors.Is(err, ErrFull):
		return app.Fail("storage.full", map[string]any{"target": targetID}, err)
	case errors.Is(err, ErrUnreachable), errors.Is(err, ErrDenied):
		return app.Fail("storage.unreachable", map[string]any{"target": targetID}, err)
	}
	return err
}

func (s *Store) now() time.Time { return s.cfg.Now() }

func wrapf(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}
