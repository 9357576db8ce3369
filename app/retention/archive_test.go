package retention_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"backstop/app"
	"backstop/app/archive"
)

// fakePurger is the archive's purge.
type fakePurger struct {
	mu      sync.Mutex
	tenants []string
	err     error
}

func (f *fakePurger) Purge(_ context.Context, tenantID string) (archive.PurgeSummary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tenants = append(f.tenants, tenantID)
	return archive.PurgeSummary{Examined: 5, Purged: 3, Held: 2, BytesPurged: 300}, f.err
}

func TestRetentionJobPurgesTheArchive(t *testing.T) {
	p := &fakePurger{}
	a := newAppliance(t, applianceOptions{archive: p})
	j := a.runRetention(t)
	if j.State != app.JobSucceeded {
		t.Fatalf("job %s", j.State)
	}
	if len(p.tenants) != 1 || p.tenants[0] != a.tenant {
		t.Fatalf("purged %v", p.tenants)
	}
	if s := a.summary(t, j.ID); s.Archive.Skipped || s.Archive.Purged != 3 || s.Archive.Held != 2 || s.Archive.Failed != 0 {
		t.Errorf("summary %+v", s.Archive)
	}
}

func TestRetentionJobArchiveFailureIsAFailedItem(t *testing.T) {
	p := &fakePurger{err: errors.New("disk on fire")}
	a := newAppliance(t, applianceOptions{archive: p})
	j := a.runRetention(t)
	if j.State != app.JobPartial && j.State != app.JobFailed {
		t.Fatalf("job %s", j.State)
	}
	items := a.failedItems(t, j.ID)
	if len(items) != 1 || items[0].Failure.Code != "retention.archive_failed" {
		t.Fatalf("failed items %+v", items)
	}
}

func TestRetentionJobWithoutArchiveSkipsIt(t *testing.T) {
	a := newAppliance(t, applianceOptions{})
	j := a.runRetention(t)
	if s := a.summary(t, j.ID); !s.Archive.Skipped {
		t.Errorf("summary %+v", s.Archive)
	}
}
