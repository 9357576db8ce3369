package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"backstop/app"
	"backstop/store"
)

// admin runs one administration command against the data directory. It is
// safe beside a running serve: SQLite WAL with a busy timeout.
func admin(ctx context.Context, args []string, e env) error {
	if len(args) == 0 {
		return usageError{"admin: missing command: create-tenant | create-user | create-key | revoke-key | create-enrollment-token | audit | restore-catalogue | rebuild-catalogue | archive-key"}
	}
	cmds := map[string]func(context.Context, *flag.FlagSet, []string, env) error{
		"create-tenant":           adminCreateTenant,
		"create-user":             adminCreateUser,
		"create-key":              adminCreateKey,
		"revoke-key":              adminRevokeKey,
		"create-enrollment-token": adminCreateEnrollmentToken,
		"audit":                   adminAudit,
		"restore-catalogue":       adminRestoreCatalogue,
		"rebuild-catalogue":       adminRebuildCatalogue,
		"archive-key":             adminArchiveKey,
		"seed-bench":              adminSeedBench,      // hidden: fills a data dir for docs/benchmarks.md
		"openapi":                 adminOpenAPI,        // hidden: prints the API description for CI and client generators
		"update-watchdog":         adminUpdateWatchdog, // hidden: started by serve after an update (docs/updates.md)
	}
	fn, ok := cmds[args[0]]
	if !ok {
		return usageError{fmt.Sprintf("admin: unknown command %q", args[0])}
	}
	return fn(ctx, flag.NewFlagSet("admin "+args[0], flag.ContinueOnError), args[1:], e)
}

// openStore loads the configuration named by the common flags and opens the
// database in the data directory, which must exist.
func openStore(ctx context.Context, file, dataDir string, e env) (*store.DB, app.Config, error) {
	cfg, err := loadConfig(file, dataDir, e.getenv)
	if err != nil {
		return nil, cfg, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, cfg, fmt.Errorf("data directory: %w", err)
	}
	db, err := store.Open(ctx, filepath.Join(cfg.DataDir, "backstop.db"))
	return db, cfg, err
}

func adminCreateTenant(ctx context.Context, fs *flag.FlagSet, args []string, e env) error {
	file, dataDir := configFlags(fs)
	name := fs.String("name", "", "tenant name (required)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	db, _, err := openStore(ctx, *file, *dataDir, e)
	if err != nil {
		return err
	}
	defer db.Close()
	t := &app.Tenant{Name: strings.TrimSpace(*name)}
	if err := db.CreateTenant(ctx, t); err != nil {
		return cliError(err)
	}
	fmt.Fprintln(e.stdout, t.ID)
	return nil
}

func adminCreateUser(ctx context.Context, fs *flag.FlagSet, args []string, e env) error {
	file, dataDir := configFlags(fs)
	email := fs.String("email", "", "e-mail address (required)")
	stdinPw := fs.Bool("password-stdin", false, "read the password from the first line of standard input")
	provider := fs.Bool("provider", false, "provider administrator: manages every tenant (the default without --tenant)")
	tenant := fs.String("tenant", "", "tenant id: a tenant administrator sees only this tenant")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *provider && *tenant != "" {
		return usageError{"admin create-user: --provider and --tenant exclude each other"}
	}
	addr, err := app.NormalizeEmail(*email)
	if err != nil {
		return fmt.Errorf("--email: %s", app.ErrorMessage(err))
	}
	var pw string
	generated := false
	if *stdinPw {
		line, err := bufio.NewReader(e.stdin).ReadString('\n')
		if err != nil && line == "" {
			return fmt.Errorf("--password-stdin: no password on standard input")
		}
		pw = strings.TrimRight(line, "\r\n")
	} else {
		pw, generated = app.RandomToken(20), true
	}
	if err := app.ValidatePassword(pw); err != nil {
		return fmt.Errorf("password: %s", app.ErrorMessage(err))
	}
	db, _, err := openStore(ctx, *file, *dataDir, e)
	if err != nil {
		return err
	}
	defer db.Close()
	if *tenant != "" {
		if _, err := db.Tenant(ctx, *tenant); err != nil {
			return fmt.Errorf("--tenant: no tenant %q", *tenant)
		}
	}
	u := &app.User{Email: addr, TenantID: *tenant, PasswordHash: app.HashPassword(pw)}
	if err := db.CreateUser(ctx, u); err != nil {
		if app.ErrorCode(err) == app.ECONFLICT {
			return fmt.Errorf("a user with e-mail %s already exists", addr)
		}
		return cliError(err)
	}
	if err := db.WriteAudit(ctx, &app.AuditEntry{ActorType: app.ActorSystem, ActorID: "cli", ActorName: "backstop admin",
		TenantID: *tenant, Action: "users.create", Target: u.ID, Status: 201}); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, u.ID)
	if generated {
		fmt.Fprintf(e.stderr, "Generated password (shown once): %s\n", pw)
	}
	return nil
}

func adminCreateKey(ctx context.Context, fs *flag.FlagSet, args []string, e env) error {
	file, dataDir := configFlags(fs)
	tenant := fs.String("tenant", "", "tenant id (required unless --provider)")
	name := fs.String("name", "", "key name, shown in the key list and the audit log (required)")
	scopes := fs.String("scopes", "", "comma-separated scopes: "+scopeList())
	days := fs.Int("expires-days", 0, "expiry: 30, 90, 180 or 365 days (default: none)")
	provider := fs.Bool("provider", false, "provider key: works across every tenant (provider edition)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	k := &app.APIKey{ID: app.NewID(app.PrefixKey), Name: strings.TrimSpace(*name), Provider: *provider, CreatedBy: "cli"}
	if k.Name == "" || len(k.Name) > 100 {
		return usageError{"admin create-key: --name is required (at most 100 characters)"}
	}
	for _, s := range strings.Split(*scopes, ",") {
		sc := app.Scope(strings.TrimSpace(s))
		if !app.ValidScope(sc) {
			return usageError{fmt.Sprintf("admin create-key: unknown scope %q (scopes: %s)", sc, scopeList())}
		}
		if !slices.Contains(k.Scopes, sc) {
			k.Scopes = append(k.Scopes, sc)
		}
	}
	if *days != 0 && !slices.Contains(app.KeyExpiryDays, *days) {
		return usageError{"admin create-key: --expires-days must be 30, 90, 180 or 365"}
	}
	if *provider == (*tenant != "") {
		return usageError{"admin create-key: give exactly one of --tenant ID and --provider"}
	}
	db, cfg, err := openStore(ctx, *file, *dataDir, e)
	if err != nil {
		return err
	}
	defer db.Close()
	if *provider && cfg.Edition != app.EditionProvider {
		return fmt.Errorf("provider keys need edition: provider (this appliance runs %s)", cfg.Edition)
	}
	if *tenant != "" {
		if _, err := db.Tenant(ctx, *tenant); err != nil {
			return fmt.Errorf("--tenant: no tenant %q", *tenant)
		}
		k.TenantID = *tenant
	}
	now := db.Now()
	k.CreatedAt = app.At(now)
	if *days != 0 {
		k.ExpiresAt = app.Ptr(app.At(now.Add(time.Duration(*days) * 24 * time.Hour)))
	}
	value := app.NewKeyValue(k.ID)
	k.Fingerprint = app.Fingerprint(value)
	if err := db.CreateKey(ctx, k); err != nil {
		return cliError(err)
	}
	if err := db.WriteAudit(ctx, &app.AuditEntry{ActorType: app.ActorSystem, ActorID: "cli", ActorName: "backstop admin",
		TenantID: k.TenantID, Action: "apiKeys.create", Target: k.ID, Status: 201}); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, value)
	return nil
}

func scopeList() string {
	s := make([]string, len(app.AllScopes))
	for i, sc := range app.AllScopes {
		s[i] = string(sc)
	}
	return strings.Join(s, ",")
}

func adminRevokeKey(ctx context.Context, fs *flag.FlagSet, args []string, e env) error {
	file, dataDir := configFlags(fs)
	// The key id is positional: backstop admin revoke-key KEYID [flags].
	var id string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		id, args = args[0], args[1:]
	} else if len(args) > 0 {
		// Also after the flags: revoke-key --data-dir DIR KEYID.
		fs.SetOutput(io.Discard)
		if err := fs.Parse(args); err == nil && fs.NArg() == 1 {
			id, args = fs.Arg(0), args[:len(args)-1]
		}
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if id == "" {
		return usageError{"admin revoke-key: missing key id (key_…)"}
	}
	db, _, err := openStore(ctx, *file, *dataDir, e)
	if err != nil {
		return err
	}
	defer db.Close()
	k, err := db.Key(ctx, id)
	if err != nil {
		return fmt.Errorf("no API key %q", id)
	}
	if err := db.RevokeKey(ctx, id, db.Now()); err != nil {
		return cliError(err)
	}
	if err := db.WriteAudit(ctx, &app.AuditEntry{ActorType: app.ActorSystem, ActorID: "cli", ActorName: "backstop admin",
		TenantID: k.TenantID, Action: "apiKeys.revoke", Target: id, Status: 200}); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "revoked %s (%s)\n", id, k.Name)
	return nil
}

func adminCreateEnrollmentToken(ctx context.Context, fs *flag.FlagSet, args []string, e env) error {
	file, dataDir := configFlags(fs)
	tenant := fs.String("tenant", "", "tenant id (required)")
	profile := fs.String("profile", app.ProfileServer, "server or client")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *profile != app.ProfileServer && *profile != app.ProfileClient {
		return usageError{"admin create-enrollment-token: --profile must be server or client"}
	}
	db, _, err := openStore(ctx, *file, *dataDir, e)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.Tenant(ctx, *tenant); err != nil {
		return fmt.Errorf("--tenant: no tenant %q", *tenant)
	}
	value, t := app.NewEnrollmentToken(*tenant, *profile, db.Now())
	if err := db.CreateEnrollmentToken(ctx, t); err != nil {
		return cliError(err)
	}
	fmt.Fprintln(e.stdout, value)
	return nil
}

func adminAudit(ctx context.Context, fs *flag.FlagSet, args []string, e env) error {
	file, dataDir := configFlags(fs)
	tenant := fs.String("tenant", "", "only rows for this tenant")
	limit := fs.Int("limit", 100, "newest rows to print (1 to 1000)")
	asJSON := fs.Bool("json", false, "one JSON object a line")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *limit < 1 || *limit > 1000 {
		return usageError{"admin audit: --limit must be 1 to 1000"}
	}
	db, _, err := openStore(ctx, *file, *dataDir, e)
	if err != nil {
		return err
	}
	defer db.Close()
	rows, err := db.AuditEntries(ctx, app.AuditFilter{TenantID: *tenant, Limit: *limit})
	if err != nil {
		return err
	}
	enc := json.NewEncoder(e.stdout)
	for _, r := range rows {
		if *asJSON {
			if err := enc.Encode(r); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(e.stdout, "%s  %-6s %-30s %-28s %3d  %s  %s\n", r.At, r.ActorType, r.ActorName, r.Action, r.Status, r.Target, r.IP)
	}
	return nil
}

// cliError turns an app error into its message for the one-line error.
func cliError(err error) error {
	if app.ErrorCode(err) == app.EINTERNAL {
		return err
	}
	return fmt.Errorf("%s", app.ErrorMessage(err))
}
