package archive

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Spool segments. A message of at most segMessageMax bytes is read into
// memory by Ingest and appended whole, by the group-commit batcher, to its
// tenant's current segment data_dir/archive/spool/<tenant>/seg-<n> (opened
// O_APPEND, written only by the batcher): a batch's messages are appended,
// the segment is fdatasynced once, then the batch's one transaction
// commits their records and rows (each row naming its slice: segment,
// offset, length), then every Ingest of the batch returns. A crash after
// the fdatasync and before the commit leaves bytes no row names: they were
// never acknowledged and go with the segment. A new segment is started
// once the current one has segmentSize bytes (a batch is never split, so
// a segment may pass it by one batch); its creation is followed by a
// directory fsync before anything in it is committed.
//
// A segment is deleted (cleanSegments: by the mover after each pass and by
// the purge) once no row whose bytes are only there (content empty, not
// purged) names it, no batch is appending to it or committing rows naming
// it, and, for the current segment, it is idle (it is then retired: the
// next batch starts a new one). The rows naming it get their spool_*
// columns cleared first, so no row ever names a deleted segment.
//
// A purged message's slice is wiped at once (hole punched, or zeroed where
// the file system cannot punch holes, then fdatasynced) even if the
// segment must stay for other messages; bytes no row names (above) and the
// copy a batch appended of content the batch before it had just stored
// stay until the segment is deleted, which the mover does as soon as every
// message of it is in the blob store.
const (
	// segMessageMax: larger messages are their own spool file (streamed,
	// never held in memory).
	segMessageMax = 1 << 20
	// batchBytesMax bounds the bytes of one batch (at least one message).
	batchBytesMax = 32 << 20
	segPrefix     = "seg-"
)

// segmentSize is the size past which the batcher starts a new segment (a
// variable for tests).
var segmentSize int64 = 64 << 20

// segFile is a tenant's current segment, as the batcher appends to it.
type segFile struct {
	name string
	f    *os.File
	size int64 // bytes appended (the batcher's only)
}

// segState is a tenant's segments as this process uses them (guarded by
// intake.mu, except next: the batcher's only).
type segState struct {
	cur  *segFile
	next int64            // number of the next segment; 0: not chosen yet
	busy map[string]int   // segment -> batches appending or committing
	gen  map[string]int64 // segment -> batches started, ever
}

func segName(n int64) string { return segPrefix + strconv.FormatInt(n, 10) }

func isSegName(name string) bool {
	n, err := strconv.ParseInt(strings.TrimPrefix(name, segPrefix), 10, 64)
	return strings.HasPrefix(name, segPrefix) && err == nil && n > 0
}

// use counts a batch on a segment (in.mu held).
func (st *segState) use(name string) {
	if st.busy == nil {
		st.busy, st.gen = map[string]int{}, map[string]int64{}
	}
	st.busy[name]++
	st.gen[name]++
}

// segDone ends a batch's use of its segment ("" for none).
func (in *intake) segDone(b *tenantBatch, name string) {
	if name == "" {
		return
	}
	in.mu.Lock()
	if b.seg.busy[name]--; b.seg.busy[name] <= 0 {
		delete(b.seg.busy, name)
	}
	in.mu.Unlock()
}

// segmentFor returns the segment the batch appends to (counted busy until
// segDone), starting a new one when there is none or it is full.
func (in *intake) segmentFor(tenant string, b *tenantBatch) (*segFile, error) {
	in.mu.Lock()
	if sf := b.seg.cur; sf != nil && sf.size < segmentSize {
		b.seg.use(sf.name)
		in.mu.Unlock()
		return sf, nil
	}
	old := b.seg.cur
	b.seg.cur = nil
	in.mu.Unlock()
	if old != nil {
		old.f.Close()
	}
	dir := in.s.spoolDir(tenant)
	if b.seg.next == 0 {
		last, err := lastSegment(dir)
		if err != nil {
			return nil, err
		}
		// Numbers only grow, also across restarts (a deleted segment's
		// name is not used again).
		b.seg.next = max(last+1, time.Now().UnixMicro())
	}
	name := segName(b.seg.next)
	b.seg.next++
	in.mu.Lock()
	b.seg.use(name) // before the file exists: cleanSegments leaves it
	in.mu.Unlock()
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err == nil {
		if err = syncDir(dir); err != nil {
			f.Close()
		}
	}
	if err != nil {
		in.segDone(b, name)
		return nil, fmt.Errorf("archive: starting a spool segment: %w", err)
	}
	sf := &segFile{name: name, f: f}
	in.mu.Lock()
	b.seg.cur = sf
	in.mu.Unlock()
	return sf, nil
}

// retire stops appending to sf after a failed write or sync (what reached
// it is then unknown; no row names it).
func (in *intake) retire(b *tenantBatch, sf *segFile) {
	in.mu.Lock()
	mine := b.seg.cur == sf
	if mine {
		b.seg.cur = nil
	}
	in.mu.Unlock()
	if mine {
		sf.f.Close()
	}
}

// lastSegment returns the greatest segment number in dir (0 for none), and
// makes the spool directories' names durable (they may have just been
// made): once per tenant per process.
func lastSegment(dir string) (int64, error) {
	// dir is <data>/archive/spool/<tenant>: spool, archive and the data
	// directory hold the new names.
	for d, i := filepath.Dir(dir), 0; i < 3; d, i = filepath.Dir(d), i+1 {
		if err := syncDir(d); err != nil {
			return 0, err
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var last int64
	for _, e := range entries {
		if isSegName(e.Name()) {
			n, _ := strconv.ParseInt(strings.TrimPrefix(e.Name(), segPrefix), 10, 64)
			last = max(last, n)
		}
	}
	return last, nil
}

// appendBatch appends the batch's messages held in memory to the tenant's
// segment (content appearing twice in the batch once) and makes them
// durable with one fdatasync. It returns the segment used ("" for none),
// busy until segDone.
func (in *intake) appendBatch(tenant string, b *tenantBatch, q []*pendingCapture) (string, error) {
	first := map[string]*pendingCapture{}
	var todo []*pendingCapture
	for _, pc := range q {
		if pc.data == nil {
			continue
		}
		if f := first[pc.sha]; f != nil {
			pc.dup = f
			continue
		}
		first[pc.sha] = pc
		todo = append(todo, pc)
	}
	if len(todo) == 0 {
		return "", nil
	}
	sf, err := in.segmentFor(tenant, b)
	if err != nil {
		return "", err
	}
	for _, pc := range todo {
		off := sf.size
		if _, err := sf.f.Write(pc.data); err != nil {
			in.retire(b, sf)
			return sf.name, fmt.Errorf("archive: writing the spool: %w", err)
		}
		sf.size += int64(len(pc.data))
		pc.slice = SpoolSlice{Segment: sf.name, Offset: off, Length: int64(len(pc.data))}
	}
	if err := fdatasync(sf.f); err != nil {
		in.retire(b, sf)
		return sf.name, fmt.Errorf("archive: syncing the spool: %w", err)
	}
	for _, pc := range q {
		if pc.dup != nil {
			pc.slice = pc.dup.slice
		}
		pc.data = nil
	}
	return sf.name, nil
}

// openSlice opens a message's bytes in a segment.
func (s *Service) openSlice(tenantID string, sl SpoolSlice) (io.ReadCloser, error) {
	if !isSegName(sl.Segment) {
		return nil, fmt.Errorf("archive: bad spool segment name %q", sl.Segment)
	}
	f, err := os.Open(filepath.Join(s.spoolDir(tenantID), sl.Segment))
	if err != nil {
		return nil, err
	}
	return &sliceReader{SectionReader: io.NewSectionReader(f, sl.Offset, sl.Length), f: f}, nil
}

type sliceReader struct {
	*io.SectionReader
	f *os.File
}

func (r *sliceReader) Close() error { return r.f.Close() }

// cleanSegments deletes the tenant's segments that nothing needs any more
// (see the top of this file) and returns how many.
func (in *intake) cleanSegments(ctx context.Context, tenant string) (int, error) {
	s := in.s
	if s.cfg.DataDir == "" {
		return 0, nil
	}
	// 1. Which segments batches use now, and how many batches each had:
	// a segment idle now whose count has not changed at step 4 had all
	// its rows committed before step 3 read them.
	in.mu.Lock()
	gen := map[string]int64{}
	busy := map[string]bool{}
	if b := in.batches[tenant]; b != nil {
		for name, g := range b.seg.gen {
			gen[name] = g
		}
		for name := range b.seg.busy {
			busy[name] = true
		}
	}
	in.mu.Unlock()
	// 2. The segment files.
	dir := s.spoolDir(tenant)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	} else if err != nil {
		return 0, err
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && isSegName(e.Name()) && !busy[e.Name()] {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return 0, nil
	}
	// 3. The segments rows need.
	live, err := s.cfg.Store.ArchiveLiveSegments(ctx, tenant)
	if err != nil {
		return 0, err
	}
	// 4. The dead ones: not needed, no batch since step 1; the current one
	// is retired.
	var dead []string
	var closing []*os.File
	in.mu.Lock()
	b := in.batches[tenant]
	for _, name := range names {
		if live[name] {
			continue
		}
		if b != nil {
			if b.seg.gen[name] != gen[name] || b.seg.busy[name] > 0 {
				continue
			}
			if b.seg.cur != nil && b.seg.cur.name == name {
				closing = append(closing, b.seg.cur.f)
				b.seg.cur = nil
			}
			delete(b.seg.gen, name)
		}
		dead = append(dead, name)
	}
	in.mu.Unlock()
	for _, f := range closing {
		f.Close()
	}
	if len(dead) == 0 {
		return 0, nil
	}
	// 5. Rows stop naming them, then the files go.
	if err := s.cfg.Store.ClearArchiveSpool(ctx, tenant, dead, nil); err != nil {
		return 0, err
	}
	for _, name := range dead {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return 0, err
		}
	}
	return len(dead), nil
}

// wipeSlice destroys a purged message's bytes in its segment: a hole is
// punched (partial blocks zeroed), or the slice is overwritten with zeros
// where the file system cannot; then the segment is fdatasynced. A
// segment already deleted is nothing to wipe.
func (s *Service) wipeSlice(tenantID string, sl SpoolSlice) error {
	if !isSegName(sl.Segment) || sl.Length <= 0 {
		return nil
	}
	f, err := os.OpenFile(filepath.Join(s.spoolDir(tenantID), sl.Segment), os.O_WRONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	defer f.Close()
	if err := punchHole(f, sl.Offset, sl.Length); err != nil {
		zero := make([]byte, min(sl.Length, 1<<20))
		for off := int64(0); off < sl.Length; {
			n := min(int64(len(zero)), sl.Length-off)
			if _, err := f.WriteAt(zero[:n], sl.Offset+off); err != nil {
				return fmt.Errorf("archive: wiping a purged message in the spool: %w", err)
			}
			off += n
		}
	}
	return fdatasync(f)
}

// wipePurged wipes the slices of purged messages (a purge's, or left by
// a crash before their wipe), then clears their spool location.
func (s *Service) wipePurged(ctx context.Context, tenantID string, ms []*StoredMessage) error {
	var ids []string
	for _, m := range ms {
		if err := s.wipeSlice(tenantID, m.Spool); err != nil {
			return err
		}
		ids = append(ids, m.ID)
	}
	return s.cfg.Store.ClearArchiveSpool(ctx, tenantID, nil, ids)
}
