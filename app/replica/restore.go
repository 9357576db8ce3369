package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/benbjohnson/litestream"
)

// Restored describes a database brought back from a replica.
type Restored struct {
	// TXID is the Litestream transaction the copy ends at.
	TXID uint64
	// ReplicatedAt is when that transaction reached the replica: the copy
	// holds every change committed up to about then.
	ReplicatedAt time.Time
	// Bytes is the size of the restored database file.
	Bytes int64
}

// Restore writes the newest state of the replica at rawURL to outputPath,
// which must not exist. Litestream assembles the file as outputPath+".tmp",
// fsyncs it and renames it into place, then runs SQLite's quick_check
// (removing the file if that fails), so an interrupted restore never leaves
// a partial database at outputPath. Temporary files a killed run left are
// removed first.
func Restore(ctx context.Context, rawURL, outputPath string, logger *slog.Logger) (Restored, error) {
	if logger == nil {
		logger = slog.Default()
	}
	client, err := NewClient(rawURL)
	if err != nil {
		return Restored{}, err
	}
	client.SetLogger(logger)
	if err := client.Init(ctx); err != nil {
		return Restored{}, withHint(err)
	}
	for _, stale := range []string{".tmp", "-wal", "-shm"} {
		if err := os.Remove(outputPath + stale); err != nil && !errors.Is(err, os.ErrNotExist) {
			return Restored{}, err
		}
	}
	// Plan first, then restore exactly that transaction: the replica may
	// still be growing (the old appliance may still run), and what is
	// reported must be what was restored.
	plan, err := litestream.CalcRestorePlan(ctx, client, 0, time.Time{}, logger)
	if errors.Is(err, litestream.ErrTxNotAvailable) || errors.Is(err, litestream.ErrNoSnapshots) {
		return Restored{}, errNoReplica
	} else if err != nil {
		return Restored{}, err
	}
	last := plan[len(plan)-1]
	// The replica logs through its database's logger; a restore has no
	// database yet, so it gets one that is never opened, only to log.
	ldb := litestream.NewDB(outputPath)
	ldb.Logger = logger
	r := litestream.NewReplicaWithClient(ldb, client)
	opt := litestream.NewRestoreOptions()
	opt.OutputPath = outputPath
	opt.TXID = last.MaxTXID
	opt.IntegrityCheck = litestream.IntegrityCheckQuick
	if err := r.Restore(ctx, opt); err != nil {
		return Restored{}, err
	}
	fi, err := os.Stat(outputPath)
	if err != nil {
		return Restored{}, err
	}
	if err := os.Chmod(outputPath, 0o600); err != nil {
		return Restored{}, err
	}
	return Restored{TXID: uint64(last.MaxTXID), ReplicatedAt: last.CreatedAt.UTC(), Bytes: fi.Size()}, nil
}

// MetaDir is where Litestream keeps its local state for the database at
// dbPath (LTX files not yet compacted, positions). A restored database
// must not meet the state of the one it replaces.
func MetaDir(dbPath string) string {
	dir, name := filepath.Split(dbPath)
	return filepath.Join(dir, "."+name+litestream.MetaDirSuffix)
}

// IsNoReplica reports whether err says the URL holds no replica.
func IsNoReplica(err error) bool { return errors.Is(err, errNoReplica) }

// formatTXID is how Litestream prints transaction ids (16 hex digits).
func formatTXID(id uint64) string { return fmt.Sprintf("%016x", id) }

// String is one line for the operator.
func (r Restored) String() string {
	return fmt.Sprintf("transaction %s, replicated %s, %d bytes", formatTXID(r.TXID),
		r.ReplicatedAt.Format("2006-01-02T15:04:05.000Z"), r.Bytes)
}
