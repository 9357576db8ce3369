package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"backstop/app"
)

// A key revoked, re-scoped or deleted through another handle (the admin
// CLI is another process) is seen by the very next Key, cached or not.
func TestKeyCacheSeesEveryCommittedWrite(t *testing.T) {
	db, clock := openTestDB(t)
	ctx := context.Background()
	a := mustTenant(t, db, "A")
	k := &app.APIKey{ID: app.NewID(app.PrefixKey), TenantID: a.ID, Name: "rmm", Scopes: []app.Scope{app.ScopeStatusRead}, Fingerprint: "f"}
	if err := db.CreateKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	got, err := db.Key(ctx, k.ID)
	if err != nil || got.Name != "rmm" || db.keyCache.snap.Load() == nil {
		t.Fatalf("Key = %+v, %v; cached: %v", got, err, db.keyCache.snap.Load() != nil)
	}
	// The caller owns its copy.
	got.Scopes[0], got.Name = app.ScopeUsersWrite, "mutated"
	if again, _ := db.Key(ctx, k.ID); again.Scopes[0] != app.ScopeStatusRead || again.Name != "rmm" {
		t.Fatalf("a caller's change reached the cache: %+v", again)
	}

	other := openSecondHandle(t, db)
	mustExec(t, other, `UPDATE api_keys SET revoked_at = ? WHERE id = ?`, clock.t.UnixMilli(), k.ID)
	if got, err := db.Key(ctx, k.ID); err != nil || got.RevokedAt == nil {
		t.Fatalf("after a revocation through another handle: %+v, %v", got, err)
	}
	mustExec(t, other, `UPDATE api_keys SET scopes = '["jobs:read"]' WHERE id = ?`, k.ID)
	if got, _ := db.Key(ctx, k.ID); len(got.Scopes) != 1 || got.Scopes[0] != app.ScopeJobsRead {
		t.Fatalf("after a scope change: %+v", got)
	}
	mustExec(t, other, `DELETE FROM api_keys WHERE id = ?`, k.ID)
	_, err = db.Key(ctx, k.ID)
	wantCode(t, err, app.ENOTFOUND)

	// Without the version triggers nothing is cached, and reads stay exact.
	mustExec(t, db.write, `DROP TRIGGER api_keys_version_update`)
	k2 := &app.APIKey{ID: app.NewID(app.PrefixKey), TenantID: a.ID, Name: "psa", Scopes: []app.Scope{app.ScopeStatusRead}, Fingerprint: "g"}
	if err := db.CreateKey(ctx, k2); err != nil {
		t.Fatal(err)
	}
	if got, err := db.Key(ctx, k2.ID); err != nil || got.Name != "psa" {
		t.Fatalf("Key without triggers = %+v, %v", got, err)
	}
	if db.keyCache.snap.Load() != nil {
		t.Fatal("keys cached without the version triggers")
	}
	mustExec(t, other, `UPDATE api_keys SET name = 'unlogged' WHERE id = ?`, k2.ID)
	if got, _ := db.Key(ctx, k2.ID); got.Name != "unlogged" {
		t.Fatalf("after an unlogged update: %+v", got)
	}
}

// Endpoint(id) answers from the endpoint cache only while it is current:
// writes through another handle are seen at once, deletions are not found.
func TestEndpointSingleReadsStayExact(t *testing.T) {
	db, _ := openTestDB(t)
	ctx := context.Background()
	a := mustTenant(t, db, "A")
	e := &app.Endpoint{TenantID: a.ID, Hostname: "db1", Profile: app.ProfileServer, Paths: []string{"/srv"}}
	if err := db.CreateEndpoint(ctx, e); err != nil {
		t.Fatal(err)
	}
	if got, err := db.Endpoint(ctx, e.ID); err != nil || got.Hostname != "db1" {
		t.Fatal(got, err)
	}
	if db.endpointCache.snap.Load() == nil {
		t.Fatal("a single read did not load the endpoint cache")
	}
	got, _ := db.Endpoint(ctx, e.ID)
	got.Paths[0], got.Hostname = "/mutated", "mutated"
	if again, _ := db.Endpoint(ctx, e.ID); again.Paths[0] != "/srv" || again.Hostname != "db1" {
		t.Fatalf("a caller's change reached the cache: %+v", again)
	}
	other := openSecondHandle(t, db)
	mustExec(t, other, `UPDATE endpoints SET status = 'revoked' WHERE id = ?`, e.ID)
	if got, _ := db.Endpoint(ctx, e.ID); got.Status != app.EndpointRevoked {
		t.Fatalf("after a revocation through another handle: %+v", got.Status)
	}
	mustExec(t, other, `DELETE FROM endpoints WHERE id = ?`, e.ID)
	_, err := db.Endpoint(ctx, e.ID)
	wantCode(t, err, app.ENOTFOUND)
	_, err = db.Endpoint(ctx, "ep_missing")
	wantCode(t, err, app.ENOTFOUND)
}

// Under concurrent writers through both handles, no single read returns a
// key or endpoint older than a write committed before the read began, and
// concurrent readers share mark reads.
func TestSingleReadsNeverStaleUnderConcurrentWrites(t *testing.T) {
	db, _ := openTestDB(t)
	ctx := context.Background()
	a := mustTenant(t, db, "A")
	const n = 20
	keyIDs, epIDs := make([]string, n), make([]string, n)
	for i := range n {
		k := &app.APIKey{ID: app.NewID(app.PrefixKey), TenantID: a.ID, Name: "0", Scopes: []app.Scope{app.ScopeStatusRead}, Fingerprint: "f"}
		e := &app.Endpoint{TenantID: a.ID, Hostname: fmt.Sprint("h", i), Profile: app.ProfileServer, AgentVersion: "0"}
		if err := db.CreateKey(ctx, k); err != nil {
			t.Fatal(err)
		}
		if err := db.CreateEndpoint(ctx, e); err != nil {
			t.Fatal(err)
		}
		keyIDs[i], epIDs[i] = k.ID, e.ID
	}
	other := openSecondHandle(t, db)
	keyFloor, epFloor := make([]atomic.Int64, n), make([]atomic.Int64, n)
	raise := func(f *atomic.Int64, v int64) {
		for cur := f.Load(); v > cur && !f.CompareAndSwap(cur, v); cur = f.Load() {
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for v := 1; ; v++ {
				select {
				case <-stop:
					return
				default:
				}
				i := (v*7 + w) % n
				h := other
				if w == 0 {
					h = db.write
				}
				if _, err := h.ExecContext(ctx, `UPDATE api_keys SET name = CAST(CAST(name AS INTEGER) + 1 AS TEXT) WHERE id = ?`, keyIDs[i]); err != nil {
					t.Error(err)
					return
				}
				if _, err := h.ExecContext(ctx, `UPDATE endpoints SET agent_version = CAST(CAST(agent_version AS INTEGER) + 1 AS TEXT) WHERE id = ?`, epIDs[i]); err != nil {
					t.Error(err)
					return
				}
				var kv, ev string
				if err := other.QueryRowContext(ctx, `SELECT (SELECT name FROM api_keys WHERE id = ?), (SELECT agent_version FROM endpoints WHERE id = ?)`,
					keyIDs[i], epIDs[i]).Scan(&kv, &ev); err != nil {
					t.Error(err)
					return
				}
				raise(&keyFloor[i], atoiOrZero(kv))
				raise(&epFloor[i], atoiOrZero(ev))
			}
		}()
	}
	readsBefore := db.marks.reads.Load()
	var readers sync.WaitGroup
	var lookups atomic.Int64
	deadline := time.Now().Add(700 * time.Millisecond)
	for r := range 8 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for j := r; time.Now().Before(deadline); j++ {
				i := j % n
				kf, ef := keyFloor[i].Load(), epFloor[i].Load()
				k, err := db.Key(ctx, keyIDs[i])
				if err != nil {
					t.Error(err)
					return
				}
				e, err := db.Endpoint(ctx, epIDs[i])
				if err != nil {
					t.Error(err)
					return
				}
				if atoiOrZero(k.Name) < kf || atoiOrZero(e.AgentVersion) < ef {
					t.Errorf("stale read: key %d at %s (%d committed before), endpoint at %s (%d committed before)", i, k.Name, kf, e.AgentVersion, ef)
					return
				}
				lookups.Add(2)
			}
		}()
	}
	readers.Wait()
	close(stop)
	wg.Wait()
	reads := db.marks.reads.Load() - readsBefore
	t.Logf("%d lookups, %d mark reads", lookups.Load(), reads)
	if lookups.Load() < 100 {
		t.Fatalf("only %d lookups ran", lookups.Load())
	}
	if reads >= lookups.Load() {
		t.Errorf("%d mark reads for %d lookups: concurrent readers did not share them", reads, lookups.Load())
	}
}
