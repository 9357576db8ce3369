package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"backstop/app"
	"backstop/app/replica"
)

// adminRestoreCatalogue brings the catalogue back from a Litestream replica
// on a new machine: backstop admin restore-catalogue --from URL. The
// newest replicated state is assembled beside the database and renamed
// into place, so a killed restore leaves either no database or the old one
// (run it again). An existing database is refused unless --force, which
// keeps it (with its WAL and Litestream state) renamed aside. serve must
// not be running on the data directory.
func adminRestoreCatalogue(ctx context.Context, fs *flag.FlagSet, args []string, e env) error {
	file, dataDir := configFlags(fs)
	from := fs.String("from", "", "replica URL: s3://bucket/path?… or file:///dir (default: backup.replica_url)")
	force := fs.Bool("force", false, "replace an existing database, keeping it renamed aside")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig(*file, *dataDir, e.getenv)
	if err != nil {
		return err
	}
	src := *from
	if src == "" {
		src = cfg.Backup.ReplicaURL
	}
	if src == "" {
		return usageError{"admin restore-catalogue: --from URL is required (or set backup.replica_url)"}
	}
	if err := app.ValidateReplicaURL(src); err != nil {
		return fmt.Errorf("--from: %v", err)
	}
	dbPath := filepath.Join(cfg.DataDir, "backstop.db")
	exists, err := fileExists(dbPath)
	if err != nil {
		return err
	}
	if exists && !*force {
		return fmt.Errorf("%s already exists: refusing to replace it (stop serve, then use --force to keep it renamed aside)", dbPath)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}

	// Litestream's messages go to stderr at warn and above: stdout is the
	// one line saying what was restored.
	logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("component", "replica")
	staged := dbPath + ".restoring"
	if err := os.Remove(staged); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	defer os.Remove(staged) // gone once renamed; removed if anything below fails
	got, err := replica.Restore(ctx, src, staged, logger)
	if replica.IsNoReplica(err) {
		return fmt.Errorf("%s: %v", app.RedactURL(src), err)
	} else if err != nil {
		return fmt.Errorf("restore from %s: %s", app.RedactURL(src), strings.ReplaceAll(err.Error(), "\n", " "))
	}

	var kept string
	if exists {
		if kept, err = moveAside(ctx, dbPath, time.Now().UTC()); err != nil {
			return err
		}
	}
	// A WAL without its database cannot belong to the restored file:
	// SQLite would replay its frames into it.
	for _, stray := range []string{dbPath + "-wal", dbPath + "-shm"} {
		if err := os.Rename(stray, stray+".orphaned"); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if err := os.Rename(staged, dbPath); err != nil {
		return err
	}
	if err := syncDir(cfg.DataDir); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "restored %s from %s (%s)\n", dbPath, app.RedactURL(src), got)
	if kept != "" {
		fmt.Fprintf(e.stdout, "kept the previous database as %s\n", kept)
	}
	return nil
}

// moveAside folds the database's WAL into it and renames it, with
// Litestream's state, beside it with a time suffix; it returns the new
// name. Folding first makes the old database one self-contained file, and
// doubles as the check that nothing else has it open: the last connection
// to close deletes the WAL, so a WAL that survives means serve (or another
// command) still uses the database.
func moveAside(ctx context.Context, dbPath string, now time.Time) (string, error) {
	old, err := sql.Open("sqlite", "file:"+(&url.URL{Path: dbPath}).EscapedPath()+"?_pragma=busy_timeout(5000)")
	if err != nil {
		return "", err
	}
	_, err = old.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)")
	if cerr := old.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("%s: cannot fold its WAL in before keeping it: %v", dbPath, err)
	}
	if wal, err := fileExists(dbPath + "-wal"); err != nil || wal {
		return "", fmt.Errorf("%s is in use (is serve running on this data directory?): stop it first", dbPath)
	}
	suffix := ".replaced-" + now.Format("20060102T150405Z")
	meta := replica.MetaDir(dbPath)
	for _, p := range []string{meta, dbPath} { // the database last: until it moves, a rerun keeps it
		if err := os.Rename(p, p+suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("keeping the previous database: %w", err)
		}
	}
	return dbPath + suffix, nil
}

func fileExists(p string) (bool, error) {
	_, err := os.Stat(p)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
