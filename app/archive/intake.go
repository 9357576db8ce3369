package archive

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"backstop/app"
	"backstop/app/archive/chain"
)

// TooLarge is the error of a message over the size limit (SMTP 552).
type TooLarge struct{ Limit int64 }

func (e *TooLarge) Error() string {
	return fmt.Sprintf("message larger than the limit of %d bytes", e.Limit)
}

// Group commit: a tenant's pending captures (at most batchMax) are
// appended in one transaction.
const (
	batchMax = 256
	// parsePrefix bounds what Parse reads of a large message: the headers,
	// the journal envelope and the first parts are at its start.
	parsePrefix = 8 << 20
)

// intake is the SMTP intake's state: the group-commit batcher, the
// checkpointer and the spool mover.
type intake struct {
	s *Service

	cpMu    sync.Mutex // one checkpoint signed at a time
	mu      sync.Mutex
	batches map[string]*tenantBatch
	due     map[string]time.Time // tenant -> first record not covered by a checkpoint
	lastAt  map[string]time.Time // tenant -> time of its last record
	wake    chan struct{}        // a record was committed
	spooled chan struct{}        // spool files wait for the mover
}

type tenantBatch struct {
	queue   []*pendingCapture
	running bool
	seg     segState
}

type pendingCapture struct {
	cap      *Capture
	sha      string
	size     int64
	dir      string          // spool directory to sync before the commit ("" when no file was kept)
	data     []byte          // the bytes, for the batcher to append to a segment (nil: none to keep, or a file)
	dup      *pendingCapture // the capture of the batch whose appended bytes this one shares
	slice    SpoolSlice      // where the batcher appended data
	revive   bool
	existing *StoredMessage
	done     chan error
}

func newIntake(s *Service) (*intake, error) {
	return &intake{s: s, batches: map[string]*tenantBatch{}, due: map[string]time.Time{}, lastAt: map[string]time.Time{},
		wake: make(chan struct{}, 1), spooled: make(chan struct{}, 1)}, nil
}

// spoolDir is the tenant's spool directory.
func (s *Service) spoolDir(tenantID string) string {
	return filepath.Join(s.cfg.DataDir, "archive", "spool", tenantID)
}

// Ingest is documented in seam.go. A message of at most segMessageMax
// bytes is read into memory and appended to a spool segment by the
// batcher (intake_segment.go); a larger one is streamed to its own spool
// file (temp + fsync + rename; its directory synced by the batcher).
func (s *Service) Ingest(ctx context.Context, ch *Channel, env Envelope, r io.Reader) (*Message, error) {
	dir := s.spoolDir(ch.TenantID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	small := min(s.cfg.MaxBytes, segMessageMax)
	buf := bytes.NewBuffer(make([]byte, 0, 64<<10))
	if _, err := buf.ReadFrom(io.LimitReader(r, small+1)); err != nil {
		return nil, fmt.Errorf("archive: reading the message: %w", err)
	}
	var (
		sum  string
		n    int64
		head []byte
		tmp  string // the large message's temporary file
	)
	switch {
	case int64(buf.Len()) <= small:
		b := buf.Bytes()
		h := sha256.Sum256(b)
		sum, n, head = hex.EncodeToString(h[:]), int64(len(b)), b[:min(len(b), parsePrefix)]
	case s.cfg.MaxBytes <= segMessageMax:
		return nil, &TooLarge{Limit: s.cfg.MaxBytes}
	default:
		var err error
		sum, n, head, tmp, err = s.spoolFile(dir, io.MultiReader(buf, r))
		if err != nil {
			return nil, err
		}
		defer func() {
			if tmp != "" {
				os.Remove(tmp)
			}
		}()
	}
	p := Parse(head)

	pc := &pendingCapture{sha: sum, size: n, done: make(chan error, 1)}
	existing, err := s.cfg.Store.ArchiveMessageBySHA(ctx, ch.TenantID, sum)
	switch {
	case err == nil && existing.PurgedAt == nil:
		pc.existing = existing // its bytes are kept: drop the new copy
	case err == nil || app.ErrorCode(err) == app.ENOTFOUND:
		pc.existing = existing
		pc.revive = existing != nil
		if tmp == "" {
			pc.data = buf.Bytes()
			break
		}
		if err := os.Rename(tmp, filepath.Join(dir, sum)); err != nil {
			return nil, err
		}
		tmp = ""
		pc.dir = dir
	default:
		return nil, err
	}
	if env.Journal == nil {
		env.Journal = p.Journal
	}
	envJSON, _ := json.Marshal(env)
	m := &Message{TenantID: ch.TenantID, SHA256: sum, Size: n, ChannelID: ch.ID,
		Subject: p.Subject, From: p.From, To: p.To, Date: p.Date, MessageID: p.MessageID,
		Custodians: custodians(p, env), Journal: p.Journal != nil}
	pc.cap = &Capture{Message: m, Body: p.Body, Envelope: string(envJSON)}
	s.intake.enqueue(pc)
	select {
	case err := <-pc.done:
		if err != nil {
			return nil, err
		}
	case <-ctx.Done():
		// The batch may still commit; the sender retries and the retry is a
		// second capture of the same content.
		return nil, ctx.Err()
	}
	return m, nil
}

// spoolFile streams a large message to a temporary file in dir, fsynced,
// and returns its hash, size, first parsePrefix bytes and path (removed
// on error).
func (s *Service) spoolFile(dir string, r io.Reader) (sum string, n int64, head []byte, tmp string, err error) {
	var rnd [8]byte
	rand.Read(rnd[:])
	path := filepath.Join(dir, ".tmp-"+hex.EncodeToString(rnd[:]))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", 0, nil, "", err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(path)
		}
	}()
	h := sha256.New()
	pb := &prefixBuffer{max: parsePrefix}
	n, err = io.Copy(io.MultiWriter(f, h, pb), io.LimitReader(r, s.cfg.MaxBytes+1))
	if err != nil {
		return "", 0, nil, "", fmt.Errorf("archive: reading the message: %w", err)
	}
	if n > s.cfg.MaxBytes {
		return "", 0, nil, "", &TooLarge{Limit: s.cfg.MaxBytes}
	}
	if err = f.Sync(); err != nil {
		return "", 0, nil, "", err
	}
	if err = f.Close(); err != nil {
		return "", 0, nil, "", err
	}
	return hex.EncodeToString(h.Sum(nil)), n, pb.b, path, nil
}

// custodians is every address the message concerns, lowercase, once each.
func custodians(p Parsed, env Envelope) []string {
	seen := map[string]bool{}
	var out []string
	add := func(a string) {
		a = normAddr(a)
		if a != "" && !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	for _, a := range p.Custodians {
		add(a)
	}
	add(p.From)
	for _, a := range p.To {
		add(a)
	}
	return out // env.RcptTo is the journal channel's own address: no custodian
}

func (in *intake) enqueue(pc *pendingCapture) {
	tenant := pc.cap.Message.TenantID
	in.mu.Lock()
	b := in.batches[tenant]
	if b == nil {
		b = &tenantBatch{}
		in.batches[tenant] = b
	}
	b.queue = append(b.queue, pc)
	if !b.running {
		b.running = true
		go in.commitLoop(tenant, b)
	}
	in.mu.Unlock()
}

// commitLoop commits the tenant's queue in batches until it is empty.
// It does not wait to gather a batch: what arrives while a batch commits
// is the next batch (group commit without an added delay). Two stages
// overlap: the next batch's spool writes (its messages appended to the
// segment and one fdatasync; the directory sync of large messages' files)
// run while the current batch's transaction commits; a batch's
// transaction starts only after its spool writes are durable, so a record
// never commits before its bytes.
func (in *intake) commitLoop(tenant string, b *tenantBatch) {
	var inflight chan struct{}
	for {
		in.mu.Lock()
		k, nb := 0, 0
		for k < len(b.queue) && k < batchMax && (k == 0 || nb+len(b.queue[k].data) <= batchBytesMax) {
			nb += len(b.queue[k].data)
			k++
		}
		q := b.queue[:k:k]
		b.queue = b.queue[k:]
		if len(q) == 0 {
			b.queue = nil
			if inflight == nil {
				b.running = false
				in.mu.Unlock()
				return
			}
			in.mu.Unlock()
			<-inflight
			inflight = nil
			continue
		}
		in.mu.Unlock()
		seg, err := in.appendBatch(tenant, b, q)
		if err == nil {
			err = syncDirs(q)
		}
		if inflight != nil {
			<-inflight
			inflight = nil
		}
		if err != nil {
			in.segDone(b, seg)
			for _, pc := range q {
				pc.done <- err
			}
			continue
		}
		done := make(chan struct{})
		inflight = done
		go func() {
			defer close(done)
			err := in.commit(tenant, q)
			in.segDone(b, seg)
			for _, pc := range q {
				pc.done <- err
			}
		}()
	}
}

// syncDirs makes the spool files' names of a batch durable.
func syncDirs(q []*pendingCapture) error {
	dirs := map[string]bool{}
	for _, pc := range q {
		if pc.dir != "" && !dirs[pc.dir] {
			dirs[pc.dir] = true
			if err := syncDir(pc.dir); err != nil {
				return fmt.Errorf("archive: syncing the spool: %w", err)
			}
		}
	}
	return nil
}

// commit appends a batch's records and writes its rows in one
// transaction (the spool files are durable already).
func (in *intake) commit(tenant string, q []*pendingCapture) error {
	ctx := context.Background()
	s := in.s
	// Assign message ids: an existing row's, one of this batch's, or a new one.
	// Records' times never go back: the batch's records carry its commit
	// time (batches of a tenant commit one after the other).
	at := s.cfg.Now().UTC().Truncate(time.Millisecond)
	in.mu.Lock()
	if last := in.lastAt[tenant]; at.Before(last) {
		at = last
	}
	in.lastAt[tenant] = at
	in.mu.Unlock()
	ids := map[string]*Capture{}
	recs := make([]*chain.Record, len(q))
	for i, pc := range q {
		m := pc.cap.Message
		pc.cap.At, m.CapturedAt = at, at
		switch {
		case ids[pc.sha] != nil:
			m.ID = ids[pc.sha].Message.ID
			m.RecordIndex = ids[pc.sha].Message.RecordIndex
		case pc.existing != nil:
			m.ID = pc.existing.ID
			m.RecordIndex = pc.existing.RecordIndex
			pc.cap.Revive = pc.revive
			pc.cap.Spool = pc.slice
		default:
			// A batch before this one may have stored the content since
			// Ingest looked (the batcher is the only writer of messages).
			if ex, err := s.cfg.Store.ArchiveMessageBySHA(ctx, tenant, pc.sha); err == nil {
				m.ID, m.RecordIndex = ex.ID, ex.RecordIndex
				pc.cap.Revive = ex.PurgedAt != nil
				pc.cap.Spool = pc.slice
			} else if app.ErrorCode(err) != app.ENOTFOUND {
				return err
			} else {
				m.ID = app.NewID(PrefixMessage)
				pc.cap.New = true
				pc.cap.Spool = pc.slice
				ids[pc.sha] = pc.cap
			}
		}
		recs[i] = &chain.Record{Type: chain.TypeMessage, Tenant: tenant, Message: m.ID, SHA256: pc.sha,
			Size: pc.size, Channel: m.ChannelID, At: pc.cap.At}
	}
	caps := make([]*Capture, len(q))
	for i, pc := range q {
		caps[i] = pc.cap
	}
	first, err := s.cfg.Store.AppendArchiveRecords(ctx, tenant, recs, func(tx *sql.Tx, first int64) error {
		for i, c := range caps {
			c.Index = first + int64(i)
			if c.New {
				c.Message.RecordIndex = c.Index
			}
		}
		return s.cfg.Store.CommitCapturesTx(ctx, tx, caps)
	})
	if err != nil {
		return fmt.Errorf("archive: committing %d captures: %w", len(q), err)
	}
	_ = first
	in.due1(tenant)
	for _, c := range []chan struct{}{in.wake, in.spooled} {
		select {
		case c <- struct{}{}:
		default:
		}
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// prefixBuffer keeps the first max bytes written to it.
type prefixBuffer struct {
	b   []byte
	max int
}

func (p *prefixBuffer) Write(b []byte) (int, error) {
	if room := p.max - len(p.b); room > 0 {
		p.b = append(p.b, b[:min(room, len(b))]...)
	}
	return len(b), nil
}

// OpenContent opens an archived message's exact bytes, from the spool or
// the blob store. A purged message is app.ENOTFOUND.
func (s *Service) OpenContent(ctx context.Context, tenantID, messageID string) (io.ReadCloser, error) {
	for try := 0; ; try++ {
		m, err := s.cfg.Store.ArchiveMessage(ctx, tenantID, messageID)
		if err != nil {
			return nil, err
		}
		if m.PurgedAt != nil {
			return nil, app.Errorf(app.ENOTFOUND, "message %s was purged", messageID)
		}
		if m.Content == "" {
			var f io.ReadCloser
			if m.Spool.Segment != "" {
				f, err = s.openSlice(tenantID, m.Spool)
			} else {
				f, err = os.Open(filepath.Join(s.spoolDir(tenantID), m.SHA256))
			}
			if errors.Is(err, os.ErrNotExist) && try == 0 {
				continue // the mover moved it meanwhile
			}
			return f, err
		}
		return s.openBlobs(ctx, tenantID, m.Content)
	}
}

// due1 schedules a checkpoint of the tenant (CONTRACT §14: within the
// interval of any new record), unless one is already due.
func (in *intake) due1(tenant string) {
	in.mu.Lock()
	if _, ok := in.due[tenant]; !ok {
		in.due[tenant] = in.s.cfg.Now()
	}
	in.mu.Unlock()
}

// appended tells the checkpointer that the tenant has records past its
// checkpoint other than captures (a hold, release or tombstone), so one is
// signed within CheckpointEvery as for captures.
func (s *Service) appended(tenant string) {
	in := s.intake
	in.due1(tenant)
	select {
	case in.wake <- struct{}{}:
	default:
	}
}
