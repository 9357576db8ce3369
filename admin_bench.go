package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"backstop/app"
)

// adminSeedBench fills a data directory for the benchmarks of
// docs/benchmarks.md: one tenant with --endpoints endpoints in a realistic
// mix of states, --audit audit rows spread over the last 90 days, and --keys
// status:read API keys whose values go to --keys-file (one a line, mode
// 0600). --ids-file, if given, receives the endpoint ids. It is hidden from
// the usage text: it exists to reproduce figures, not to run an appliance.
//
// Rows are generated from a fixed PRNG seed, so two runs produce the same
// mix; ids, key values and times differ.
func adminSeedBench(ctx context.Context, fs *flag.FlagSet, args []string, e env) error {
	file, dataDir := configFlags(fs)
	endpoints := fs.Int("endpoints", 10000, "endpoints to create")
	audit := fs.Int("audit", 1000000, "audit rows to create")
	keys := fs.Int("keys", 50, "status:read API keys to create")
	keysFile := fs.String("keys-file", "", "file to write the key values to (required when --keys > 0)")
	idsFile := fs.String("ids-file", "", "file to write the endpoint ids to (optional)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *endpoints < 0 || *audit < 0 || *keys < 0 {
		return usageError{"admin seed-bench: counts must not be negative"}
	}
	if *keys > 0 && *keysFile == "" {
		return usageError{"admin seed-bench: --keys-file is required"}
	}
	db, _, err := openStore(ctx, *file, *dataDir, e)
	if err != nil {
		return err
	}
	defer db.Close()
	started := time.Now()
	now := db.Now()
	rng := rand.New(rand.NewPCG(2, 7))

	tenant := &app.Tenant{Name: "Benchmark tenant"}
	if err := db.CreateTenant(ctx, tenant); err != nil {
		return cliError(err)
	}

	eps := make([]*app.Endpoint, *endpoints)
	ids := make([]string, *endpoints)
	for i := range eps {
		eps[i] = benchEndpoint(rng, tenant.ID, i, now)
	}
	if err := db.ImportEndpoints(ctx, eps); err != nil {
		return fmt.Errorf("endpoints: %w", err)
	}
	for i, ep := range eps {
		ids[i] = ep.ID
	}
	tEndpoints := time.Since(started)

	values := make([]string, *keys)
	keyIDs := make([]*app.APIKey, *keys)
	for i := range values {
		k := &app.APIKey{ID: app.NewID(app.PrefixKey), TenantID: tenant.ID, Name: fmt.Sprintf("bench-%02d", i+1),
			Scopes: []app.Scope{app.ScopeStatusRead}, CreatedBy: "seed-bench"}
		values[i] = app.NewKeyValue(k.ID)
		k.Fingerprint = app.Fingerprint(values[i])
		if err := db.CreateKey(ctx, k); err != nil {
			return cliError(err)
		}
		keyIDs[i] = k
	}

	// Audit rows in batches: a few large transactions, bounded memory.
	const batch = 50000
	rows := make([]*app.AuditEntry, 0, batch)
	span := 90 * 24 * time.Hour
	for i := 0; i < *audit; i++ {
		at := now.Add(-span + time.Duration(int64(span)/int64(*audit)*int64(i)))
		rows = append(rows, benchAuditRow(rng, tenant.ID, keyIDs, ids, at))
		if len(rows) == batch || i == *audit-1 {
			if err := db.ImportAudit(ctx, rows); err != nil {
				return fmt.Errorf("audit rows: %w", err)
			}
			rows = rows[:0]
		}
	}
	tAudit := time.Since(started) - tEndpoints

	if *keysFile != "" {
		if err := os.WriteFile(*keysFile, []byte(strings.Join(values, "\n")+"\n"), 0o600); err != nil {
			return err
		}
	}
	if *idsFile != "" {
		if err := os.WriteFile(*idsFile, []byte(strings.Join(ids, "\n")+"\n"), 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintln(e.stdout, tenant.ID)
	fmt.Fprintf(e.stderr, "seeded tenant %s: %d endpoints in %s, %d audit rows in %s, %d keys; total %s\n",
		tenant.ID, *endpoints, tEndpoints.Round(time.Millisecond), *audit, tAudit.Round(time.Millisecond), *keys,
		time.Since(started).Round(time.Millisecond))
	return nil
}

// benchEndpoint is endpoint number i of a fleet: mostly servers, mostly
// online and backed up, with a share never seen, overdue, failed or
// unverified so that every derived state is computed.
func benchEndpoint(rng *rand.Rand, tenantID string, i int, now time.Time) *app.Endpoint {
	ep := &app.Endpoint{
		TenantID: tenantID, Profile: app.ProfileServer, OS: "linux", Arch: "amd64", AgentVersion: "1.4.2",
		Hostname: fmt.Sprintf("srv-%05d.acme.example", i), DisplayName: fmt.Sprintf("Server %05d", i),
		CreatedAt: now.Add(-time.Duration(30+rng.IntN(300)) * 24 * time.Hour), Schedule: app.DefaultEndpointSchedule,
		Paths: []string{"/etc", "/home", "/var/lib"}, Excludes: []string{"*.tmp"},
		SecretFingerprint: app.Fingerprint(fmt.Sprintf("secret-%d", i)),
	}
	if rng.IntN(10) < 3 {
		ep.Profile, ep.OS, ep.Arch = app.ProfileClient, "darwin", "arm64"
		ep.Hostname, ep.DisplayName = fmt.Sprintf("mac-%05d.acme.example", i), fmt.Sprintf("Laptop %05d", i)
	}
	r := rng.IntN(100)
	if r < 5 {
		return ep // enrolled, never seen
	}
	seen := now.Add(-time.Duration(rng.IntN(600)) * time.Second)
	if r < 15 {
		seen = now.Add(-time.Duration(1+rng.IntN(96)) * time.Hour)
	}
	ep.LastSeenAt = &seen
	if r < 20 {
		return ep // seen, no backup yet
	}
	backup := now.Add(-time.Duration(1+rng.IntN(20)) * time.Hour)
	if r < 25 {
		backup = now.Add(-time.Duration(50+rng.IntN(100)) * time.Hour) // overdue
	}
	ep.LastBackupAt, ep.LastBackupState = &backup, "succeeded"
	ep.LastSuccessAt, ep.LastSnapshotID = &backup, fmt.Sprintf("%064x", rng.Uint64())
	switch {
	case r < 30:
		ep.LastBackupState = "failed"
	case r < 33:
		ep.VerifyState, ep.VerifyCheckedAt = app.VerifyFailed, &backup
	case r < 80:
		ep.VerifyState, ep.VerifyCheckedAt, ep.VerifyPassedSnapshotID = app.VerifyPassed, &backup, ep.LastSnapshotID
	}
	return ep
}

var benchActions = []struct{ action, path string }{
	{"endpoints.list", "/api/v1/endpoints"}, {"status.get", "/api/v1/status"},
	{"endpoints.get", "/api/v1/endpoints/"}, {"version.get", "/api/v1/version"},
}

// benchAuditRow is one read by one of the keys, as the API writes it.
func benchAuditRow(rng *rand.Rand, tenantID string, keys []*app.APIKey, endpointIDs []string, at time.Time) *app.AuditEntry {
	a := benchActions[rng.IntN(len(benchActions))]
	target := a.path
	if strings.HasSuffix(target, "/") && len(endpointIDs) > 0 {
		target += endpointIDs[rng.IntN(len(endpointIDs))]
	}
	e := &app.AuditEntry{At: app.At(at), ActorType: app.ActorKey, ActorID: "key_unknown", ActorName: "psa",
		TenantID: tenantID, Action: a.action, Target: target, Status: 200,
		IP: fmt.Sprintf("10.0.%d.%d", rng.IntN(4), 1+rng.IntN(250)), UserAgent: "PSA-Connector/2.1",
		RequestID: fmt.Sprintf("req_%016x", rng.Uint64())}
	if len(keys) > 0 {
		k := keys[rng.IntN(len(keys))]
		e.ActorID, e.ActorName = k.ID, k.Name
	}
	return e
}
