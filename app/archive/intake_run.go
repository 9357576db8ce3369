package archive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"backstop/app"
	"backstop/app/archive/chain"
	"backstop/app/blobstore"

	"golang.org/x/mod/sumdb/tlog"
)

// moveBatch is how many spooled messages the mover puts per blob store
// writer (its packs are closed at the blob store's pack size).
const moveBatch = 2000

// run is the intake's background work: the checkpointer (a signed
// checkpoint within CheckpointEvery of a tenant's first record it does
// not cover, time-stamped when a TSA is set) and the spool mover.
func (in *intake) run(ctx context.Context) {
	s := in.s
	// At start, every tenant with records past its checkpoint is due now.
	if tenants, err := s.cfg.Store.ArchiveTenants(ctx); err == nil {
		in.mu.Lock()
		for _, t := range tenants {
			in.due[t] = time.Time{}
		}
		in.mu.Unlock()
	} else if ctx.Err() == nil {
		s.log.Error("archive: listing tenants", slog.Any("error", err))
	}
	go in.moveLoop(ctx)
	tick := min(max(s.cfg.CheckpointEvery/10, 10*time.Millisecond), time.Second)
	t := time.NewTicker(tick)
	defer t.Stop()
	lastStamp := time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-in.wake:
		}
		now := s.cfg.Now()
		in.mu.Lock()
		var due []string
		for tenant, first := range in.due {
			// Half the interval: signing and a slow tick stay within it.
			if !now.Before(first.Add(s.cfg.CheckpointEvery / 2)) {
				due = append(due, tenant)
				delete(in.due, tenant)
			}
		}
		in.mu.Unlock()
		for _, tenant := range due {
			if _, err := in.checkpoint(ctx, tenant); err != nil && ctx.Err() == nil {
				s.log.Error("archive: signing a checkpoint", slog.String("tenantId", tenant), slog.Any("error", err))
				in.mu.Lock()
				if _, ok := in.due[tenant]; !ok {
					in.due[tenant] = now
				}
				in.mu.Unlock()
			}
		}
		if s.cfg.TSAURL != "" && now.Sub(lastStamp) > time.Minute {
			lastStamp = now
			in.stampPending(ctx)
		}
	}
}

// checkpoint signs a checkpoint of the tenant's current size when its
// latest one is smaller, and returns the latest.
func (in *intake) checkpoint(ctx context.Context, tenant string) (*StoredCheckpoint, error) {
	s := in.s
	in.cpMu.Lock()
	defer in.cpMu.Unlock()
	size, err := s.cfg.Store.ArchiveSize(ctx, tenant)
	if err != nil {
		return nil, err
	}
	latest, err := s.cfg.Store.LatestArchiveCheckpoint(ctx, tenant)
	if err != nil && app.ErrorCode(err) != app.ENOTFOUND {
		return nil, err
	}
	if size == 0 || (latest != nil && latest.Size >= size) {
		return latest, nil
	}
	root, err := tlog.TreeHash(size, s.cfg.Store.ArchiveHashReader(tenant))
	if err != nil {
		return nil, err
	}
	note, err := s.cfg.Signer.Sign(chain.Checkpoint{Origin: s.cfg.Origin(tenant), Size: size, Root: root})
	if err != nil {
		return nil, err
	}
	c := &StoredCheckpoint{TenantID: tenant, Size: size, Root: root[:], Note: note, At: s.cfg.Now().UTC()}
	if s.cfg.TSAURL != "" {
		in.stamp(ctx, c)
	}
	if err := s.cfg.Store.InsertArchiveCheckpoint(ctx, c); err != nil {
		return nil, err
	}
	return c, nil
}

// stamp asks the TSA for a time-stamp of c's body (as the evidence
// report's checkpointStamp is checked); a failure is
// logged and retried later (stampPending).
func (in *intake) stamp(ctx context.Context, c *StoredCheckpoint) bool {
	s := in.s
	client := s.cfg.HTTP
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	cp, err := chain.OpenCheckpoint(c.Note, s.cfg.Signer.VerifierKey(), "")
	if err != nil {
		return false
	}
	tsr, gen, err := chain.Stamp(ctx, client, s.cfg.TSAURL, []byte(cp.Body()))
	if err != nil {
		s.log.Warn("archive: time-stamping a checkpoint (retried later)", slog.String("tenantId", c.TenantID),
			slog.Int64("size", c.Size), slog.Any("error", err))
		return false
	}
	c.TSR, c.TSATime = tsr, &gen
	return true
}

func (in *intake) stampPending(ctx context.Context) {
	s := in.s
	tenants, err := s.cfg.Store.ArchiveTenants(ctx)
	if err != nil {
		return
	}
	for _, t := range tenants {
		cps, err := s.cfg.Store.UnstampedArchiveCheckpoints(ctx, t)
		if err != nil {
			continue
		}
		for _, c := range cps {
			if in.stamp(ctx, c) {
				if err := s.cfg.Store.SetArchiveCheckpointStamp(ctx, t, c.Size, c.TSR, *c.TSATime); err != nil {
					s.log.Error("archive: storing a time-stamp", slog.Any("error", err))
				}
			} else {
				break
			}
		}
	}
}

// moveLoop moves spooled messages into the blob store, after commits and
// every minute (a failed move is retried).
func (in *intake) moveLoop(ctx context.Context) {
	s := in.s
	if s.cfg.Blobs == nil {
		return // tests without a blob store keep messages in the spool
	}
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		tenants, err := s.cfg.Store.ArchiveTenants(ctx)
		if err == nil {
			for _, tenant := range tenants {
				if err := in.move(ctx, tenant); err != nil && ctx.Err() == nil {
					s.log.Error("archive: moving spooled messages to the blob store", slog.String("tenantId", tenant), slog.Any("error", err))
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-in.spooled:
			// Let a burst gather into larger packs.
			select {
			case <-ctx.Done():
				return
			case <-time.After(5 * time.Second):
			}
		}
	}
}

// move puts the spooled messages of a tenant into the blob store,
// moveBatch at a time, then deletes the segments nothing needs any more
// (cleanSegments). Blob store Flush makes the packs durable and
// catalogued; the content is set while the writer is still open (so a
// garbage collection keeps its blobs until the rows name them, then
// through ExtraRoots), and the spool files are removed (and segments
// become deletable) only after that commit. No snapshot is made.
func (in *intake) move(ctx context.Context, tenant string) error {
	s := in.s
	for {
		ms, err := s.cfg.Store.ArchiveSpooled(ctx, tenant, moveBatch)
		if err != nil {
			return err
		}
		if len(ms) > 0 {
			if err := in.moveSome(ctx, tenant, ms); err != nil {
				return err
			}
		}
		if len(ms) < moveBatch {
			break
		}
	}
	_, err := in.cleanSegments(ctx, tenant)
	return err
}

func (in *intake) moveSome(ctx context.Context, tenant string, ms []*StoredMessage) error {
	s := in.s
	w, err := s.cfg.Blobs.NewWriter(ctx, tenant)
	if err != nil {
		return err
	}
	defer w.Close()
	content := map[string]string{}
	var files []string
	segs := map[string]*os.File{}
	defer func() {
		for _, f := range segs {
			f.Close()
		}
	}()
	for _, m := range ms {
		var r io.Reader
		var file *os.File // a large message's own spool file
		if sl := m.Spool; sl.Segment != "" {
			f := segs[sl.Segment]
			if f == nil {
				var err error
				f, err = os.Open(filepath.Join(s.spoolDir(tenant), sl.Segment))
				if errors.Is(err, os.ErrNotExist) {
					continue // lost: the verify job reports it
				} else if err != nil {
					return err
				}
				segs[sl.Segment] = f
			}
			r = io.NewSectionReader(f, sl.Offset, sl.Length)
		} else {
			var err error
			file, err = os.Open(filepath.Join(s.spoolDir(tenant), m.SHA256))
			if errors.Is(err, os.ErrNotExist) {
				continue // purged meanwhile, or lost: the verify job reports it
			} else if err != nil {
				return err
			}
			r = file
		}
		c, err := w.PutItem(ctx, r)
		if file != nil {
			file.Close()
		}
		if err != nil {
			return err
		}
		if c.SHA256 != m.SHA256 || c.Size != m.Size {
			s.log.Error("archive: a spooled message does not match its record (left in the spool for the verify job)",
				slog.String("tenantId", tenant), slog.String("messageId", m.ID))
			continue
		}
		b, _ := json.Marshal(c)
		content[m.ID] = string(b)
		if file != nil {
			files = append(files, file.Name())
		}
	}
	if err := w.Flush(ctx); err != nil {
		return err
	}
	if err := s.cfg.Store.SetArchiveContent(ctx, tenant, content); err != nil {
		return err
	}
	for _, f := range files {
		os.Remove(f)
	}
	return nil
}

func (s *Service) openBlobs(ctx context.Context, tenantID, content string) (io.ReadCloser, error) {
	var c blobstore.Content
	if err := json.Unmarshal([]byte(content), &c); err != nil {
		return nil, fmt.Errorf("archive: message content: %w", err)
	}
	if s.cfg.Blobs == nil {
		return nil, errors.New("archive: no blob store")
	}
	return s.cfg.Blobs.Open(ctx, tenantID, c)
}
