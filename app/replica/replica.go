// Package replica replicates the appliance's catalogue (backstop.db)
// continuously to S3 or a directory with Litestream, embedded as a library,
// and restores it on a new machine.
//
// Litestream's library API is "not considered stable": go.mod pins v0.5.18
// and this package is the only one that imports it.
//
// How it lives beside package store (see Open and Close):
//   - both use modernc.org/sqlite, as Litestream requires (POSIX locks are
//     per process; two SQLite implementations in one process break them);
//   - Litestream keeps a read transaction open to hold back checkpoints past
//     what it has copied, and checkpoints itself (PASSIVE every minute or at
//     1000 WAL pages). The store must not run blocking checkpoints of its
//     own while replication is on: store.DB.ExternalCheckpoints.
package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"backstop/app"

	"github.com/benbjohnson/litestream"
	"github.com/benbjohnson/litestream/file"
	"github.com/benbjohnson/litestream/s3"
)

// Config says what to replicate where.
type Config struct {
	// URL is backup.replica_url (s3://… or file:///…); it may carry
	// credentials and is logged only redacted.
	URL string
	// DBPath is the catalogue file, data_dir/backstop.db.
	DBPath string
	Logger *slog.Logger
	// ShutdownSync bounds the final upload in Close (default 10 s): a
	// replica that cannot be reached must not hold up a shutdown for long.
	ShutdownSync time.Duration
}

// Replicator is the running replication of one database. Open starts it,
// Close stops it; Health reports on it at any time.
type Replicator struct {
	url    string // redacted
	logger *slog.Logger
	db     *litestream.DB
	store  *litestream.Store
	errs   *errorRecorder
	opened bool

	shutdownSync time.Duration
}

// Health is what operations need to know about the replica.
type Health struct {
	URL string `json:"url"` // redacted
	// LastSyncAt is when the replica was last known to hold every change
	// (Litestream's last successful sync; zero: never since start-up).
	LastSyncAt time.Time `json:"lastSyncAt"`
	// LastError is the newest replication error and when it was logged;
	// it is current only while LastErrorAt is after LastSyncAt.
	LastError   string    `json:"lastError,omitempty"`
	LastErrorAt time.Time `json:"lastErrorAt"`
	// LocalTXID is the newest transaction Litestream has captured locally,
	// ReplicaTXID the newest it has uploaded.
	LocalTXID   uint64 `json:"localTxid"`
	ReplicaTXID uint64 `json:"replicaTxid"`
}

// Failing reports whether the newest event is an error, not a sync.
func (h Health) Failing() bool { return !h.LastErrorAt.IsZero() && h.LastErrorAt.After(h.LastSyncAt) }

// New checks the URL with Litestream and prepares replication of
// cfg.DBPath; nothing runs until Open.
func New(cfg Config) (*Replicator, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ShutdownSync <= 0 {
		cfg.ShutdownSync = 10 * time.Second
	}
	client, err := NewClient(cfg.URL)
	if err != nil {
		return nil, err
	}
	errs := &errorRecorder{}
	logger := slog.New(errs.wrap(cfg.Logger.Handler()))

	db := litestream.NewDB(cfg.DBPath)
	r := litestream.NewReplicaWithClient(db, client)
	db.Replica = r
	if fc, ok := client.(*file.ReplicaClient); ok {
		fc.Replica = r // the file client copies the database's owner and mode
	}
	// NewStore copies its settings into each DB: set them before, and set
	// the logger after, which also reaches the replica client.
	levels := make(litestream.CompactionLevels, len(litestream.DefaultCompactionLevels))
	for i, l := range litestream.DefaultCompactionLevels {
		c := *l
		levels[i] = &c
	}
	st := litestream.NewStore([]*litestream.DB{db}, levels)
	st.Logger = logger
	st.SetShutdownSyncTimeout(cfg.ShutdownSync)
	db.SetLogger(logger)
	return &Replicator{url: app.RedactURL(cfg.URL), logger: cfg.Logger, db: db, store: st, errs: errs, shutdownSync: cfg.ShutdownSync}, nil
}

// Open starts replication in the background: Litestream copies each
// committed transaction from the WAL and uploads it about once a second.
// The database file should exist (the store opens it first); a replica
// that cannot be reached is not an error here but is retried with backoff
// and shows in Health. Open fails only when the client cannot be set up
// (e.g. S3 without a region and no network to look it up).
func (r *Replicator) Open(ctx context.Context) error {
	if err := r.store.Open(ctx); err != nil {
		return fmt.Errorf("catalogue replica %s: %w", r.url, withHint(err))
	}
	r.opened = true
	r.logger.Info("replicating the catalogue", slog.String("replica", r.url))
	return nil
}

// Close uploads what is left (for at most Config.ShutdownSync), then stops
// replication and closes Litestream's own connection and file handle.
//
// Call it AFTER the application's database is closed. Litestream holds a
// plain file descriptor on the database file (for non-OFD POSIX locks);
// closing it drops every lock this process holds on the file, including
// those of the store's connections that are still open, so another process
// (an admin command) could then take locks it must not. Litestream's rule
// is therefore: close the app's connections first, or close Litestream
// only as the process ends. Closing last costs nothing: the store's last
// commits are already in the WAL, which Litestream's still-open read
// transaction keeps from being checkpointed away until its final sync.
func (r *Replicator) Close(ctx context.Context) error {
	if !r.opened {
		return nil
	}
	r.opened = false
	// Litestream looks at the database first on its monitor's first tick,
	// a second after Open, and its Close syncs only a database it has
	// looked at: a serve stopped within that second would not replicate
	// its last writes. Sync initialises it if need be (a full snapshot,
	// then, as the replica is behind).
	sctx, cancel := context.WithTimeout(ctx, r.shutdownSync)
	if err := r.db.Sync(sctx); err != nil {
		r.logger.Warn("catalogue sync before stopping replication failed", slog.String("replica", r.url), slog.Any("error", err))
	}
	cancel()
	err := r.store.Close(ctx)
	if err != nil {
		r.logger.Warn("final catalogue replication incomplete", slog.String("replica", r.url), slog.Any("error", err))
	}
	return err
}

// Health reports the replica's last successful sync and last error.
func (r *Replicator) Health() Health {
	h := Health{URL: r.url, LastSyncAt: r.db.LastSuccessfulSyncAt()}
	h.LastError, h.LastErrorAt = r.errs.last()
	if pos, err := r.db.Pos(); err == nil {
		h.LocalTXID = uint64(pos.TXID)
	}
	h.ReplicaTXID = uint64(r.db.Replica.Pos().TXID)
	return h
}

// NewClient returns the Litestream client for a replica URL. Besides what
// Litestream reads (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or
// LITESTREAM_ACCESS_KEY_ID/LITESTREAM_SECRET_ACCESS_KEY, then the AWS
// default chain), an s3:// URL may carry its credentials as
// ACCESS_KEY:SECRET@bucket, which win over the environment.
func NewClient(raw string) (litestream.ReplicaClient, error) {
	if err := app.ValidateReplicaURL(raw); err != nil {
		return nil, err
	}
	client, err := litestream.NewReplicaClientFromURL(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", app.RedactURL(raw), err)
	}
	if sc, ok := client.(*s3.ReplicaClient); ok {
		u, _ := url.Parse(raw) // validated above
		if u.User != nil {
			sc.AccessKeyID = u.User.Username()
			sc.SecretAccessKey, _ = u.User.Password()
		}
	}
	return client, nil
}

// withHint explains an S3 set-up error an operator cannot act on as it
// stands: Litestream v0.5.18 gives the AWS SDK its own *http.Client, to
// which the SDK cannot add the CA bundle AWS_CA_BUNDLE names, so a set
// AWS_CA_BUNDLE makes every S3 replica fail (custom CAs: litestream#639).
func withHint(err error) error {
	if os.Getenv("AWS_CA_BUNDLE") != "" && strings.Contains(err.Error(), "RootCAs") {
		return fmt.Errorf("%w (AWS_CA_BUNDLE is set, which Litestream's S3 client cannot use: unset it for backstop; the system CA store is used)", err)
	}
	return err
}

// errorRecorder keeps the newest error Litestream logged: Litestream
// retries failed syncs itself and reports them only in its log.
type errorRecorder struct {
	mu  sync.Mutex
	msg string
	at  time.Time
}

func (e *errorRecorder) last() (string, time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.msg, e.at
}

func (e *errorRecorder) record(msg string, at time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.msg, e.at = msg, at
}

func (e *errorRecorder) wrap(h slog.Handler) slog.Handler {
	return &recordingHandler{Handler: h, rec: e}
}

type recordingHandler struct {
	slog.Handler
	rec *errorRecorder
}

func (h *recordingHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelError || h.Handler.Enabled(ctx, l)
}

func (h *recordingHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		msg := r.Message
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "error" {
				msg += ": " + a.Value.String()
				return false
			}
			return true
		})
		h.rec.record(msg, r.Time)
	}
	if !h.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h *recordingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &recordingHandler{Handler: h.Handler.WithAttrs(as), rec: h.rec}
}

func (h *recordingHandler) WithGroup(name string) slog.Handler {
	return &recordingHandler{Handler: h.Handler.WithGroup(name), rec: h.rec}
}

// errNoReplica is returned by Restore when nothing has been replicated to
// the URL yet.
var errNoReplica = errors.New("no replica there (nothing has been replicated to this URL yet)")
