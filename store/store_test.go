package store

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"backstop/app"
)

// testClock is a movable clock for store tests.
type testClock struct{ t time.Time }

func (c *testClock) now() time.Time { return c.t }

// openTestDB opens a real database file in a fresh temp dir, with the clock
// fixed at a known instant, and closes it when the test ends.
func openTestDB(t *testing.T) (*DB, *testClock) {
	t.Helper()
	db, err := Open(context.Background(), filepath.Join(t.TempDir(), "backstop.db"))
	if err != nil {
		t.Fatal(err)
	}
	clock := &testClock{t: time.Date(2026, 11, 21, 15, 8, 9, 123000000, time.UTC)}
	db.Now = clock.now
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return db, clock
}

func mustTenant(t *testing.T, db *DB, name string) *app.Tenant {
	t.Helper()
	tn := &app.Tenant{Name: name}
	if err := db.CreateTenant(context.Background(), tn); err != nil {
		t.Fatal(err)
	}
	return tn
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := app.ErrorCode(err); got != code {
		t.Fatalf("error %v has code %q, want %q", err, got, code)
	}
}

func TestOpenPragmasAndMigrations(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "backstop.db")
	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []*sql.DB{db.write, db.read} {
		var mode string
		var fk, sync int
		if err := h.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
			t.Errorf("journal_mode = %q, %v; want wal", mode, err)
		}
		if err := h.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk); err != nil || fk != 1 {
			t.Errorf("foreign_keys = %d, %v; want 1", fk, err)
		}
		if err := h.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil || sync != 1 {
			t.Errorf("synchronous = %d, %v; want 1 (NORMAL)", sync, err)
		}
	}
	// The reader pool is read-only.
	if _, err := db.read.ExecContext(ctx, "INSERT INTO tenants (id, name, created_at) VALUES ('tn_x', 'x', 0)"); err == nil {
		t.Error("reader pool accepted a write")
	}
	// Foreign keys are enforced and converted to a validation error.
	err = db.CreateKey(ctx, &app.APIKey{ID: "key_1", TenantID: "tn_missing", Name: "k", Scopes: []app.Scope{app.ScopeStatusRead}, Fingerprint: "f"})
	wantCode(t, err, app.EINVALID)

	versions := func(db *DB) (n int, names []string) {
		rows, err := db.read.QueryContext(ctx, "SELECT version, name FROM schema_migrations ORDER BY version")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var v int
			var name string
			rows.Scan(&v, &name)
			n++
			names = append(names, name)
		}
		return n, names
	}
	embedded, _ := migrationFS.ReadDir("migrations")
	n1, names := versions(db)
	if n1 != len(embedded) || n1 < 2 {
		t.Fatalf("%d migrations recorded (%v), %d embedded", n1, names, len(embedded))
	}
	tn := mustTenant(t, db, "Acme")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// Reopening applies nothing twice and keeps the data.
	db, err = Open(ctx, path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer db.Close()
	if n2, _ := versions(db); n2 != n1 {
		t.Errorf("after reopen %d migrations recorded, want %d", n2, n1)
	}
	if got, err := db.Tenant(ctx, tn.ID); err != nil || got.Name != "Acme" {
		t.Errorf("tenant after reopen: %v, %v", got, err)
	}
	if err := db.Ping(ctx); err != nil {
		t.Errorf("Ping: %v", err)
	}
	if err := db.Maintain(ctx); err != nil {
		t.Errorf("Maintain: %v", err)
	}
}

func TestOpenFailsOnUnwritablePath(t *testing.T) {
	if _, err := Open(context.Background(), filepath.Join(t.TempDir(), "missing", "dir", "backstop.db")); err == nil {
		t.Fatal("Open in a missing directory succeeded")
	}
}

func TestTenants(t *testing.T) {
	db, clock := openTestDB(t)
	ctx := context.Background()
	a := mustTenant(t, db, "Acme")
	b := mustTenant(t, db, "Beta")
	if !app.HasPrefix(a.ID, app.PrefixTenant) || !a.CreatedAt.Equal(clock.t) {
		t.Errorf("tenant %+v", a)
	}
	got, err := db.Tenant(ctx, b.ID)
	if err != nil || *got != *b {
		t.Errorf("Tenant = %+v, %v; want %+v", got, err, b)
	}
	_, err = db.Tenant(ctx, "tn_missing")
	wantCode(t, err, app.ENOTFOUND)
	all, err := db.Tenants(ctx, app.TenantFilter{})
	if err != nil || len(all) != 2 || all[0].ID != a.ID || all[1].ID != b.ID {
		t.Errorf("Tenants = %v, %v", all, err)
	}
	wantCode(t, db.CreateTenant(ctx, &app.Tenant{Name: ""}), app.EINVALID)
	wantCode(t, db.CreateTenant(ctx, &app.Tenant{ID: a.ID, Name: "dup"}), app.ECONFLICT)
}

func TestKeys(t *testing.T) {
	db, clock := openTestDB(t)
	ctx := context.Background()
	tn := mustTenant(t, db, "Acme")
	exp := app.At(clock.t.Add(30 * 24 * time.Hour))
	k := &app.APIKey{ID: app.NewID(app.PrefixKey), TenantID: tn.ID, Name: "PSA", Fingerprint: app.Fingerprint("v"),
		Scopes: []app.Scope{app.ScopeStatusRead, app.ScopeJobsRead}, ExpiresAt: &exp, CreatedBy: "usr_1"}
	if err := db.CreateKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	pk := &app.APIKey{ID: app.NewID(app.PrefixKey), Name: "Provider", Provider: true, Fingerprint: app.Fingerprint("p"),
		Scopes: []app.Scope{app.ScopeStatusRead}}
	if err := db.CreateKey(ctx, pk); err != nil {
		t.Fatal(err)
	}
	got, err := db.Key(ctx, k.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "PSA" || got.TenantID != tn.ID || len(got.Scopes) != 2 || got.ExpiresAt == nil || !got.ExpiresAt.Equal(exp.Time) ||
		got.RevokedAt != nil || got.LastUsedAt != nil || got.Fingerprint != k.Fingerprint || !got.CreatedAt.Equal(clock.t) {
		t.Errorf("Key = %+v", got)
	}
	_, err = db.Key(ctx, "key_missing")
	wantCode(t, err, app.ENOTFOUND)
	wantCode(t, db.CreateKey(ctx, k), app.ECONFLICT)

	all, _ := db.Keys(ctx, app.KeyFilter{})
	providerOnly, _ := db.Keys(ctx, app.KeyFilter{TenantID: app.Ptr("")})
	tenantOnly, _ := db.Keys(ctx, app.KeyFilter{TenantID: &tn.ID})
	if len(all) != 2 || len(providerOnly) != 1 || providerOnly[0].ID != pk.ID || len(tenantOnly) != 1 || tenantOnly[0].ID != k.ID {
		t.Errorf("Keys: all %d, provider %v, tenant %v", len(all), providerOnly, tenantOnly)
	}

	// Revocation keeps the first time and the key stays listed.
	first := clock.t.Add(time.Minute)
	if err := db.RevokeKey(ctx, k.ID, first); err != nil {
		t.Fatal(err)
	}
	if err := db.RevokeKey(ctx, k.ID, first.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	got, _ = db.Key(ctx, k.ID)
	if got.RevokedAt == nil || !got.RevokedAt.Equal(first) {
		t.Errorf("revokedAt = %v, want %v", got.RevokedAt, first)
	}
	if got.Usable(first) {
		t.Error("revoked key usable")
	}
	wantCode(t, db.RevokeKey(ctx, "key_missing", first), app.ENOTFOUND)
	if all, _ := db.Keys(ctx, app.KeyFilter{}); len(all) != 2 {
		t.Errorf("revoked key no longer listed: %d keys", len(all))
	}

	// lastUsedAt is written, then coalesced to one write a minute.
	use := clock.t.Add(2 * time.Minute)
	for i := range 5 {
		if err := db.TouchKey(ctx, pk.ID, use.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	got, _ = db.Key(ctx, pk.ID)
	if got.LastUsedAt == nil || !got.LastUsedAt.Equal(use) {
		t.Errorf("lastUsedAt = %v, want %v (first use of the minute)", got.LastUsedAt, use)
	}
	later := use.Add(time.Minute)
	db.TouchKey(ctx, pk.ID, later)
	got, _ = db.Key(ctx, pk.ID)
	if !got.LastUsedAt.Equal(later) {
		t.Errorf("lastUsedAt = %v, want %v", got.LastUsedAt, later)
	}
}

func TestUsersAndSessions(t *testing.T) {
	db, clock := openTestDB(t)
	ctx := context.Background()
	tn := mustTenant(t, db, "Acme")
	if n, _ := db.CountUsers(ctx); n != 0 {
		t.Fatalf("CountUsers = %d on a fresh database", n)
	}
	u := &app.User{Email: "admin@example.com", TenantID: tn.ID, PasswordHash: "h"}
	if err := db.CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	p := &app.User{Email: "root@example.com", PasswordHash: "h"}
	if err := db.CreateUser(ctx, p); err != nil {
		t.Fatal(err)
	}
	wantCode(t, db.CreateUser(ctx, &app.User{Email: "admin@example.com", PasswordHash: "x"}), app.ECONFLICT)
	wantCode(t, db.CreateUser(ctx, &app.User{Email: "x@example.com", TenantID: "tn_missing", PasswordHash: "x"}), app.EINVALID)
	if n, _ := db.CountUsers(ctx); n != 2 {
		t.Errorf("CountUsers = %d", n)
	}
	got, err := db.UserByEmail(ctx, "admin@example.com")
	if err != nil || got.ID != u.ID || got.TenantID != tn.ID || got.IsProvider() {
		t.Errorf("UserByEmail = %+v, %v", got, err)
	}
	if got, _ := db.User(ctx, p.ID); got == nil || !got.IsProvider() {
		t.Errorf("provider user = %+v", got)
	}
	_, err = db.User(ctx, "usr_missing")
	wantCode(t, err, app.ENOTFOUND)
	_, err = db.UserByEmail(ctx, "nobody@example.com")
	wantCode(t, err, app.ENOTFOUND)

	s := &app.Session{IDHash: app.Fingerprint("cookie"), UserID: u.ID, CSRFToken: "csrf", CreatedAt: clock.t, ExpiresAt: clock.t.Add(time.Hour)}
	old := &app.Session{IDHash: app.Fingerprint("old"), UserID: u.ID, CSRFToken: "c2", CreatedAt: clock.t.Add(-2 * time.Hour), ExpiresAt: clock.t.Add(-time.Hour)}
	for _, x := range []*app.Session{s, old} {
		if err := db.CreateSession(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	wantCode(t, db.CreateSession(ctx, s), app.ECONFLICT)
	gs, err := db.SessionByIDHash(ctx, s.IDHash)
	if err != nil || gs.UserID != u.ID || gs.CSRFToken != "csrf" || !gs.ExpiresAt.Equal(s.ExpiresAt) {
		t.Errorf("SessionByIDHash = %+v, %v", gs, err)
	}
	if err := db.DeleteExpiredSessions(ctx, clock.t); err != nil {
		t.Fatal(err)
	}
	_, err = db.SessionByIDHash(ctx, old.IDHash)
	wantCode(t, err, app.ENOTFOUND)
	if err := db.DeleteSession(ctx, s.IDHash); err != nil {
		t.Fatal(err)
	}
	_, err = db.SessionByIDHash(ctx, s.IDHash)
	wantCode(t, err, app.ENOTFOUND)
	if err := db.DeleteSession(ctx, s.IDHash); err != nil {
		t.Errorf("deleting an absent session: %v", err)
	}
}

func TestEndpoints(t *testing.T) {
	db, clock := openTestDB(t)
	ctx := context.Background()
	a, b := mustTenant(t, db, "A"), mustTenant(t, db, "B")
	e := &app.Endpoint{TenantID: a.ID, Hostname: "db1", Profile: app.ProfileServer, OS: "linux", Arch: "amd64",
		Schedule: app.DefaultEndpointSchedule, Paths: []string{"/etc", "/srv"}}
	if err := db.CreateEndpoint(ctx, e); err != nil {
		t.Fatal(err)
	}
	c := &app.Endpoint{TenantID: b.ID, Hostname: "laptop", Profile: app.ProfileClient}
	if err := db.CreateEndpoint(ctx, c); err != nil {
		t.Fatal(err)
	}
	wantCode(t, db.CreateEndpoint(ctx, &app.Endpoint{TenantID: "tn_missing", Profile: app.ProfileServer}), app.EINVALID)
	wantCode(t, db.CreateEndpoint(ctx, &app.Endpoint{ID: e.ID, TenantID: a.ID, Profile: app.ProfileServer}), app.ECONFLICT)

	got, err := db.Endpoint(ctx, e.ID)
	if err != nil || got.Status != app.EndpointActive || !got.CreatedAt.Equal(clock.t) || len(got.Paths) != 2 ||
		got.Excludes == nil || got.LastSeenAt != nil {
		t.Errorf("Endpoint = %+v, %v", got, err)
	}
	_, err = db.Endpoint(ctx, "ep_missing")
	wantCode(t, err, app.ENOTFOUND)

	for _, tt := range []struct {
		f    app.EndpointFilter
		want int
	}{{app.EndpointFilter{}, 2}, {app.EndpointFilter{TenantID: a.ID}, 1}, {app.EndpointFilter{Profile: app.ProfileClient}, 1},
		{app.EndpointFilter{TenantID: a.ID, Profile: app.ProfileClient}, 0}} {
		if list, err := db.Endpoints(ctx, tt.f); err != nil || len(list) != tt.want {
			t.Errorf("Endpoints(%+v) = %d, %v; want %d", tt.f, len(list), err, tt.want)
		}
	}

	seen := clock.t.Add(time.Minute)
	up, err := db.UpdateEndpoint(ctx, e.ID, func(x *app.Endpoint) error {
		x.LastSeenAt, x.LastSnapshotID, x.VerifyState, x.RepositoryDamaged = &seen, "snap1", app.VerifyPassed, true
		return nil
	})
	if err != nil || up.LastSnapshotID != "snap1" {
		t.Fatalf("UpdateEndpoint = %+v, %v", up, err)
	}
	got, _ = db.Endpoint(ctx, e.ID)
	if got.LastSeenAt == nil || !got.LastSeenAt.Equal(seen) || got.VerifyState != app.VerifyPassed || !got.RepositoryDamaged {
		t.Errorf("after update: %+v", got)
	}
	// An error from fn rolls back.
	_, err = db.UpdateEndpoint(ctx, e.ID, func(x *app.Endpoint) error {
		x.Hostname = "changed"
		return app.Errorf(app.ECONFLICT, "no")
	})
	wantCode(t, err, app.ECONFLICT)
	if got, _ := db.Endpoint(ctx, e.ID); got.Hostname != "db1" {
		t.Errorf("failed update was kept: %q", got.Hostname)
	}
	_, err = db.UpdateEndpoint(ctx, "ep_missing", func(*app.Endpoint) error { return nil })
	wantCode(t, err, app.ENOTFOUND)
}

func TestSettingsAndVersionChecks(t *testing.T) {
	db, clock := openTestDB(t)
	ctx := context.Background()
	s, err := db.Settings(ctx)
	if err != nil || s.UpdateCheck || s.UpdateChannel != "stable" || s.UpdateCheckEnabledAt != nil {
		t.Fatalf("fresh settings = %+v, %v; want update check off on stable", s, err)
	}
	if _, err := db.UpdateSettings(ctx, func(s *app.Settings) error {
		s.UpdateCheck, s.UpdateChannel, s.UpdateCheckEnabledAt = true, "beta", &clock.t
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	_, err = db.UpdateSettings(ctx, func(s *app.Settings) error { s.UpdateCheck = false; return app.Errorf(app.EINVALID, "x") })
	wantCode(t, err, app.EINVALID)
	s, _ = db.Settings(ctx)
	if !s.UpdateCheck || s.UpdateChannel != "beta" || s.UpdateCheckEnabledAt == nil || !s.UpdateCheckEnabledAt.Equal(clock.t) {
		t.Errorf("settings = %+v", s)
	}

	_, err = db.VersionCheck(ctx, "stable")
	wantCode(t, err, app.ENOTFOUND)
	pub := clock.t.Add(-time.Hour)
	c := &app.VersionCheck{Channel: "stable", CheckedAt: clock.t, LatestTag: "v1.0.0", Latest: "1.0.0", ReleaseURL: "u", PublishedAt: &pub}
	if err := db.SaveVersionCheck(ctx, c); err != nil {
		t.Fatal(err)
	}
	c2 := &app.VersionCheck{Channel: "stable", CheckedAt: clock.t.Add(time.Hour), CheckError: "rate_limited"}
	if err := db.SaveVersionCheck(ctx, c2); err != nil {
		t.Fatal(err)
	}
	got, err := db.VersionCheck(ctx, "stable")
	if err != nil || got.CheckError != "rate_limited" || got.Latest != "" || got.PublishedAt != nil || !got.CheckedAt.Equal(c2.CheckedAt) {
		t.Errorf("VersionCheck = %+v, %v; want the replacement", got, err)
	}

	jc, err := db.CountJobs(ctx, "", clock.t.Add(-24*time.Hour))
	if err != nil || jc != (app.JobCounts{}) {
		t.Errorf("CountJobs on no jobs = %+v, %v", jc, err)
	}
}

func TestEnrollmentTokenSingleUseAndExpiry(t *testing.T) {
	db, clock := openTestDB(t)
	ctx := context.Background()
	tn := mustTenant(t, db, "Acme")
	value, tok := app.NewEnrollmentToken(tn.ID, app.ProfileServer, clock.t)
	if err := db.CreateEnrollmentToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	wantCode(t, db.CreateEnrollmentToken(ctx, tok), app.ECONFLICT)
	_, other := app.NewEnrollmentToken("tn_missing", app.ProfileServer, clock.t)
	wantCode(t, db.CreateEnrollmentToken(ctx, other), app.EINVALID)

	_, err := db.ConsumeEnrollmentToken(ctx, app.Fingerprint("bse_wrong"), clock.t)
	wantCode(t, err, app.EUNAUTHORIZED)

	// Many concurrent consumers: exactly one wins.
	const n = 20
	wins := make(chan *app.EnrollmentToken, n)
	errs := make(chan error, n)
	for range n {
		go func() {
			got, err := db.ConsumeEnrollmentToken(ctx, app.Fingerprint(value), clock.t.Add(time.Minute))
			if err != nil {
				errs <- err
				return
			}
			wins <- got
		}()
	}
	var won []*app.EnrollmentToken
	for range n {
		select {
		case w := <-wins:
			won = append(won, w)
		case err := <-errs:
			wantCode(t, err, app.EUNAUTHORIZED)
		}
	}
	if len(won) != 1 {
		t.Fatalf("%d consumers won, want exactly 1", len(won))
	}
	if w := won[0]; w.TenantID != tn.ID || w.Profile != app.ProfileServer || w.UsedAt == nil {
		t.Errorf("consumed token = %+v", w)
	}

	// Expiry: usable until, not at, ExpiresAt.
	v2, tok2 := app.NewEnrollmentToken(tn.ID, app.ProfileClient, clock.t)
	db.CreateEnrollmentToken(ctx, tok2)
	_, err = db.ConsumeEnrollmentToken(ctx, app.Fingerprint(v2), tok2.ExpiresAt)
	wantCode(t, err, app.EUNAUTHORIZED)
	v3, tok3 := app.NewEnrollmentToken(tn.ID, app.ProfileClient, clock.t)
	db.CreateEnrollmentToken(ctx, tok3)
	if _, err := db.ConsumeEnrollmentToken(ctx, app.Fingerprint(v3), tok3.ExpiresAt.Add(-time.Millisecond)); err != nil {
		t.Errorf("token refused just before expiry: %v", err)
	}
}

func TestEventsOutbox(t *testing.T) {
	db, _ := openTestDB(t)
	ctx := context.Background()
	e := &app.Event{Type: app.EventWebhookTest, TenantID: "tn_1", Data: map[string]string{"hello": "world"}}
	if err := db.PublishEvent(ctx, e); err != nil {
		t.Fatal(err)
	}
	wantCode(t, db.PublishEvent(ctx, e), app.ECONFLICT)
	got, err := db.UndispatchedEvents(ctx, 10)
	if err != nil || len(got) != 1 || got[0].ID != e.ID || got[0].Type != app.EventWebhookTest {
		t.Fatalf("UndispatchedEvents = %v, %v", got, err)
	}
	if want := `"data":{"hello":"world"}`; !strings.Contains(string(got[0].Body), want) {
		t.Errorf("body %s lacks %s", got[0].Body, want)
	}
}

func TestCountJobs(t *testing.T) {
	db, clock := openTestDB(t)
	ctx := context.Background()
	since := clock.t.Add(-24 * time.Hour)
	add := func(id, tenant, state string, finished *time.Time) {
		err := db.WriteTx(ctx, func(tx *sql.Tx) error {
			_, err := tx.Exec(`INSERT INTO jobs (id, tenant_id, queue, state, target_type, target_id, trigger, queued_at, finished_at)
				VALUES (?, ?, 'endpoint_backup', ?, 'endpoint', 'ep_1', 'schedule', ?, ?)`, id, tenant, state, clock.t.UnixMilli(), ms(finished))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	recent, old := clock.t.Add(-time.Hour), clock.t.Add(-25*time.Hour)
	add("job_1", "tn_a", app.JobRunning, nil)
	add("job_2", "tn_a", app.JobQueued, nil)
	add("job_3", "tn_a", app.JobFailed, &recent)
	add("job_4", "tn_a", app.JobFailed, &old)
	add("job_5", "tn_a", app.JobSucceeded, &recent)
	add("job_6", "tn_b", app.JobSucceeded, &recent)
	add("job_7", "tn_b", app.JobInterrupted, &recent)
	for tenant, want := range map[string]app.JobCounts{
		"tn_a": {Running: 1, Queued: 1, Failed24h: 1, Succeeded24h: 1},
		"tn_b": {Succeeded24h: 1},
		"":     {Running: 1, Queued: 1, Failed24h: 1, Succeeded24h: 2},
	} {
		if got, err := db.CountJobs(ctx, tenant, since); err != nil || got != want {
			t.Errorf("CountJobs(%q) = %+v, %v; want %+v", tenant, got, err, want)
		}
	}
	add("job_8", "tn_b", app.JobQueued, nil)
	active, err := db.CountActiveJobs(ctx)
	want := []app.JobQueueCount{{Queue: app.QueueEndpointBackup, State: app.JobQueued, Count: 2},
		{Queue: app.QueueEndpointBackup, State: app.JobRunning, Count: 1}}
	if err != nil || !reflect.DeepEqual(active, want) {
		t.Errorf("CountActiveJobs = %+v, %v; want %+v", active, err, want)
	}
	// The count reads the state index, never the whole job history.
	var detail string
	var id, parent, unused int
	if err := db.read.QueryRowContext(ctx, `EXPLAIN QUERY PLAN SELECT state, queue, count(*) FROM jobs
		WHERE state IN ('queued', 'running') GROUP BY state, queue`).Scan(&id, &parent, &unused, &detail); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(detail, "jobs_state") {
		t.Errorf("query plan %q does not use the jobs_state index", detail)
	}
}

// Maintain truncates the WAL, except when another component (the catalogue
// replica) owns checkpoints.
func TestMaintainLeavesCheckpointsToTheirOwner(t *testing.T) {
	ctx := context.Background()
	for _, external := range []bool{false, true} {
		db, err := Open(ctx, filepath.Join(t.TempDir(), "backstop.db"))
		if err != nil {
			t.Fatal(err)
		}
		mustTenant(t, db, "Acme")
		db.ExternalCheckpoints = external
		if err := db.Maintain(ctx); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(db.Path + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		if truncated := fi.Size() == 0; truncated == external {
			t.Errorf("ExternalCheckpoints %v: WAL is %d bytes after Maintain", external, fi.Size())
		}
		db.Close()
	}
}

// TestImportEndpoints is what seed-bench relies on: bulk-imported rows read
// back with every column, the newest included.
func TestImportEndpoints(t *testing.T) {
	db, _ := openTestDB(t)
	ctx := context.Background()
	a := mustTenant(t, db, "A")
	eps := []*app.Endpoint{
		{TenantID: a.ID, Hostname: "one", Profile: app.ProfileServer, PinnedAgentVersion: "1.2.3"},
		{TenantID: a.ID, Hostname: "two", Profile: app.ProfileClient, Paths: []string{"/home"}},
	}
	if err := db.ImportEndpoints(ctx, eps); err != nil {
		t.Fatal(err)
	}
	for _, want := range eps {
		got, err := db.Endpoint(ctx, want.ID)
		if err != nil || got.Hostname != want.Hostname || got.PinnedAgentVersion != want.PinnedAgentVersion ||
			got.Status != app.EndpointActive || len(got.Paths) != len(want.Paths) {
			t.Errorf("Endpoint(%s) = %+v, %v", want.ID, got, err)
		}
	}
}

// EndpointStates gives what the verify schedules need, without loading the
// endpoint cache.
func TestEndpointStates(t *testing.T) {
	db, _ := openTestDB(t)
	ctx := context.Background()
	a := mustTenant(t, db, "A")
	eps := []*app.Endpoint{
		{TenantID: a.ID, Hostname: "one", Profile: app.ProfileServer, LastSnapshotID: "snap1"},
		{TenantID: a.ID, Hostname: "two", Profile: app.ProfileClient, Status: app.EndpointRevoked},
	}
	if err := db.ImportEndpoints(ctx, eps); err != nil {
		t.Fatal(err)
	}
	got, err := db.EndpointStates(ctx)
	if err != nil || len(got) != 2 {
		t.Fatalf("EndpointStates = %v, %v", got, err)
	}
	byID := map[string]*app.Endpoint{got[0].ID: got[0], got[1].ID: got[1]}
	for _, want := range eps {
		g := byID[want.ID]
		if g == nil || g.TenantID != a.ID || g.Status != want.Status || g.LastSnapshotID != want.LastSnapshotID {
			t.Errorf("state of %s = %+v", want.ID, g)
		}
	}
	if db.endpointCache.snap.Load() != nil {
		t.Fatal("EndpointStates loaded the endpoint cache")
	}
}
