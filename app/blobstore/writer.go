package blobstore

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"slices"
	"sync"
	"syscall"

	"backstop/app"

	chunkers "github.com/PlakarKorp/go-cdc-chunkers"
	_ "github.com/PlakarKorp/go-cdc-chunkers/chunkers/fastcdc"
)

// Chunking: items up to smallItem bytes are one blob; larger ones are cut by
// keyed FastCDC. Every message repeating an attachment adds the chunks
// where its own headers and MIME boundaries meet the attachment: with 32 KiB
// chunks, 20 messages carrying one 2 MiB attachment store 3.4 MiB (compressed
// and encrypted); 64 KiB chunks stored 4.5 MiB, and 1 MiB chunks would
// waste 8.5 MiB (research B5).
const (
	smallItem   = 128 << 10
	chunkMin    = 8 << 10
	chunkNormal = 32 << 10
	chunkMax    = 128 << 10
	chunkerAlgo = "fastcdc-v1.0.0"
)

// Buffers are pooled by size, and small items and blobs never take a large
// buffer: a backup of 50 mailboxes at once runs hundreds of PutItems and
// seals at a time, almost all of a few KiB, and 128 KiB each would be most
// of the appliance's memory.
const (
	smallRead  = 16 << 10 // PutItem's first read; most messages fit
	smallPlain = 32 << 10 // blobs up to this size are copied exactly to the sealers
)

var (
	firstPool  = sync.Pool{New: func() any { b := make([]byte, smallRead); return &b }}
	smallPool  = sync.Pool{New: func() any { b := make([]byte, smallItem+1); return &b }}
	chunkPool  = sync.Pool{New: func() any { b := make([]byte, 2*chunkMax); return &b }}
	plainPool  = sync.Pool{New: func() any { b := make([]byte, 0, chunkMax+1); return &b }}
	plainSmall = sync.Pool{New: func() any { b := make([]byte, 0, smallPlain); return &b }}
	sealedPool = sync.Pool{New: func() any { return new([]byte) }}
)

// Content is where an item's bytes are: their size, SHA-256 and the blobs
// that hold them in order.
type Content struct {
	Size   int64        `json:"size"`
	SHA256 string       `json:"sha256"`
	Blobs  []app.BlobID `json:"blobs"`
}

// Item is one entry of a snapshot's manifest: a message, file or folder
// with the content it had at the snapshot. Meta carries what the source
// kind keeps (subject, flags, UID, …), opaque to the store.
type Item struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	Path string `json:"path"`
	Name string `json:"name"`
	Content
	Meta json.RawMessage `json:"meta,omitempty"`
}

// WriterStats counts what a writer stored.
type WriterStats struct {
	Items       int64 // items put
	Bytes       int64 // their bytes
	NewBlobs    int64 // blobs not stored before
	NewBytes    int64 // plaintext bytes of those
	StoredBytes int64 // bytes of the packs written
	Packs       int64
}

// Writer is one backup session of a tenant: it stores items into packs on
// the tenant's current target and commits a snapshot. PutItem is safe for
// concurrent use; Commit and Close are called once, after the last PutItem.
type Writer struct {
	s        *Store
	tenantID string
	keys     *tenantKeys
	ts       *tenantState
	targetID string
	backend  Backend

	mu  sync.Mutex
	cur *packFile
	// blobs are the blobs stored (blobKnown) or referenced (blobUsed) by
	// this writer: garbage collection keeps the used ones.
	blobs   map[app.BlobID]uint8
	done    []indexPack // uploaded, not yet in an index file
	err     error
	stats   WriterStats
	closed  bool
	uploads chan *packFile
	pending sync.WaitGroup // packs handed to uploaders
	workers sync.WaitGroup
	// sealing counts the blobs being sealed, not yet in a pack (or whose
	// full pack is not yet with an uploader); inflight bounds them, so a
	// writer whose uploads are slow stops taking blobs.
	sealing  sync.WaitGroup
	inflight chan struct{}

	// repack: a collection's writer. Its packs are not added to the
	// catalogue on upload but returned in records, for the collection to
	// move blobs there in the same transaction that retires the old packs.
	repack  bool
	records []app.PackRecord
}

// Bits of Writer.blobs.
const (
	blobKnown uint8 = 1 << iota // stored by this writer (or being stored)
	blobUsed                    // referenced by this writer's items
)

// packFile is a pack being assembled: blobs are written to a temporary
// file as they come (on the target's own file system when it is local, in
// the appliance's temporary directory otherwise), so a writer's memory does
// not grow with the pack size or the uploads in flight.
type packFile struct {
	f       *os.File      // nil until the first blob
	w       *bufio.Writer // buffers writes to f
	size    int64
	hash    hash.Hash
	entries []app.BlobEntry
}

// discard removes the pack's temporary file.
func (p *packFile) discard() {
	if p != nil && p.f != nil {
		p.f.Close()
		os.Remove(p.f.Name())
		p.f = nil
	}
}

// NewWriter opens a session for the tenant on its current target, creating
// the tenant's data key on first use.
func (s *Store) NewWriter(ctx context.Context, tenantID string) (*Writer, error) {
	return s.newWriter(ctx, tenantID, false)
}

func (s *Store) newWriter(ctx context.Context, tenantID string, repack bool) (*Writer, error) {
	keys, err := s.tenantKeys(ctx, tenantID, true)
	if err != nil {
		return nil, err
	}
	targetID, b, err := s.cfg.Targets.ForTenant(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	if err := s.ensureTarget(ctx, targetID, b, tenantID); err != nil {
		s.cfg.Targets.WriteFailed(targetID, err)
		return nil, Failure(targetID, err)
	}
	w := &Writer{s: s, tenantID: tenantID, keys: keys, ts: s.tenant(tenantID), targetID: targetID, backend: b,
		blobs: map[app.BlobID]uint8{}, uploads: make(chan *packFile), repack: repack,
		inflight: make(chan struct{}, 2*cap(s.sealSlots))}
	w.cur = w.newPack()
	if !repack {
		w.ts.rw.Lock()
		w.ts.writers[w] = struct{}{}
		if w.ts.collecting {
			w.ts.opened++
		}
		w.ts.rw.Unlock()
	}
	for range s.cfg.Uploads {
		w.workers.Add(1)
		go w.uploader()
	}
	return w, nil
}

// TargetID is the target this writer stores to.
func (w *Writer) TargetID() string { return w.targetID }

// Stats returns what the writer stored so far.
func (w *Writer) Stats() WriterStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

func (w *Writer) newPack() *packFile { return &packFile{hash: sha256.New()} }

// spool returns a new temporary file for a pack: on the target's file
// system if it can take one, else in the appliance's temporary directory.
func (w *Writer) spool() (*os.File, error) {
	if sp, ok := w.backend.(Spooler); ok {
		return sp.SpoolFile()
	}
	return os.CreateTemp(w.s.cfg.TempDir, spoolPrefix+"*")
}

func (w *Writer) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// PutItem stores the bytes of r as one item and returns where they are. It
// reads r to its end, never holding more than one chunk of it in memory.
func (w *Writer) PutItem(ctx context.Context, r io.Reader) (Content, error) {
	if err := w.failed(); err != nil {
		return Content{}, err
	}
	h := sha256.New()
	var c Content
	fp := firstPool.Get().(*[]byte)
	defer firstPool.Put(fp)
	small := *fp
	n, err := io.ReadFull(r, small)
	if err == nil { // more than smallRead: read on up to smallItem+1
		sp := smallPool.Get().(*[]byte)
		defer smallPool.Put(sp)
		copy(*sp, small)
		small = *sp
		var m int
		m, err = io.ReadFull(r, small[n:])
		n += m
	}
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		if n > 0 {
			if err := w.putBlob(ctx, &c, h, small[:n]); err != nil {
				return Content{}, err
			}
		}
	case err != nil:
		return Content{}, err
	default:
		cp := chunkPool.Get().(*[]byte)
		defer chunkPool.Put(cp)
		ch, err := chunkers.NewChunkerBuffer(chunkerAlgo, io.MultiReader(bytes.NewReader(small[:n]), r),
			&chunkers.ChunkerOpts{MinSize: chunkMin, NormalSize: chunkNormal, MaxSize: chunkMax, Key: w.keys.chunker}, *cp)
		if err != nil {
			return Content{}, err
		}
		for {
			chunk, err := ch.Next()
			if len(chunk) > 0 {
				if err := w.putBlob(ctx, &c, h, chunk); err != nil {
					return Content{}, err
				}
			}
			if err == io.EOF {
				break
			} else if err != nil {
				return Content{}, err
			}
		}
	}
	c.SHA256 = hex.EncodeToString(h.Sum(nil))
	w.mu.Lock()
	w.stats.Items++
	w.stats.Bytes += c.Size
	w.mu.Unlock()
	return c, nil
}

func (w *Writer) putBlob(ctx context.Context, c *Content, h io.Writer, plain []byte) error {
	h.Write(plain)
	id := w.keys.blobID(plain)
	c.Size += int64(len(plain))
	c.Blobs = append(c.Blobs, id)
	return w.add(ctx, app.BlobData, id, plain)
}

// add stores a blob unless the tenant has it already. A blob found in the
// catalogue is marked used under the tenant's read lock, so a collection
// deciding under the write lock sees it.
func (w *Writer) add(ctx context.Context, typ byte, id app.BlobID, plain []byte) error {
	w.mu.Lock()
	if w.err != nil {
		defer w.mu.Unlock()
		return w.err
	}
	if w.blobs[id]&blobKnown != 0 {
		w.blobs[id] |= blobUsed
		w.mu.Unlock()
		return nil
	}
	w.mu.Unlock()

	w.ts.rw.RLock()
	found, err := w.s.cfg.Catalog.LookupBlobs(ctx, w.tenantID, []app.BlobID{id})
	if err == nil && len(found) > 0 {
		w.mu.Lock()
		w.blobs[id] |= blobUsed
		w.mu.Unlock()
	}
	w.ts.rw.RUnlock()
	if err != nil || len(found) > 0 {
		return err
	}

	// Reserve the blob, then seal it beside the caller's chunking and
	// hashing: compression and encryption take one of the store's sealing
	// slots (GOMAXPROCS for every writer together), and the blob is copied
	// only once it has one, so the plaintext held for sealing is bounded
	// by the CPUs, not by the writers open.
	w.mu.Lock()
	if w.blobs[id]&blobKnown != 0 { // another goroutine is storing it
		w.blobs[id] |= blobUsed
		w.mu.Unlock()
		return nil
	}
	w.blobs[id] = blobKnown | blobUsed
	w.stats.NewBlobs++
	w.stats.NewBytes += int64(len(plain))
	w.mu.Unlock()
	select {
	case w.inflight <- struct{}{}:
	case <-ctx.Done():
		w.setErr(ctx.Err())
		return ctx.Err()
	}
	select {
	case w.s.sealSlots <- struct{}{}:
	case <-ctx.Done():
		<-w.inflight
		w.setErr(ctx.Err())
		return ctx.Err()
	}
	job := sealJob{typ: typ, id: id}
	if len(plain) <= smallPlain {
		job.buf, job.pool = plainSmall.Get().(*[]byte), &plainSmall
	} else {
		job.buf, job.pool = plainPool.Get().(*[]byte), &plainPool
	}
	job.plain = append((*job.buf)[:0], plain...)
	w.sealing.Add(1)
	go w.seal(job)
	return nil
}

// sealJob is one new blob on its way to a pack.
type sealJob struct {
	typ   byte
	id    app.BlobID
	plain []byte
	buf   *[]byte // plain's pooled buffer
	pool  *sync.Pool
}

// seal compresses and encrypts a blob, holding a sealing slot of the store,
// and appends it to the open pack. A pack that this fills goes to the
// uploaders after the slot is given back: a writer whose uploads are slow
// holds up its own blobs only.
func (w *Writer) seal(j sealJob) {
	defer w.sealing.Done()
	defer func() { <-w.inflight }()
	full, err := w.sealAppend(j)
	<-w.s.sealSlots
	if err != nil {
		w.s.cfg.Targets.WriteFailed(w.targetID, err)
		return
	}
	w.send(context.Background(), full)
}

func (w *Writer) sealAppend(j sealJob) (*packFile, error) {
	defer j.pool.Put(j.buf)
	if w.failed() != nil {
		return nil, nil
	}
	sp := sealedPool.Get().(*[]byte)
	defer sealedPool.Put(sp)
	sealed := w.keys.sealBlob((*sp)[:0], j.typ, j.id, j.plain)
	*sp = sealed[:0]
	w.mu.Lock()
	defer w.mu.Unlock()
	full, err := w.appendLocked(j.typ, j.id, sealed, int64(len(j.plain)))
	if err != nil && w.err == nil {
		w.err = err
	}
	return full, err
}

// appendLocked writes a stored blob to the open pack (w.mu held) and
// returns the pack if that filled it.
func (w *Writer) appendLocked(typ byte, id app.BlobID, stored []byte, rawLength int64) (*packFile, error) {
	p := w.cur
	if p.f == nil {
		f, err := w.spool()
		if err != nil {
			return nil, spoolFailure(w.targetID, err)
		}
		p.f, p.w = f, bufio.NewWriterSize(f, 64<<10)
	}
	if _, err := p.w.Write(stored); err != nil {
		return nil, spoolFailure(w.targetID, err)
	}
	p.hash.Write(stored)
	w.blobs[id] |= blobKnown
	p.entries = append(p.entries, app.BlobEntry{ID: id, Type: typ, Offset: p.size, Length: int64(len(stored)), RawLength: rawLength})
	p.size += int64(len(stored))
	if p.size < int64(w.s.cfg.PackSize) {
		return nil, nil
	}
	w.cur = w.newPack()
	w.pending.Add(1)
	return p, nil
}

// spoolFailure is the failure of writing a pack's temporary file: a full
// disk is storage.full like a full target.
func spoolFailure(targetID string, err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		err = fmt.Errorf("%w (%v)", ErrFull, err)
	}
	return Failure(targetID, fmt.Errorf("writing a pack: %w", err))
}

// send hands a full pack to the uploaders; it blocks while they are busy,
// which bounds the memory a writer holds.
func (w *Writer) send(ctx context.Context, p *packFile) error {
	if p == nil {
		return nil
	}
	select {
	case w.uploads <- p:
		return nil
	case <-ctx.Done():
		p.discard()
		w.pending.Done()
		w.setErr(ctx.Err())
		return ctx.Err()
	}
}

// appendStored adds a blob exactly as stored elsewhere (a repack: the
// ciphertext is bound to the blob's type and id, not to its place).
func (w *Writer) appendStored(ctx context.Context, e app.BlobEntry, stored []byte) error {
	w.mu.Lock()
	if w.err != nil {
		defer w.mu.Unlock()
		return w.err
	}
	if w.blobs[e.ID]&blobKnown != 0 {
		w.mu.Unlock()
		return nil
	}
	full, err := w.appendLocked(e.Type, e.ID, stored, e.RawLength)
	if err != nil {
		w.err = err
	}
	w.mu.Unlock()
	if err != nil {
		return err
	}
	return w.send(ctx, full)
}

func (w *Writer) setErr(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	w.mu.Unlock()
}

// uploader writes packs to the target, then records them in the catalogue:
// a pack is durable before anything names it.
func (w *Writer) uploader() {
	defer w.workers.Done()
	for p := range w.uploads {
		w.upload(p)
		p.discard()
		w.pending.Done()
	}
}

func (w *Writer) upload(p *packFile) {
	if w.failed() != nil {
		return
	}
	ctx := context.Background()
	trailer := w.keys.packTrailer(p.entries)
	_, err := p.w.Write(trailer)
	if err == nil {
		err = p.w.Flush()
	}
	if err != nil {
		w.setErr(spoolFailure(w.targetID, err))
		return
	}
	p.hash.Write(trailer)
	size := p.size + int64(len(trailer))
	id := hex.EncodeToString(p.hash.Sum(nil))
	name := packName(w.tenantID, id)
	if sp, ok := w.backend.(Spooler); ok {
		err = sp.CreateFrom(ctx, name, p.f)
		p.f = nil // CreateFrom closed and removed it
	} else if _, err = p.f.Seek(0, io.SeekStart); err == nil {
		err = w.backend.Create(ctx, name, p.f, size)
	}
	if errors.Is(err, ErrExists) {
		err = nil // the same bytes: the name is their hash
	}
	if err != nil {
		w.s.cfg.Targets.WriteFailed(w.targetID, err)
		w.setErr(Failure(w.targetID, fmt.Errorf("writing a pack to storage target: %w", err)))
		return
	}
	rec := app.PackRecord{TenantID: w.tenantID, PackID: id, TargetID: w.targetID, Size: size,
		CreatedAt: w.s.now(), Blobs: slices.Clone(p.entries)}
	if !w.repack {
		if err := w.s.cfg.Catalog.AddPacks(ctx, []app.PackRecord{rec}); err != nil {
			w.setErr(err)
			return
		}
	}
	w.mu.Lock()
	if w.repack {
		w.records = append(w.records, rec)
	}
	w.done = append(w.done, indexPack{ID: id, Size: rec.Size, Entries: rec.Blobs})
	w.stats.StoredBytes += rec.Size
	w.stats.Packs++
	w.mu.Unlock()
}

// Flush writes the open pack and waits for every upload, then writes an
// index file for the packs uploaded since the last one. After Flush
// returns nil, everything put so far is durable and in the catalogue.
func (w *Writer) Flush(ctx context.Context) error {
	w.sealing.Wait()
	w.mu.Lock()
	var p *packFile
	if len(w.cur.entries) > 0 && w.err == nil {
		p, w.cur = w.cur, w.newPack()
		w.pending.Add(1)
	}
	w.mu.Unlock()
	if err := w.send(ctx, p); err != nil {
		return err
	}
	w.pending.Wait()
	if err := w.failed(); err != nil {
		return err
	}
	w.mu.Lock()
	done := w.done
	w.done = nil
	w.mu.Unlock()
	if len(done) == 0 {
		return nil
	}
	if err := w.s.writeIndex(ctx, w.keys, w.backend, w.tenantID, done); err != nil {
		w.s.cfg.Targets.WriteFailed(w.targetID, err)
		return Failure(w.targetID, err)
	}
	return nil
}

// writeIndex stores an index file listing packs. Its name is the hash of
// its sealed bytes.
func (s *Store) writeIndex(ctx context.Context, keys *tenantKeys, b Backend, tenantID string, packs []indexPack) error {
	body := keys.sealMeta(adIndex, encodeIndex(packs))
	err := createBytes(ctx, b, indexName(tenantID, packID(body)), body)
	if errors.Is(err, ErrExists) {
		return nil
	}
	return wrapf(err, "writing an index file")
}

// Close ends the session. Packs already uploaded stay (the catalogue has
// them; without a snapshot they are garbage for the next collection). It
// is safe to call after Commit and more than once.
func (w *Writer) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.mu.Unlock()
	w.sealing.Wait()
	close(w.uploads)
	w.workers.Wait()
	w.mu.Lock()
	w.cur.discard() // blobs put but never flushed: nothing names them
	w.mu.Unlock()
	if w.repack {
		return nil
	}
	w.ts.rw.Lock()
	delete(w.ts.writers, w)
	if w.ts.collecting {
		for id, b := range w.blobs {
			if b&blobUsed != 0 {
				w.ts.closedUsed[id] = struct{}{}
			}
		}
	}
	w.ts.rw.Unlock()
	return nil
}
