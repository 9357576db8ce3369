package store

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"backstop/app"
)

// TestAuditGroupCommit writes from hundreds of goroutines at once: every call
// returns only after its row is committed, with its own id, and nothing is
// lost or duplicated.
func TestAuditGroupCommit(t *testing.T) {
	db, clock := openTestDB(t)
	ctx := context.Background()
	const writers, each = 250, 2
	var wg sync.WaitGroup
	ids := make(chan int64, writers*each)
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				e := &app.AuditEntry{ActorType: app.ActorKey, ActorID: fmt.Sprintf("key_%d", w), ActorName: "k",
					TenantID: fmt.Sprintf("tn_%d", w%3), Action: "endpoints.list", Target: "/api/v1/endpoints",
					Status: 200, IP: "127.0.0.1", UserAgent: "test", RequestID: fmt.Sprintf("req_%d_%d", w, i)}
				if err := db.WriteAudit(ctx, e); err != nil {
					errs <- err
					return
				}
				if e.ID <= 0 {
					errs <- fmt.Errorf("row %s got no id", e.RequestID)
					return
				}
				// Committed means visible to a fresh reader right away.
				got, err := db.AuditEntries(ctx, app.AuditFilter{BeforeID: e.ID + 1, Limit: 1})
				if err != nil || len(got) != 1 || got[0].RequestID != e.RequestID {
					errs <- fmt.Errorf("row %d not readable after WriteAudit returned: %v, %v", e.ID, got, err)
					return
				}
				ids <- e.ID
			}
		}()
	}
	wg.Wait()
	close(ids)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for id := range ids {
		if seen[id] {
			t.Fatalf("id %d given to two rows", id)
		}
		seen[id] = true
	}
	if len(seen) != writers*each {
		t.Fatalf("%d rows acknowledged, want %d", len(seen), writers*each)
	}
	var n int
	db.read.QueryRowContext(ctx, "SELECT count(*) FROM audit_log").Scan(&n)
	if n != writers*each {
		t.Fatalf("%d rows stored, want %d", n, writers*each)
	}
	// The default time is the store's clock.
	rows, _ := db.AuditEntries(ctx, app.AuditFilter{Limit: 1})
	if !rows[0].At.Equal(clock.t) {
		t.Errorf("at = %v, want %v", rows[0].At, clock.t)
	}
}

func TestAuditEntriesFilters(t *testing.T) {
	db, clock := openTestDB(t)
	ctx := context.Background()
	for i := range 10 {
		e := &app.AuditEntry{At: app.At(clock.t.Add(time.Duration(i) * time.Minute)), ActorType: app.ActorUser,
			ActorID: fmt.Sprintf("usr_%d", i%2), ActorName: "a@example.com", TenantID: fmt.Sprintf("tn_%d", i%2),
			Action: "status.get", Target: "/api/v1/status", Status: 200, IP: "::1", RequestID: fmt.Sprint(i)}
		if err := db.WriteAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	all, _ := db.AuditEntries(ctx, app.AuditFilter{})
	if len(all) != 10 || all[0].RequestID != "9" || all[9].RequestID != "0" {
		t.Fatalf("newest first: got %d rows, first %q", len(all), all[0].RequestID)
	}
	since := clock.t.Add(5 * time.Minute)
	until := clock.t.Add(8 * time.Minute)
	for _, tt := range []struct {
		name string
		f    app.AuditFilter
		want []string
	}{
		{"tenant", app.AuditFilter{TenantID: "tn_1"}, []string{"9", "7", "5", "3", "1"}},
		{"actor", app.AuditFilter{ActorID: "usr_0", Limit: 2}, []string{"8", "6"}},
		{"since and until", app.AuditFilter{Since: &since, Until: &until}, []string{"7", "6", "5"}},
		{"cursor", app.AuditFilter{BeforeID: all[7].ID}, []string{"1", "0"}},
		{"limit", app.AuditFilter{Limit: 3}, []string{"9", "8", "7"}},
	} {
		rows, err := db.AuditEntries(ctx, tt.f)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range rows {
			got = append(got, r.RequestID)
		}
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
	r := all[0]
	if r.ActorType != app.ActorUser || r.ActorName != "a@example.com" || r.Target != "/api/v1/status" || r.Status != 200 || r.IP != "::1" {
		t.Errorf("row = %+v", r)
	}
}

// TestAuditAfterCloseFails: a write after Close must fail, not hang.
func TestAuditAfterClose(t *testing.T) {
	db, err := Open(context.Background(), t.TempDir()+"/b.db")
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	done := make(chan error, 1)
	go func() { done <- db.WriteAudit(context.Background(), &app.AuditEntry{Action: "x"}) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("WriteAudit after Close reported success")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WriteAudit after Close hangs")
	}
}
