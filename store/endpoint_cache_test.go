package store

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"backstop/app"
)

// directEndpoints reads the table without the cache: the answer the cache
// must always equal.
func directEndpoints(t *testing.T, db *DB, f app.EndpointFilter) []*app.Endpoint {
	t.Helper()
	rows, err := db.read.QueryContext(context.Background(), `SELECT `+endpointColumns+` FROM endpoints
		WHERE (? = '' OR tenant_id = ?) AND (? = '' OR profile = ?) ORDER BY id`, f.TenantID, f.TenantID, f.Profile, f.Profile)
	if err != nil {
		t.Fatal(err)
	}
	out, err := scanEndpoints(rows)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkEndpointsExact compares the cached listing with a direct read for
// every filter.
func checkEndpointsExact(t *testing.T, db *DB, tenants []string, step string) {
	t.Helper()
	for _, tenant := range append([]string{""}, tenants...) {
		for _, profile := range []string{"", app.ProfileServer, app.ProfileClient} {
			f := app.EndpointFilter{TenantID: tenant, Profile: profile}
			got, err := db.Endpoints(context.Background(), f)
			if err != nil {
				t.Fatal(err)
			}
			want := directEndpoints(t, db, f)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: Endpoints(%+v) differs from the table: %d cached rows, %d in the table", step, f, len(got), len(want))
			}
			now, rules := db.Now(), app.DefaultEndpointRules()
			views, err := db.EndpointViews(context.Background(), f, now, rules)
			if err != nil {
				t.Fatal(err)
			}
			wantViews := make([]app.EndpointView, len(want))
			for i, e := range want {
				wantViews[i] = e.View(now, rules)
			}
			if !reflect.DeepEqual(views, wantViews) {
				t.Fatalf("%s: EndpointViews(%+v) differs from the views of the table's rows", step, f)
			}
		}
	}
}

// openSecondHandle opens the same file through a separate database/sql
// handle: its own SQLite connections, locks and page cache, as another
// process (the admin CLI, sqlite3) would have.
func openSecondHandle(t *testing.T, db *DB) *sql.DB {
	t.Helper()
	other, err := sql.Open("sqlite", "file:"+db.Path+"?_pragma=busy_timeout(10000)&_pragma=foreign_keys(ON)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	return other
}

func mustExec(t *testing.T, h interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, q string, args ...any) {
	t.Helper()
	if _, err := h.ExecContext(context.Background(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func TestEndpointCacheStaysExact(t *testing.T) {
	db, clock := openTestDB(t)
	ctx := context.Background()
	a, b := mustTenant(t, db, "A"), mustTenant(t, db, "B")
	tenants := []string{a.ID, b.ID}
	checkEndpointsExact(t, db, tenants, "empty")

	var ids []string
	for i := range 30 {
		e := &app.Endpoint{TenantID: tenants[i%2], Hostname: fmt.Sprintf("h%02d", i), Profile: app.ProfileServer,
			Schedule: app.DefaultEndpointSchedule, Paths: []string{"/etc", "/srv"}}
		if i%3 == 0 {
			e.Profile = app.ProfileClient
		}
		if err := db.CreateEndpoint(ctx, e); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.ID)
	}
	checkEndpointsExact(t, db, tenants, "after creating through the store")

	// Updates through the store, including the narrow UPDATEs of runs and
	// verify results.
	clock.t = clock.t.Add(time.Minute)
	for _, id := range ids[:10] {
		if _, err := db.UpdateEndpoint(ctx, id, func(e *app.Endpoint) error {
			e.LastSeenAt, e.AgentVersion = app.Ptr(clock.t), "1.2.3"
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	checkEndpointsExact(t, db, tenants, "after heartbeats")

	// Another process writes: insert, update, re-key and delete.
	other := openSecondHandle(t, db)
	mustExec(t, other, `INSERT INTO endpoints (id, tenant_id, hostname, profile, created_at) VALUES ('ep_0000raw', ?, 'raw', 'client', 1)`, a.ID)
	mustExec(t, other, `UPDATE endpoints SET display_name = 'renamed elsewhere', repository_damaged = 1 WHERE id = ?`, ids[11])
	mustExec(t, other, `DELETE FROM endpoints WHERE id = ?`, ids[12])
	checkEndpointsExact(t, db, tenants, "after writes from another handle")
	mustExec(t, other, `UPDATE endpoints SET id = 'ep_zzzzrekeyed' WHERE id = ?`, ids[13])
	mustExec(t, other, `UPDATE endpoints SET profile = 'server' WHERE tenant_id = ?`, b.ID)
	checkEndpointsExact(t, db, tenants, "after a re-key and a bulk update from another handle")
	mustExec(t, other, `DELETE FROM endpoints WHERE tenant_id = ?`, b.ID)
	checkEndpointsExact(t, db, tenants, "after deleting a tenant's endpoints")

	// A row inserted and deleted between two listings.
	mustExec(t, other, `INSERT INTO endpoints (id, tenant_id, hostname, profile, created_at) VALUES ('ep_0000brief', ?, 'brief', 'client', 1)`, a.ID)
	mustExec(t, other, `DELETE FROM endpoints WHERE id = 'ep_0000brief'`)
	checkEndpointsExact(t, db, tenants, "after a short-lived row")

	// More changes than a refresh applies one by one: a full reload.
	tx, err := other.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range endpointReloadAt + 10 {
		mustExec(t, tx, `UPDATE endpoints SET agent_version = ? WHERE id = ?`, fmt.Sprint(i), ids[i%10])
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	checkEndpointsExact(t, db, tenants, "after many changes")
}

func TestEndpointCacheAfterPruning(t *testing.T) {
	db, _ := openTestDB(t)
	ctx := context.Background()
	a := mustTenant(t, db, "A")
	var ids []string
	for i := range 5 {
		e := &app.Endpoint{TenantID: a.ID, Hostname: fmt.Sprint("h", i), Profile: app.ProfileServer}
		if err := db.CreateEndpoint(ctx, e); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.ID)
	}
	count := func() (n int) {
		if err := db.read.QueryRow(`SELECT count(*) FROM endpoint_changes`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if count() != 5 {
		t.Fatalf("%d change rows after 5 inserts", count())
	}
	// Nothing cached: the whole log goes.
	if n, err := db.pruneEndpointChanges(ctx); err != nil || n != 5 {
		t.Fatalf("pruned %d (%v), want 5", n, err)
	}
	checkEndpointsExact(t, db, []string{a.ID}, "first listing after pruning")

	// Cached: only consumed rows go; unconsumed ones stay for the refresh.
	mustExec(t, db.write, `UPDATE endpoints SET hostname = 'x' WHERE id = ?`, ids[0])
	checkEndpointsExact(t, db, []string{a.ID}, "consumed")
	mustExec(t, db.write, `UPDATE endpoints SET hostname = 'y' WHERE id = ?`, ids[1])
	if n, err := db.pruneEndpointChanges(ctx); err != nil || n != 1 || count() != 1 {
		t.Fatalf("pruned %d (%v), %d left; want 1 pruned, 1 left", n, err, count())
	}
	checkEndpointsExact(t, db, []string{a.ID}, "after pruning consumed rows")

	// Another reader pruned rows this cache had not consumed: it notices
	// the gap and reloads.
	mustExec(t, db.write, `UPDATE endpoints SET hostname = 'z' WHERE id = ?`, ids[2])
	mustExec(t, db.write, `UPDATE endpoints SET hostname = 'w' WHERE id = ?`, ids[3])
	mustExec(t, db.write, `DELETE FROM endpoint_changes WHERE seq < (SELECT max(seq) FROM endpoint_changes)`)
	checkEndpointsExact(t, db, []string{a.ID}, "after a gap in the log")
	mustExec(t, db.write, `UPDATE endpoints SET hostname = 'v' WHERE id = ?`, ids[4])
	mustExec(t, db.write, `DELETE FROM endpoint_changes`)
	checkEndpointsExact(t, db, []string{a.ID}, "after the log was emptied")
}

// Without the triggers (a migration rebuilt the table and forgot them)
// nothing is cached, and listings stay exact.
func TestEndpointChangeTriggersInstalled(t *testing.T) {
	db, _ := openTestDB(t)
	ctx := context.Background()
	var n int
	if err := db.read.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'endpoints'
		AND name IN (?, ?, ?)`, endpointChangeTriggers[0], endpointChangeTriggers[1], endpointChangeTriggers[2]).Scan(&n); err != nil || n != 3 {
		t.Fatalf("%d of 3 change-log triggers on endpoints after the migrations (%v)", n, err)
	}
	a := mustTenant(t, db, "A")
	e := &app.Endpoint{TenantID: a.ID, Hostname: "h", Profile: app.ProfileServer}
	if err := db.CreateEndpoint(ctx, e); err != nil {
		t.Fatal(err)
	}
	checkEndpointsExact(t, db, nil, "with triggers")
	if db.endpointCache.snap.Load() == nil {
		t.Fatal("nothing cached with the triggers installed")
	}
	mustExec(t, db.write, `DROP TRIGGER endpoints_log_update`)
	checkEndpointsExact(t, db, nil, "after dropping a trigger") // schema_version changed: reload
	if db.endpointCache.snap.Load() != nil {
		t.Fatal("cached without the change-log triggers")
	}
	mustExec(t, db.write, `UPDATE endpoints SET hostname = 'unlogged'`)
	checkEndpointsExact(t, db, nil, "after an unlogged update")
}

// The caller owns what Endpoints returns.
func TestEndpointsReturnsCopies(t *testing.T) {
	db, clock := openTestDB(t)
	ctx := context.Background()
	a := mustTenant(t, db, "A")
	e := &app.Endpoint{TenantID: a.ID, Hostname: "h", Profile: app.ProfileServer, Paths: []string{"/a", "/b"},
		LastSeenAt: app.Ptr(clock.t)}
	if err := db.CreateEndpoint(ctx, e); err != nil {
		t.Fatal(err)
	}
	got, err := db.Endpoints(ctx, app.EndpointFilter{})
	if err != nil || len(got) != 1 {
		t.Fatal(got, err)
	}
	got[0].Hostname, got[0].Paths[0] = "mutated", "/mutated"
	*got[0].LastSeenAt = time.Time{}
	got[0].Paths = append(got[0].Paths, "/c")
	checkEndpointsExact(t, db, nil, "after the caller modified its copy")
}

// Heartbeats keep arriving while endpoints are listed: no listing may show
// a row older than a write committed before the listing started.
func TestEndpointCacheNeverStaleUnderConcurrentWrites(t *testing.T) {
	db, _ := openTestDB(t)
	ctx := context.Background()
	a := mustTenant(t, db, "A")
	const endpoints = 50
	ids := make([]string, endpoints)
	for i := range ids {
		e := &app.Endpoint{TenantID: a.ID, Hostname: fmt.Sprint("h", i), Profile: app.ProfileServer, AgentVersion: "0"}
		if err := db.CreateEndpoint(ctx, e); err != nil {
			t.Fatal(err)
		}
		ids[i] = e.ID
	}
	other := openSecondHandle(t, db)
	// committed[i] is the highest version of endpoint i known committed.
	committed := make([]atomic.Int64, endpoints)
	stop := make(chan struct{})
	var writers sync.WaitGroup
	for w := range 4 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for v := int64(1); ; v++ {
				select {
				case <-stop:
					return
				default:
				}
				i := (int(v)*7 + w) % endpoints
				if w%2 == 0 { // through the store, like a heartbeat
					if _, err := db.UpdateEndpoint(ctx, ids[i], func(e *app.Endpoint) error {
						e.AgentVersion = fmt.Sprint(atoiOrZero(e.AgentVersion) + 1)
						return nil
					}); err != nil {
						t.Error(err)
						return
					}
				} else if _, err := other.ExecContext(ctx, `UPDATE endpoints SET agent_version =
					CAST(CAST(agent_version AS INTEGER) + 1 AS TEXT) WHERE id = ?`, ids[i]); err != nil {
					t.Error(err)
					return
				}
				var now string
				if err := other.QueryRowContext(ctx, `SELECT agent_version FROM endpoints WHERE id = ?`, ids[i]).Scan(&now); err != nil {
					t.Error(err)
					return
				}
				for n := int64(atoiOrZero(now)); ; {
					cur := committed[i].Load()
					if n <= cur || committed[i].CompareAndSwap(cur, n) {
						break
					}
				}
			}
		}()
	}
	deadline := time.Now().Add(700 * time.Millisecond)
	listings := 0
	for time.Now().Before(deadline) {
		floor := make([]int64, endpoints)
		for i := range floor {
			floor[i] = committed[i].Load()
		}
		got, err := db.Endpoints(ctx, app.EndpointFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != endpoints {
			t.Fatalf("%d endpoints listed, want %d", len(got), endpoints)
		}
		for i, e := range got {
			if e.ID != ids[i] {
				t.Fatalf("listing out of order at %d", i)
			}
			if v := int64(atoiOrZero(e.AgentVersion)); v < floor[i] {
				t.Fatalf("stale listing: endpoint %d at version %d, %d was committed before the listing", i, v, floor[i])
			}
		}
		listings++
	}
	close(stop)
	writers.Wait()
	checkEndpointsExact(t, db, []string{a.ID}, "after the writers stopped")
	if listings < 10 {
		t.Fatalf("only %d listings ran", listings)
	}
}

func atoiOrZero(s string) int64 {
	var n int64
	fmt.Sscan(s, &n)
	return n
}
