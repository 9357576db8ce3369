package targets_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/blobstore"
	"backstop/app/targets"
	"backstop/app/webhooks"
	"backstop/store"
	"backstop/store/storetest"
)

// fakeBackend is a real local backend whose free space and write errors a
// test sets.
type fakeBackend struct {
	blobstore.Backend
	mu        sync.Mutex
	space     *blobstore.Space
	createErr error
}

func (f *fakeBackend) set(space *blobstore.Space, createErr error) {
	f.mu.Lock()
	f.space, f.createErr = space, createErr
	f.mu.Unlock()
}

func (f *fakeBackend) Create(ctx context.Context, name string, r io.Reader, size int64) error {
	f.mu.Lock()
	err := f.createErr
	f.mu.Unlock()
	if err != nil {
		return err
	}
	return f.Backend.Create(ctx, name, r, size)
}

func (f *fakeBackend) Space(ctx context.Context) (blobstore.Space, error) {
	f.mu.Lock()
	sp := f.space
	f.mu.Unlock()
	if sp != nil {
		return *sp, nil
	}
	return f.Backend.Space(ctx)
}

// fixture is a Manager over a real store, whose local and S3 backends are
// fakeBackends kept by directory (local) or secret (S3).
type fixture struct {
	t       *testing.T
	db      *store.DB
	dataDir string
	m       *targets.Manager
	box     *webhooks.SecretBox
	mu      sync.Mutex
	opened  map[string]*fakeBackend
	s3Err   error // what OpenS3 fails with, if set
	s3Seen  []app.S3Settings
	tenantA string
	tenantB string
}

func newFixture(t *testing.T, interval time.Duration) *fixture {
	f := &fixture{t: t, dataDir: t.TempDir(), opened: map[string]*fakeBackend{}}
	f.db = storetest.Open(t, f.dataDir)
	f.tenantA, f.tenantB = storetest.Tenant(t, f.db, "Acme"), storetest.Tenant(t, f.db, "Beta")
	box, err := webhooks.OpenSecretBox(f.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	f.box = box
	f.m = targets.New(targets.Config{Store: f.db, Box: box, DataDir: f.dataDir, MinFreeBytes: 1 << 30,
		Interval: interval, CheckTimeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler),
		OpenLocal: func(dir string) (blobstore.Backend, error) { return f.open(dir) },
		OpenS3: func(ctx context.Context, s app.S3Settings) (blobstore.Backend, error) {
			f.mu.Lock()
			f.s3Seen = append(f.s3Seen, s)
			err := f.s3Err
			f.mu.Unlock()
			if err != nil {
				return nil, err
			}
			// An S3 target is a local directory per bucket, with no
			// known free space.
			b, err := f.open(filepath.Join(f.dataDir, "s3", s.Bucket))
			if err == nil {
				b.mu.Lock()
				if b.space == nil {
					b.space = &blobstore.Space{}
				}
				b.mu.Unlock()
			}
			return b, err
		},
	})
	t.Cleanup(func() { f.m.Close() })
	return f
}

func (f *fixture) open(dir string) (*fakeBackend, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b := f.opened[dir]; b != nil {
		return b, nil
	}
	l, err := blobstore.NewLocal(dir)
	if err != nil {
		return nil, err
	}
	f.opened[dir] = &fakeBackend{Backend: l}
	return f.opened[dir], nil
}

func (f *fixture) backend(dir string) *fakeBackend {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.opened[dir]
}

func (f *fixture) target(id string) *app.StorageTarget {
	f.t.Helper()
	t, err := f.db.StorageTarget(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	return t
}

func (f *fixture) all() []*app.StorageTarget {
	f.t.Helper()
	ts, err := f.m.Targets(context.Background(), app.StorageTargetFilter{})
	if err != nil {
		f.t.Fatal(err)
	}
	return ts
}

func (f *fixture) defaultTarget() *app.StorageTarget {
	for _, t := range f.all() {
		if t.Default {
			return t
		}
	}
	f.t.Fatal("no default target")
	return nil
}

var plenty = &blobstore.Space{Known: true, CapacityBytes: 100 << 30, FreeBytes: 50 << 30}

func s3Spec(name, bucket, secret string) app.StorageTargetSpec {
	return app.StorageTargetSpec{Name: name, Kind: app.StorageKindS3, S3: app.S3Settings{Endpoint: "s3.example.com",
		Region: "eu-central-1", Bucket: bucket, AccessKeyID: "AKIAEXAMPLE", SecretAccessKey: secret, TLS: true}}
}

func TestDefaultTargetCreatedOnce(t *testing.T) {
	f := newFixture(t, time.Hour)
	ctx := context.Background()
	if err := f.m.Open(ctx); err != nil {
		t.Fatal(err)
	}
	ts := f.all()
	if len(ts) != 1 {
		t.Fatalf("%d targets on a fresh install, want 1", len(ts))
	}
	d := ts[0]
	if d.Name != "Local disk" || d.Kind != app.StorageKindLocal || d.Path != filepath.Join(f.dataDir, "blobs") || !d.Default ||
		d.State != app.StorageOK || d.CheckedAt == nil || d.FreeBytes == nil || d.CapacityBytes == nil {
		t.Errorf("default target %+v", d)
	}
	if err := f.m.Usable(ctx); err != nil {
		t.Errorf("Usable: %v", err)
	}
	f.m.Close()
	// A restart finds the target and makes no second one.
	again := targets.New(targets.Config{Store: f.db, Box: f.box, DataDir: f.dataDir, MinFreeBytes: 1, Logger: slog.New(slog.DiscardHandler)})
	if err := again.Open(ctx); err != nil {
		t.Fatal(err)
	}
	again.Close()
	if n := len(f.all()); n != 1 {
		t.Errorf("%d targets after a restart, want 1", n)
	}
}

func TestCreateChecksTheTarget(t *testing.T) {
	f := newFixture(t, time.Hour)
	ctx := context.Background()
	if err := f.m.EnsureDefault(ctx); err != nil {
		t.Fatal(err)
	}
	f.backend(filepath.Join(f.dataDir, "blobs")).set(plenty, nil)

	t.Run("local", func(t *testing.T) {
		dir := t.TempDir()
		got, err := f.m.Create(ctx, app.StorageTargetSpec{Name: " NAS ", Kind: app.StorageKindLocal, Path: dir + "/"})
		if err != nil {
			t.Fatal(err)
		}
		if got.Name != "NAS" || got.Path != dir || got.Default || got.State == "" || got.CheckedAt == nil {
			t.Errorf("created %+v", got)
		}
		_, err = f.m.Create(ctx, app.StorageTargetSpec{Name: "again", Kind: app.StorageKindLocal, Path: dir})
		if app.ErrorCode(err) != app.ECONFLICT {
			t.Errorf("second target on the same directory: %v", err)
		}
		_, err = f.m.Create(ctx, app.StorageTargetSpec{Name: "typo", Kind: app.StorageKindLocal, Path: dir + "/missing"})
		if app.ErrorCode(err) != app.EINVALID {
			t.Errorf("missing directory: %v", err)
		}
	})

	t.Run("s3 ok, secret sealed", func(t *testing.T) {
		const secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
		got, err := f.m.Create(ctx, s3Spec("Wasabi", "backups", secret))
		if err != nil {
			t.Fatal(err)
		}
		if got.Kind != "s3" || got.Bucket != "backups" || got.AccessKeyID != "AKIAEXAMPLE" || got.State != app.StorageOK ||
			got.FreeBytes != nil || got.CapacityBytes != nil || got.TLS == nil || !*got.TLS {
			t.Errorf("created %+v", got)
		}
		if strings.Contains(string(got.SealedSecret), secret) {
			t.Error("secret stored in the clear")
		}
		if plain, err := f.box.Open(got.ID, got.SealedSecret); err != nil || plain != secret {
			t.Errorf("sealed secret opens to %q, %v", plain, err)
		}
		wire, _ := json.Marshal(got)
		if strings.Contains(string(wire), secret) || strings.Contains(string(wire), "ecret") {
			t.Errorf("the target's JSON shows the secret: %s", wire)
		}
	})

	t.Run("refused with the reason, nothing stored", func(t *testing.T) {
		const secret = "s3cr3t-that-must-not-leak"
		before := len(f.all())
		for name, tc := range map[string]struct {
			openErr   error
			createErr error
			want      string
		}{
			"denied at open":  {openErr: fmt.Errorf("bucket nope: %w", blobstore.ErrDenied), want: "refused the credentials"},
			"unreachable":     {openErr: fmt.Errorf("dial tcp s3.example.com:443: %w", blobstore.ErrUnreachable), want: "unreachable"},
			"denied on write": {createErr: fmt.Errorf("PUT probe (key %s): %w", secret, blobstore.ErrDenied), want: "write check failed"},
		} {
			t.Run(name, func(t *testing.T) {
				f.mu.Lock()
				f.s3Err = tc.openErr
				f.mu.Unlock()
				defer func() { f.mu.Lock(); f.s3Err = nil; f.mu.Unlock() }()
				bucket := "bucket-" + strings.ReplaceAll(name, " ", "-")
				if tc.createErr != nil {
					b, _ := f.open(filepath.Join(f.dataDir, "s3", bucket))
					b.set(&blobstore.Space{}, tc.createErr)
				}
				_, err := f.m.Create(ctx, s3Spec("bad", bucket, secret))
				if app.ErrorCode(err) != app.ESTORAGEUNUSABLE {
					t.Fatalf("err %v, want %s", err, app.ESTORAGEUNUSABLE)
				}
				msg := app.ErrorMessage(err)
				if !strings.Contains(msg, tc.want) || strings.Contains(msg, secret) {
					t.Errorf("message %q: want it to contain %q and never the secret", msg, tc.want)
				}
			})
		}
		if after := len(f.all()); after != before {
			t.Errorf("%d targets stored by refused creates", after-before)
		}
	})

	t.Run("no S3 backend", func(t *testing.T) {
		m := targets.New(targets.Config{Store: f.db, Box: f.box, DataDir: f.dataDir, Logger: slog.New(slog.DiscardHandler)})
		_, err := m.Create(ctx, s3Spec("x", "other-bucket", "k"))
		if app.ErrorCode(err) != app.ESTORAGEUNUSABLE {
			t.Errorf("err %v", err)
		}
	})

	t.Run("validation", func(t *testing.T) {
		for name, spec := range map[string]app.StorageTargetSpec{
			"blank name":    {Name: " ", Kind: "local", Path: "/tmp"},
			"relative path": {Name: "x", Kind: "local", Path: "data"},
			"endpoint scheme": func() app.StorageTargetSpec {
				s := s3Spec("x", "bk1", "k")
				s.S3.Endpoint = "https://s3.example.com"
				return s
			}(),
			"bucket":    s3Spec("x", "B", "k"),
			"no secret": s3Spec("x", "bk2", ""),
			"tenant id": {Name: "x", Kind: "local", Path: "/tmp", TenantIDs: []string{"nope"}},
		} {
			if _, err := f.m.Create(ctx, spec); app.ErrorCode(err) != app.EINVALID {
				t.Errorf("%s: %v, want %s", name, err, app.EINVALID)
			}
		}
	})
}

func TestStateTransitions(t *testing.T) {
	f := newFixture(t, time.Hour)
	ctx := context.Background()
	if err := f.m.EnsureDefault(ctx); err != nil {
		t.Fatal(err)
	}
	id := f.defaultTarget().ID
	b := f.backend(filepath.Join(f.dataDir, "blobs"))

	step := func(space *blobstore.Space, createErr error, want, wantError string) {
		t.Helper()
		b.set(space, createErr)
		f.m.CheckTarget(ctx, id)
		got := f.target(id)
		if got.State != want {
			t.Fatalf("state %s, want %s (%v)", got.State, want, got.LastError)
		}
		if wantError == "" && got.LastError != nil {
			t.Errorf("lastError %q on an ok target", *got.LastError)
		}
		if wantError != "" && (got.LastError == nil || !strings.Contains(*got.LastError, wantError)) {
			t.Errorf("lastError %v, want it to contain %q", got.LastError, wantError)
		}
		if err := f.m.Usable(ctx); (err == nil) != (want == app.StorageOK) {
			t.Errorf("Usable = %v in state %s", err, want)
		}
	}
	step(plenty, nil, app.StorageOK, "")
	if got := f.target(id); *got.FreeBytes != 50<<30 || *got.CapacityBytes != 100<<30 || *got.UsedBytes != 50<<30 {
		t.Errorf("space %d/%d/%d", *got.CapacityBytes, *got.UsedBytes, *got.FreeBytes)
	}
	step(&blobstore.Space{Known: true, CapacityBytes: 100 << 30, FreeBytes: 100 << 20}, nil, app.StorageFull, "under storage.min_free_bytes")
	step(plenty, nil, app.StorageOK, "")
	step(plenty, fmt.Errorf("probe: %w (no space left on device)", blobstore.ErrFull), app.StorageFull, "full")
	step(plenty, fmt.Errorf("dial: %w", blobstore.ErrUnreachable), app.StorageUnreachable, "unreachable")
	step(plenty, fmt.Errorf("PUT: %w", blobstore.ErrDenied), app.StorageDegraded, "refused the credentials")
	step(plenty, errors.New("disk on fire"), app.StorageDegraded, "disk on fire")
	step(plenty, nil, app.StorageOK, "")
}

func TestWriteFailed(t *testing.T) {
	f := newFixture(t, time.Hour)
	ctx := context.Background()
	if err := f.m.EnsureDefault(ctx); err != nil {
		t.Fatal(err)
	}
	id := f.defaultTarget().ID
	b := f.backend(filepath.Join(f.dataDir, "blobs"))
	b.set(plenty, nil)

	// A write that met a full target makes it full at once, before any check.
	f.m.WriteFailed(id, fmt.Errorf("pack 1f2e on %s: %w", id, blobstore.ErrFull))
	if got := f.target(id); got.State != app.StorageFull || got.LastError == nil || !strings.Contains(*got.LastError, "full") {
		t.Fatalf("after an ErrFull write: %s %v", got.State, got.LastError)
	}

	// Once the monitor runs, its first check finds the target fine again.
	if err := f.m.Open(ctx); err != nil {
		t.Fatal(err)
	}
	waitState(t, f, id, app.StorageOK)

	// Any other failed write brings a re-check long before the hourly one.
	b.set(plenty, fmt.Errorf("dial: %w", blobstore.ErrUnreachable))
	f.m.WriteFailed(id, errors.New("connection reset"))
	waitState(t, f, id, app.StorageUnreachable)
	b.set(plenty, nil)
	f.m.WriteFailed(id, errors.New("one more"))
	waitState(t, f, id, app.StorageOK)
}

func waitState(t *testing.T, f *fixture, id, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := f.target(id)
		if got.State == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("state %s, want %s (%v)", got.State, want, got.LastError)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestDefaultAndPlacement(t *testing.T) {
	f := newFixture(t, time.Hour)
	ctx := context.Background()
	if err := f.m.EnsureDefault(ctx); err != nil {
		t.Fatal(err)
	}
	local := f.defaultTarget()
	s3, err := f.m.Create(ctx, func() app.StorageTargetSpec {
		s := s3Spec("Wasabi", "tenant-b", "k1")
		s.TenantIDs = []string{f.tenantB}
		return s
	}())
	if err != nil {
		t.Fatal(err)
	}

	t.Run("placement", func(t *testing.T) {
		id, b, err := f.m.ForTenant(ctx, f.tenantB)
		if err != nil || id != s3.ID || b == nil {
			t.Fatalf("tenant b on %s (%v)", id, err)
		}
		b2, err := f.m.Backend(ctx, s3.ID)
		if err != nil || b2 != b {
			t.Errorf("backend not reused: %p %p %v", b, b2, err)
		}
		id, _, err = f.m.ForTenant(ctx, f.tenantA)
		if err != nil || id != local.ID {
			t.Errorf("unplaced tenant a on %s (%v), want the default %s", id, err, local.ID)
		}
		// Moving tenant b back to the default applies to new data.
		got, err := f.m.Update(ctx, s3.ID, app.StorageTargetUpdate{TenantIDs: &[]string{}})
		if err != nil || len(got.TenantIDs) != 0 {
			t.Fatalf("%+v %v", got, err)
		}
		if id, _, _ := f.m.ForTenant(ctx, f.tenantB); id != local.ID {
			t.Errorf("tenant b on %s after the move, want %s", id, local.ID)
		}
		_, err = f.m.Update(ctx, s3.ID, app.StorageTargetUpdate{TenantIDs: &[]string{"tn_nope"}})
		if app.ErrorCode(err) != app.EINVALID {
			t.Errorf("unknown tenant: %v", err)
		}
	})

	t.Run("exactly one default", func(t *testing.T) {
		_, err := f.m.Update(ctx, local.ID, app.StorageTargetUpdate{Default: app.Ptr(false)})
		if app.ErrorCode(err) != app.EINVALID {
			t.Fatalf("unsetting the only default: %v", err)
		}
		got, err := f.m.Update(ctx, s3.ID, app.StorageTargetUpdate{Default: app.Ptr(true), Name: app.Ptr("Wasabi EU")})
		if err != nil || !got.Default || got.Name != "Wasabi EU" {
			t.Fatalf("%+v %v", got, err)
		}
		if f.target(local.ID).Default {
			t.Error("two defaults")
		}
		third, err := f.m.Create(ctx, app.StorageTargetSpec{Name: "NAS", Kind: "local", Path: t.TempDir(), Default: true})
		if err != nil || !third.Default {
			t.Fatalf("%+v %v", third, err)
		}
		n := 0
		for _, tt := range f.all() {
			if tt.Default {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d defaults", n)
		}
	})

	t.Run("new credentials are checked before they are saved", func(t *testing.T) {
		f.mu.Lock()
		f.s3Err = fmt.Errorf("InvalidAccessKeyId: %w", blobstore.ErrDenied)
		f.mu.Unlock()
		_, err := f.m.Update(ctx, s3.ID, app.StorageTargetUpdate{SecretAccessKey: app.Ptr("wrong")})
		if app.ErrorCode(err) != app.ESTORAGEUNUSABLE {
			t.Fatalf("bad credentials: %v", err)
		}
		if plain, _ := f.box.Open(s3.ID, f.target(s3.ID).SealedSecret); plain != "k1" {
			t.Errorf("secret changed to %q by a refused update", plain)
		}
		f.mu.Lock()
		f.s3Err = nil
		f.mu.Unlock()
		got, err := f.m.Update(ctx, s3.ID, app.StorageTargetUpdate{AccessKeyID: app.Ptr("AKIANEW"), SecretAccessKey: app.Ptr("k2")})
		if err != nil || got.AccessKeyID != "AKIANEW" {
			t.Fatalf("%+v %v", got, err)
		}
		if plain, _ := f.box.Open(s3.ID, f.target(s3.ID).SealedSecret); plain != "k2" {
			t.Errorf("secret %q after the update, want k2", plain)
		}
		f.mu.Lock()
		last := f.s3Seen[len(f.s3Seen)-1]
		f.mu.Unlock()
		if last.AccessKeyID != "AKIANEW" || last.SecretAccessKey != "k2" || last.Bucket != "tenant-b" || last.Endpoint != "s3.example.com" {
			t.Errorf("opened with %+v", last)
		}
		_, err = f.m.Update(ctx, local.ID, app.StorageTargetUpdate{SecretAccessKey: app.Ptr("x")})
		if app.ErrorCode(err) != app.EINVALID {
			t.Errorf("credentials on a local target: %v", err)
		}
	})
}
