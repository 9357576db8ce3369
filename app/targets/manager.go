// Package targets manages the storage targets of the blob store (CONTRACT
// §11): it creates the default local target on a fresh install, checks a
// target before it is trusted (and again when its credentials change),
// keeps every target's state current (every minute and after every failed
// write), and hands the blob store the backend a tenant's new data goes to.
package targets

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"backstop/app"
	"backstop/app/blobstore"
)

var _ app.StorageTargetService = (*Manager)(nil)

// SecretBox seals secrets at rest, bound to the id of the row that holds
// them. *webhooks.SecretBox is one.
type SecretBox interface {
	Seal(id, secret string) []byte
	Open(id string, sealed []byte) (string, error)
}

// Config is what a Manager works with.
type Config struct {
	Store app.StorageTargetStore
	Box   SecretBox
	// DataDir holds the default local target, DataDir/blobs.
	DataDir string
	// MinFreeBytes: a target with less free space is full
	// (storage.min_free_bytes).
	MinFreeBytes int64
	// OpenS3 opens an S3-compatible target; nil refuses S3 targets.
	OpenS3 func(ctx context.Context, s app.S3Settings) (blobstore.Backend, error)
	// OpenLocal opens a local target; default blobstore.NewLocal.
	OpenLocal func(dir string) (blobstore.Backend, error)
	// Interval between checks of every target; default one minute.
	Interval time.Duration
	// CheckTimeout bounds one check of one target; default 30 s. A target
	// that does not answer within it is unreachable.
	CheckTimeout time.Duration
	Logger       *slog.Logger
	Now          app.Clock
}

// DefaultTargetName is the name of the local target made on a fresh install.
const DefaultTargetName = "Local disk"

// Manager implements app.StorageTargetService and serves the blob store
// its backends. Its methods are safe for concurrent use.
type Manager struct {
	cfg Config

	mu       sync.Mutex
	backends map[string]blobstore.Backend // by target id, opened once
	pending  map[string]bool              // targets to re-check after a failed write

	wake   chan struct{}
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a Manager; Open starts its state monitor.
func New(cfg Config) *Manager {
	if cfg.OpenLocal == nil {
		cfg.OpenLocal = func(dir string) (blobstore.Backend, error) { return blobstore.NewLocal(dir) }
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Minute
	}
	if cfg.CheckTimeout <= 0 {
		cfg.CheckTimeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = app.SystemClock
	}
	return &Manager{cfg: cfg, backends: map[string]blobstore.Backend{}, pending: map[string]bool{}, wake: make(chan struct{}, 1)}
}

// Open creates the default local target if no target exists yet, then
// starts the monitor: every target is checked at once and every Interval,
// and a target is re-checked soon after WriteFailed names it.
func (m *Manager) Open(ctx context.Context) error {
	if err := m.EnsureDefault(ctx); err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.run(runCtx)
	}()
	return nil
}

// Close stops the monitor and waits for a check in progress to end (its
// context is cancelled; its outcome is not saved).
func (m *Manager) Close() error {
	if m.cancel != nil {
		m.cancel()
	}
	m.wg.Wait()
	return nil
}

func (m *Manager) run(ctx context.Context) {
	tick := time.NewTicker(m.cfg.Interval)
	defer tick.Stop()
	m.CheckAll(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			m.CheckAll(ctx)
		case <-m.wake:
			m.mu.Lock()
			ids := m.pending
			m.pending = map[string]bool{}
			m.mu.Unlock()
			for id := range ids {
				m.CheckTarget(ctx, id)
			}
		}
	}
}

// EnsureDefault creates the default target, local at DataDir/blobs, when
// no target exists (a fresh install). The target is stored whatever its
// check finds, with that state: the appliance starts and says what is wrong.
func (m *Manager) EnsureDefault(ctx context.Context) error {
	ts, err := m.cfg.Store.StorageTargets(ctx, app.StorageTargetFilter{Limit: 1})
	if err != nil || len(ts) > 0 {
		return err
	}
	t := &app.StorageTarget{ID: app.NewID(app.PrefixStorage), Name: DefaultTargetName, Kind: app.StorageKindLocal,
		Path: filepath.Join(m.cfg.DataDir, "blobs"), Default: true, TenantIDs: []string{}}
	b, err := m.cfg.OpenLocal(t.Path)
	var st app.StorageTargetState
	if err != nil {
		st = m.failed(err)
	} else {
		st = m.evaluate(ctx, b)
	}
	applyState(t, st)
	if err := m.cfg.Store.CreateStorageTarget(ctx, t); err != nil {
		return fmt.Errorf("creating the default storage target: %w", err)
	}
	if b != nil {
		m.cache(t.ID, b)
	}
	m.cfg.Logger.Info("created the default storage target", slog.String("target_id", t.ID), slog.String("path", t.Path),
		slog.String("state", t.State))
	return nil
}

// Targets implements app.StorageTargetService. Local targets carry the
// file system they are on, from when they were opened (never a new look
// at the target).
func (m *Manager) Targets(ctx context.Context, f app.StorageTargetFilter) ([]*app.StorageTarget, error) {
	ts, err := m.cfg.Store.StorageTargets(ctx, f)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range ts {
		if fs, ok := m.backends[t.ID].(interface{ Filesystem() string }); ok {
			t.Filesystem = fs.Filesystem()
		}
	}
	return ts, nil
}

// Target returns one target.
func (m *Manager) Target(ctx context.Context, id string) (*app.StorageTarget, error) {
	return m.cfg.Store.StorageTarget(ctx, id)
}

// Create validates spec, opens the target and runs blobstore.Check on it
// before storing anything: a target that fails is an ESTORAGEUNUSABLE error
// whose message says why (never with the secret). The S3 secret is stored
// sealed. With spec.Default the target becomes the default; tenants in
// spec.TenantIDs move to it (for new data).
func (m *Manager) Create(ctx context.Context, spec app.StorageTargetSpec) (*app.StorageTarget, error) {
	t, err := m.validate(ctx, spec)
	if err != nil {
		return nil, err
	}
	var b blobstore.Backend
	switch t.Kind {
	case app.StorageKindLocal:
		b, err = m.cfg.OpenLocal(t.Path)
	case app.StorageKindS3:
		b, err = m.openS3(ctx, spec.S3)
	}
	if err != nil {
		return nil, unusable(err, spec.S3.SecretAccessKey)
	}
	st, err := m.checkNew(ctx, b, spec.S3.SecretAccessKey)
	if err != nil {
		return nil, err
	}
	applyState(t, st)
	if t.Kind == app.StorageKindS3 {
		t.SealedSecret = m.cfg.Box.Seal(t.ID, spec.S3.SecretAccessKey)
	}
	if err := m.cfg.Store.CreateStorageTarget(ctx, t); err != nil {
		return nil, err
	}
	m.cache(t.ID, b)
	return m.cfg.Store.StorageTarget(ctx, t.ID)
}

// checkNew runs the check of a target about to be trusted: an error is
// ESTORAGEUNUSABLE; the state says whether it is already full.
func (m *Manager) checkNew(ctx context.Context, b blobstore.Backend, secret string) (app.StorageTargetState, error) {
	cctx, cancel := context.WithTimeout(ctx, m.cfg.CheckTimeout)
	defer cancel()
	if err := blobstore.Check(cctx, b); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("the target did not answer within %s", m.cfg.CheckTimeout)
		}
		return app.StorageTargetState{}, unusable(err, secret)
	}
	return m.evaluate(ctx, b), nil
}

// unusable is the error of a target that failed its check; the message
// says why, with the secret removed should the backend have echoed it.
func unusable(err error, secret string) error {
	msg := err.Error()
	if secret != "" {
		msg = strings.ReplaceAll(msg, secret, "[secret]")
	}
	return &app.Error{Code: app.ESTORAGEUNUSABLE, Message: "The storage target failed its check: " + msg}
}

func (m *Manager) openS3(ctx context.Context, s app.S3Settings) (blobstore.Backend, error) {
	if m.cfg.OpenS3 == nil {
		return nil, errors.New("S3 targets are not available in this build")
	}
	return m.cfg.OpenS3(ctx, s)
}

// Update applies a PATCH. New S3 credentials are checked with the target's
// other settings before they are saved (ESTORAGEUNUSABLE otherwise); the
// default flag can only move to another target, never be removed.
func (m *Manager) Update(ctx context.Context, id string, u app.StorageTargetUpdate) (*app.StorageTarget, error) {
	cur, err := m.cfg.Store.StorageTarget(ctx, id)
	if err != nil {
		return nil, err
	}
	var name string
	if u.Name != nil {
		if name, err = validName(*u.Name); err != nil {
			return nil, err
		}
	}
	if u.TenantIDs != nil {
		for _, tn := range *u.TenantIDs {
			if !app.HasPrefix(tn, app.PrefixTenant) {
				return nil, app.FieldError("tenantIds", "no such tenant %s", tn)
			}
		}
	}
	var (
		newBackend blobstore.Backend
		newState   *app.StorageTargetState
		sealed     []byte
		keyID      = cur.AccessKeyID
	)
	if u.AccessKeyID != nil || u.SecretAccessKey != nil {
		if cur.Kind != app.StorageKindS3 {
			return nil, app.FieldError("accessKeyId", "only S3 targets have credentials")
		}
		secret := ""
		if u.SecretAccessKey != nil {
			secret = *u.SecretAccessKey
		} else if secret, err = m.cfg.Box.Open(cur.ID, cur.SealedSecret); err != nil {
			return nil, err
		}
		if u.AccessKeyID != nil {
			keyID = strings.TrimSpace(*u.AccessKeyID)
		}
		if keyID == "" {
			return nil, app.FieldError("accessKeyId", "accessKeyId must not be blank")
		}
		if secret == "" {
			return nil, app.FieldError("secretAccessKey", "secretAccessKey must not be blank")
		}
		s := cur.S3Settings(secret)
		s.AccessKeyID = keyID
		if newBackend, err = m.openS3(ctx, s); err != nil {
			return nil, unusable(err, secret)
		}
		st, err := m.checkNew(ctx, newBackend, secret)
		if err != nil {
			return nil, err
		}
		newState = &st
		sealed = m.cfg.Box.Seal(cur.ID, secret)
	}
	t, err := m.cfg.Store.UpdateStorageTarget(ctx, id, func(t *app.StorageTarget) error {
		if u.Name != nil {
			t.Name = name
		}
		if u.Default != nil {
			if !*u.Default && t.Default {
				return app.FieldError("default", "exactly one target is the default: make another target the default instead")
			}
			t.Default = t.Default || *u.Default
		}
		if u.TenantIDs != nil {
			t.TenantIDs = append([]string{}, *u.TenantIDs...)
		}
		if sealed != nil {
			t.AccessKeyID, t.SealedSecret = keyID, sealed
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if newBackend != nil {
		m.cache(id, newBackend)
		// The state of the old credentials says nothing of the new ones.
		if err := m.cfg.Store.SaveStorageTargetState(ctx, id, *newState); err != nil {
			return nil, err
		}
		applyState(t, *newState)
	}
	return t, nil
}

// Usable returns nil when the default target's last known state is ok
// (for /readyz), else an error saying which state and why.
func (m *Manager) Usable(ctx context.Context) error {
	ts, err := m.cfg.Store.StorageTargets(ctx, app.StorageTargetFilter{})
	if err != nil {
		return err
	}
	for _, t := range ts {
		if !t.Default {
			continue
		}
		if t.State == app.StorageOK {
			return nil
		}
		why := ""
		if t.LastError != nil {
			why = ": " + *t.LastError
		}
		return fmt.Errorf("default storage target %s (%s) is %s%s", t.ID, t.Name, t.State, why)
	}
	return errors.New("no default storage target")
}

// ForTenant returns the target new data of the tenant goes to (its
// placement, else the default) and its backend, opened once and reused.
func (m *Manager) ForTenant(ctx context.Context, tenantID string) (targetID string, b blobstore.Backend, err error) {
	if targetID, err = m.cfg.Store.TenantStorageTarget(ctx, tenantID); err != nil {
		return "", nil, err
	}
	b, err = m.Backend(ctx, targetID)
	return targetID, b, err
}

// Backend returns the backend of the target (to read what was written
// there), opened once and reused.
func (m *Manager) Backend(ctx context.Context, targetID string) (blobstore.Backend, error) {
	m.mu.Lock()
	b := m.backends[targetID]
	m.mu.Unlock()
	if b != nil {
		return b, nil
	}
	t, err := m.cfg.Store.StorageTarget(ctx, targetID)
	if err != nil {
		return nil, err
	}
	switch t.Kind {
	case app.StorageKindLocal:
		b, err = m.cfg.OpenLocal(t.Path)
	case app.StorageKindS3:
		secret, oerr := m.cfg.Box.Open(t.ID, t.SealedSecret)
		if oerr != nil {
			return nil, fmt.Errorf("storage target %s: %w", t.ID, oerr)
		}
		b, err = m.openS3(ctx, t.S3Settings(secret))
	default:
		err = fmt.Errorf("unknown kind %q", t.Kind)
	}
	if err != nil {
		return nil, fmt.Errorf("storage target %s: %w", t.ID, err)
	}
	return m.cacheFirst(targetID, b), nil
}

func (m *Manager) cache(id string, b blobstore.Backend) {
	m.mu.Lock()
	m.backends[id] = b
	m.mu.Unlock()
}

// cacheFirst keeps the backend another caller opened meanwhile, if any.
func (m *Manager) cacheFirst(id string, b blobstore.Backend) blobstore.Backend {
	m.mu.Lock()
	defer m.mu.Unlock()
	if have := m.backends[id]; have != nil {
		return have
	}
	m.backends[id] = b
	return b
}
