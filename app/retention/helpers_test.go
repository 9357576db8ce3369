package retention_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"backstop/agentapi"
	"backstop/app"
	"backstop/app/jobs"
	"backstop/app/resticcmd"
	"backstop/app/retention"
	"backstop/store"
	"backstop/store/storetest"
)

// appliance is the retention side of a real appliance: a real SQLite
// database, the real job runner with the retention kind, and endpoint
// repositories where the appliance keeps them (agentapi.RepositoryDir).
type appliance struct {
	db      *store.DB
	dataDir string
	runner  *jobs.Runner
	tenant  string
	blobs   *fakeBlobStore // nil: not wired
}

type applianceOptions struct {
	restic    string
	blobs     *fakeBlobStore
	lockRetry time.Duration
	now       app.Clock
	pruned    func(string)
	archive   retention.ArchivePurger
	leases    *resticcmd.Leases
}

func newAppliance(t *testing.T, o applianceOptions) *appliance {
	t.Helper()
	a := &appliance{dataDir: t.TempDir(), blobs: o.blobs}
	a.db = storetest.Open(t, a.dataDir)
	a.tenant = storetest.Tenant(t, a.db, "Acme")
	cfg := retention.Config{Restic: o.restic, TempDir: filepath.Join(a.dataDir, "tmp"), Locate: a.locate,
		Tenants: a.db, Endpoints: a.db, Policies: a.db, Leases: o.leases, LockRetryWait: o.lockRetry, Now: o.now,
		Pruned: o.pruned, Archive: o.archive, Logger: slog.New(slog.DiscardHandler)}
	if o.blobs != nil {
		cfg.Snapshots = o.blobs
	}
	r := retention.New(cfg)
	a.runner = jobs.New(jobs.Config{Store: a.db, Schedules: a.db, Logger: slog.New(slog.DiscardHandler)})
	a.runner.Register(r.Kind())
	if err := a.runner.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.runner.Close() })
	return a
}

// locate is the appliance's layout (CONTRACT §1).
func (a *appliance) locate(id string) (string, string) {
	return agentapi.RepositoryDir(a.dataDir, id), agentapi.RepositoryPasswordFile(a.dataDir, id)
}

// runRetention submits the tenant's retention job and waits for its end.
func (a *appliance) runRetention(t *testing.T) *app.Job {
	t.Helper()
	return a.waitJob(t, a.submitRetention(t))
}

// submitRetention queues the tenant's retention job.
func (a *appliance) submitRetention(t *testing.T) *app.Job {
	t.Helper()
	ctx := context.Background()
	j, err := a.runner.Submit(ctx, app.JobRequest{TenantID: a.tenant, Action: app.ActionRetention, TargetType: app.TargetTenant,
		TargetID: a.tenant, Trigger: app.TriggerWeb})
	if err != nil {
		t.Fatal(err)
	}
	if j.Queue != app.QueueRetention || j.Target.Type != app.TargetTenant || j.Target.DisplayName != "Acme" {
		t.Fatalf("queued job %+v", j)
	}
	return j
}

// waitJob waits for the job's end.
func (a *appliance) waitJob(t *testing.T, j *app.Job) *app.Job {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		got, err := a.db.Job(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if app.JobTerminal(got.State) {
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("retention job %s did not finish", j.ID)
	return nil
}

// summary returns data.retention of the job's job.completed event.
func (a *appliance) summary(t *testing.T, jobID string) retention.Summary {
	t.Helper()
	evs, err := a.db.UndispatchedEvents(context.Background(), 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		var env struct {
			Type string `json:"type"`
			Data struct {
				Job       struct{ ID string }
				Retention *retention.Summary `json:"retention"`
			} `json:"data"`
		}
		if err := json.Unmarshal(e.Body, &env); err != nil {
			t.Fatal(err)
		}
		if env.Type == app.EventJobCompleted && env.Data.Job.ID == jobID && env.Data.Retention != nil {
			return *env.Data.Retention
		}
	}
	t.Fatalf("no job.completed event with data.retention for %s", jobID)
	return retention.Summary{}
}

// failedItems returns the job's failed items.
func (a *appliance) failedItems(t *testing.T, jobID string) []*app.JobItem {
	t.Helper()
	items, err := a.db.JobItems(context.Background(), jobID, 100)
	if err != nil {
		t.Fatal(err)
	}
	return items
}

// fakeBlobStore is an in-memory blob store catalogue.
type fakeBlobStore struct {
	mu        sync.Mutex
	snaps     []*app.Snapshot // any order
	failFor   string          // ForgetSnapshots fails for snapshots of this object
	gcCalls   int
	freed     int64
	forgotten []string
}

func (f *fakeBlobStore) Snapshots(_ context.Context, flt app.SnapshotFilter) ([]*app.Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var list []*app.Snapshot
	for _, s := range f.snaps {
		if (flt.TenantID == "" || s.TenantID == flt.TenantID) && (flt.ProtectedObjectID == "" || s.ProtectedObjectID == flt.ProtectedObjectID) {
			list = append(list, s)
		}
	}
	slices.SortFunc(list, func(a, b *app.Snapshot) int {
		if c := b.At.Compare(a.At.Time); c != 0 {
			return c
		}
		return -cmpString(a.ID, b.ID)
	})
	if flt.Before != "" {
		i := slices.IndexFunc(list, func(s *app.Snapshot) bool { return s.ID == flt.Before })
		list = list[i+1:]
	}
	if flt.Limit > 0 && len(list) > flt.Limit {
		list = list[:flt.Limit]
	}
	return list, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (f *fakeBlobStore) ForgetSnapshots(_ context.Context, tenantID string, ids []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.snaps {
		if slices.Contains(ids, s.ID) && (s.ProtectedObjectID == f.failFor || s.TenantID != tenantID) {
			return errors.New("storage target unreachable")
		}
	}
	f.snaps = slices.DeleteFunc(f.snaps, func(s *app.Snapshot) bool { return slices.Contains(ids, s.ID) })
	f.forgotten = append(f.forgotten, ids...)
	return nil
}

func (f *fakeBlobStore) CollectGarbage(_ context.Context, tenantID string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gcCalls++
	return f.freed, nil
}

func (f *fakeBlobStore) ids(object string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, s := range f.snaps {
		if s.ProtectedObjectID == object {
			out = append(out, s.ID)
		}
	}
	slices.Sort(out)
	return out
}
