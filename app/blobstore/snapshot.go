package blobstore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"backstop/app"

	chunkers "github.com/PlakarKorp/go-cdc-chunkers"
)

// SnapshotSpec describes the snapshot a writer commits.
type SnapshotSpec struct {
	ID                string // optional; a new sn_ id by default
	ProtectedObjectID string
	JobID             string
	At                time.Time // default now
	AddedItems        int64
	RemovedItems      int64
}

// snapshotFile is the manifest stored on the target.
type snapshotFile struct {
	Version int          `json:"version"`
	Snap    app.Snapshot `json:"snapshot"`
	Tree    []app.BlobID `json:"tree"`
}

// Commit writes the snapshot's item manifest (items yields every item, in
// the order browsing should list them), flushes every pack, and stores the
// manifest before recording the snapshot in the catalogue. The snapshot is
// complete and readable once Commit returns; a crash before that leaves no
// snapshot (or a complete one, found again by the next collection).
func (w *Writer) Commit(ctx context.Context, spec SnapshotSpec, items func(yield func(Item) error) error) (*app.Snapshot, error) {
	snap := &app.Snapshot{ID: spec.ID, ProtectedObjectID: spec.ProtectedObjectID, TenantID: w.tenantID,
		JobID: spec.JobID, AddedItems: spec.AddedItems, RemovedItems: spec.RemovedItems, TargetID: w.targetID}
	if snap.ID == "" {
		snap.ID = app.NewID(app.PrefixSnapshot)
	}
	at := spec.At
	if at.IsZero() {
		at = w.s.now()
	}
	snap.At = app.At(at)

	// The manifest is JSON lines cut by the chunker into tree blobs, so an
	// unchanged run of items is stored once across snapshots.
	pr, pw := io.Pipe()
	go func() {
		bw := bufio.NewWriterSize(pw, 64<<10)
		enc := json.NewEncoder(bw)
		err := items(func(it Item) error {
			snap.Items++
			snap.Bytes += it.Size
			return enc.Encode(it)
		})
		if err == nil {
			err = bw.Flush()
		}
		pw.CloseWithError(err)
	}()
	tree, err := w.putTree(ctx, pr)
	pr.CloseWithError(errors.New("manifest abandoned"))
	if err != nil {
		return nil, err
	}
	if err := w.Flush(ctx); err != nil {
		return nil, err
	}
	body, _ := json.Marshal(snapshotFile{Version: formatVersion, Snap: *snap, Tree: tree})
	sealed := w.keys.sealMeta(adSnapshot(snap.ID), body)
	if err := createBytes(ctx, w.backend, snapshotName(w.tenantID, snap.ID), sealed); err != nil {
		w.s.cfg.Targets.WriteFailed(w.targetID, err)
		return nil, Failure(w.targetID, fmt.Errorf("writing the snapshot manifest: %w", err))
	}
	if err := w.s.cfg.Catalog.AddSnapshot(ctx, snap, hexIDs(tree)); err != nil && app.ErrorCode(err) != app.ECONFLICT {
		return nil, err
	}
	return snap, nil
}

func (w *Writer) putTree(ctx context.Context, r io.Reader) ([]app.BlobID, error) {
	cp := chunkPool.Get().(*[]byte)
	defer chunkPool.Put(cp)
	ch, err := chunkers.NewChunkerBuffer(chunkerAlgo, r,
		&chunkers.ChunkerOpts{MinSize: chunkMin, NormalSize: chunkNormal, MaxSize: chunkMax, Key: w.keys.chunker}, *cp)
	if err != nil {
		return nil, err
	}
	var tree []app.BlobID
	for {
		chunk, err := ch.Next()
		if len(chunk) > 0 {
			id := w.keys.blobID(chunk)
			if err := w.add(ctx, app.BlobTree, id, chunk); err != nil {
				return nil, err
			}
			tree = append(tree, id)
		}
		if err == io.EOF {
			return tree, nil
		} else if err != nil {
			return nil, err
		}
	}
}

func hexIDs(ids []app.BlobID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
}

func parseIDs(hexes []string) ([]app.BlobID, error) {
	out := make([]app.BlobID, len(hexes))
	for i, h := range hexes {
		id, err := app.ParseBlobID(h)
		if err != nil {
			return nil, err
		}
		out[i] = id
	}
	return out, nil
}

// Items calls fn for every item of a snapshot, in manifest order.
func (s *Store) Items(ctx context.Context, snapshotID string, fn func(Item) error) error {
	snap, tree, err := s.cfg.Catalog.Snapshot(ctx, snapshotID)
	if err != nil {
		return err
	}
	ids, err := parseIDs(tree)
	if err != nil {
		return fmt.Errorf("snapshot %s: %w (%v)", snapshotID, ErrCorrupt, err)
	}
	r, err := s.openBlobs(ctx, snap.TenantID, app.BlobTree, ids)
	if err != nil {
		return err
	}
	defer r.Close()
	dec := json.NewDecoder(bufio.NewReaderSize(r, 64<<10))
	for {
		var it Item
		if err := dec.Decode(&it); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("snapshot %s manifest: %w", snapshotID, err)
		}
		if err := fn(it); err != nil {
			return err
		}
	}
}

// Open returns the exact bytes of an item of the tenant. Every blob is
// authenticated and checked against its id before any of its bytes are
// returned, and the whole item against its SHA-256 and size at the end: a
// damaged item ends in an error wrapping ErrCorrupt, never in bad data
// reported as good.
func (s *Store) Open(ctx context.Context, tenantID string, c Content) (io.ReadCloser, error) {
	r, err := s.openBlobs(ctx, tenantID, app.BlobData, c.Blobs)
	if err != nil {
		return nil, err
	}
	return newVerifyingReader(r, c), nil
}

// openBlobs reads blobs in order as one stream.
func (s *Store) openBlobs(ctx context.Context, tenantID string, typ byte, ids []app.BlobID) (io.ReadCloser, error) {
	keys, err := s.tenantKeys(ctx, tenantID, false)
	if err != nil {
		return nil, err
	}
	locs, err := s.cfg.Catalog.LookupBlobs(ctx, tenantID, ids)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		if _, ok := locs[id]; !ok {
			return nil, fmt.Errorf("blob %x is not in the catalogue: %w", id[:8], ErrNotFound)
		}
	}
	return &blobReader{ctx: ctx, s: s, keys: keys, tenantID: tenantID, typ: typ, ids: ids, locs: locs}, nil
}

type blobReader struct {
	ctx      context.Context
	s        *Store
	keys     *tenantKeys
	tenantID string
	typ      byte
	ids      []app.BlobID
	locs     map[app.BlobID]app.BlobLocation
	buf      []byte
	err      error
}

func (r *blobReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		if len(r.ids) == 0 {
			return 0, io.EOF
		}
		id := r.ids[0]
		r.ids = r.ids[1:]
		r.buf, r.err = r.s.readBlob(r.ctx, r.keys, r.tenantID, r.typ, id, r.locs[id])
		if r.err != nil {
			return 0, r.err
		}
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

func (r *blobReader) Close() error { r.err = errors.New("blobstore: reader closed"); return nil }

// readBlob fetches one blob from its pack and opens it.
func (s *Store) readBlob(ctx context.Context, keys *tenantKeys, tenantID string, typ byte, id app.BlobID, loc app.BlobLocation) ([]byte, error) {
	b, err := s.cfg.Targets.Backend(ctx, loc.TargetID)
	if err != nil {
		return nil, err
	}
	stored, err := readAll(ctx, b, packName(tenantID, loc.PackID), loc.Offset, loc.Length, maxBlobBytes+blobOverhead)
	if err != nil {
		return nil, Failure(loc.TargetID, err)
	}
	plain, err := keys.openBlob(typ, id, stored, loc.RawLength)
	if err != nil {
		return nil, fmt.Errorf("pack %s: %w", loc.PackID[:12], err)
	}
	return plain, nil
}

// verifyingReader checks an item's size and SHA-256 at its end.
type verifyingReader struct {
	r    io.ReadCloser
	want Content
	h    hashWriter
	n    int64
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	v.h.Write(p[:n])
	v.n += int64(n)
	if err == io.EOF {
		if v.n != v.want.Size || v.h.hex() != v.want.SHA256 {
			return n, fmt.Errorf("item: %w (size or SHA-256 differs from the catalogue)", ErrCorrupt)
		}
	}
	return n, err
}

func (v *verifyingReader) Close() error { return v.r.Close() }

// ForgetSnapshots removes snapshots: the manifest on the target first, then
// the row, so a crash between the two leaves a row whose manifest is gone
// (forgotten again next time), never a manifest the next collection would
// bring back. Their blobs are freed by the next collection.
func (s *Store) ForgetSnapshots(ctx context.Context, tenantID string, ids []string) error {
	for _, id := range ids {
		snap, _, err := s.cfg.Catalog.Snapshot(ctx, id)
		if app.ErrorCode(err) == app.ENOTFOUND {
			continue
		} else if err != nil {
			return err
		}
		if snap.TenantID != tenantID {
			return app.NotFound("snapshot")
		}
		b, err := s.cfg.Targets.Backend(ctx, snap.TargetID)
		if err != nil {
			return err
		}
		if err := b.Delete(ctx, snapshotName(tenantID, id)); err != nil {
			return Failure(snap.TargetID, err)
		}
		if err := s.cfg.Catalog.DeleteSnapshot(ctx, tenantID, id); err != nil {
			return err
		}
	}
	return nil
}

// loadSnapshotFile reads and opens a manifest from a target.
func (s *Store) loadSnapshotFile(ctx context.Context, keys *tenantKeys, b Backend, tenantID, id string) (*snapshotFile, error) {
	sealed, err := readAll(ctx, b, snapshotName(tenantID, id), 0, -1, 64<<20)
	if err != nil {
		return nil, err
	}
	body, err := keys.openMeta(adSnapshot(id), sealed)
	if err != nil {
		return nil, err
	}
	var f snapshotFile
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&f); err != nil {
		return nil, fmt.Errorf("snapshot %s: %w (%v)", id, ErrCorrupt, err)
	}
	if f.Version != formatVersion || f.Snap.ID != id || f.Snap.TenantID != tenantID {
		return nil, fmt.Errorf("snapshot %s: %w (names another snapshot)", id, ErrCorrupt)
	}
	return &f, nil
}

func newVerifyingReader(r io.ReadCloser, want Content) *verifyingReader {
	return &verifyingReader{r: r, want: want}
}
