package archive_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/archive"
)

// spoolFiles lists the tenant's spool directory: segments and other files.
func (f *fixture) spoolFiles() (segs, others []string) {
	f.t.Helper()
	entries, err := os.ReadDir(filepath.Join(f.dir, "archive", "spool", f.tenant))
	if err != nil && !os.IsNotExist(err) {
		f.t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "seg-") {
			segs = append(segs, e.Name())
		} else {
			others = append(others, e.Name())
		}
	}
	return segs, others
}

// spoolHas tells whether any spool file of the tenant holds b.
func (f *fixture) spoolHas(b []byte) bool {
	f.t.Helper()
	segs, others := f.spoolFiles()
	for _, name := range append(segs, others...) {
		data, err := os.ReadFile(filepath.Join(f.dir, "archive", "spool", f.tenant, name))
		if err != nil {
			f.t.Fatal(err)
		}
		if bytes.Contains(data, b) {
			return true
		}
	}
	return false
}

// TestSegmentsRotateMoveAndGo: small messages share segments (a new one
// past the segment size), each readable from its slice; once the mover has
// put them all in the blob store every segment is deleted, the current one
// too, and the rows no longer name them.
func TestSegmentsRotateMoveAndGo(t *testing.T) {
	t.Cleanup(archive.SetSegmentSize(100 << 10))
	f := newFixture(t, opts{every: time.Hour})
	ctx := context.Background()
	ch := f.channel()
	var ms []*archive.Message
	var raws [][]byte
	for i := 0; i < 12; i++ {
		raw := testMessage(100+i, 30<<10+i)
		m, err := f.svc.Ingest(ctx, ch, archive.Envelope{}, bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		ms, raws = append(ms, m), append(raws, raw)
	}
	segs, others := f.spoolFiles()
	if len(segs) < 3 || len(others) != 0 {
		t.Fatalf("spool: segments %v, other files %v", segs, others)
	}
	for i, m := range ms {
		if _, off, n := f.spoolSlice(m); n != int64(len(raws[i])) || off < 0 {
			t.Fatalf("slice of message %d: %d+%d", i, off, n)
		}
		if !bytes.Equal(f.content(m.ID), raws[i]) {
			t.Fatalf("content of message %d differs", i)
		}
	}
	if _, err := f.svc.VerifyChain(ctx, f.tenant, "", nil); err != nil {
		t.Fatal(err)
	}
	f.stop()

	// Reopened with a blob store: the mover moves everything, then the
	// segments (of the earlier process) go.
	g := newFixture(t, opts{dir: f.dir, tenant: f.tenant, every: time.Hour, blobs: true})
	g.waitMoved(ms)
	deadline := time.Now().Add(20 * time.Second)
	for {
		segs, _ := g.spoolFiles()
		if len(segs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("segments left after the move: %v", segs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i, m := range ms {
		sm, _ := g.db.ArchiveMessage(ctx, g.tenant, m.ID)
		if sm.Spool.Segment != "" {
			t.Fatalf("moved message still names segment %s", sm.Spool.Segment)
		}
		if !bytes.Equal(g.content(m.ID), raws[i]) {
			t.Fatalf("content of message %d differs after the move", i)
		}
	}
	// New messages start a new segment, which goes too once moved.
	m := g.ingest(ch, testMessage(500, 20<<10))
	if _, _, n := g.spoolSlice(m); n != m.Size {
		t.Fatal("new message not in a segment")
	}
	g.waitMoved([]*archive.Message{m})
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if segs, _ := g.spoolFiles(); len(segs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the idle current segment was not deleted after its move")
		}
	}
	if _, err := g.svc.VerifyChain(ctx, g.tenant, "", nil); err != nil {
		t.Fatal(err)
	}
}

// TestSegmentDedup: the same content ingested concurrently and again
// later is one message; its bytes are kept once per batch at most and
// never for a capture of content already stored.
func TestSegmentDedup(t *testing.T) {
	f := newFixture(t, opts{every: time.Hour})
	ctx := context.Background()
	ch := f.channel()
	raw := testMessage(1, 40<<10)
	var wg sync.WaitGroup
	ids := make([]string, 8)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := f.svc.Ingest(ctx, ch, archive.Envelope{}, bytes.NewReader(raw))
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = m.ID
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("ids %v", ids)
		}
	}
	segs, _ := f.spoolFiles()
	size := func() int64 {
		var n int64
		for _, s := range segs {
			fi, _ := os.Stat(filepath.Join(f.dir, "archive", "spool", f.tenant, s))
			n += fi.Size()
		}
		return n
	}
	before := size()
	if before < int64(len(raw)) || before > 8*int64(len(raw)) {
		t.Fatalf("segments hold %d bytes for a %d-byte message", before, len(raw))
	}
	f.ingest(ch, raw)
	if after := size(); after != before {
		t.Fatalf("a capture of stored content appended %d bytes", after-before)
	}
	if n, _ := f.db.ArchiveSize(ctx, f.tenant); n != 9 {
		t.Fatalf("%d records, want 9 captures", n)
	}
	if !bytes.Equal(f.content(ids[0]), raw) {
		t.Fatal("content differs")
	}
	if _, err := f.svc.VerifyChain(ctx, f.tenant, "", nil); err != nil {
		t.Fatal(err)
	}
}

// TestPurgeWipesSegmentSlice: a purged message's bytes leave its segment
// at once although a held message keeps the segment; captured again, it
// is back from a new slice; once nothing needs the segment, it is deleted.
func TestPurgeWipesSegmentSlice(t *testing.T) {
	f := newFixture(t, opts{every: 30 * time.Millisecond})
	ctx := context.Background()
	ch := f.channel()
	heldRaw := mail("alice@example.com", "carol@example.com", "contract", strings.Repeat("the signed contract ", 500))
	otherRaw := mail("alice@example.com", "dave@other.test", "lunch", strings.Repeat("see you ", 500))
	held := f.ingest(ch, heldRaw)
	other := f.ingest(ch, otherRaw)
	hp, _, _ := f.spoolSlice(held)
	op, _, _ := f.spoolSlice(other)
	if hp != op {
		t.Fatalf("two segments for two small messages: %s %s", hp, op)
	}
	if err := f.svc.SetRetention(ctx, f.tenant, archive.Retention{DefaultDays: 0}); err != nil {
		t.Fatal(err)
	}
	h, err := f.svc.CreateHold(ctx, archive.HoldSpec{TenantID: f.tenant, Name: "M", Custodians: []string{"carol@example.com"}, By: "usr_1"})
	if err != nil {
		t.Fatal(err)
	}
	if sum, err := f.svc.Purge(ctx, f.tenant); err != nil || sum.Purged != 1 || sum.Held != 1 {
		t.Fatalf("purge = %+v, %v", sum, err)
	}
	if f.spoolHas(otherRaw[len(otherRaw)-200:]) {
		t.Fatal("the purged message's bytes are still in the spool")
	}
	if !f.spoolHas(heldRaw) {
		t.Fatal("the held message's bytes are gone from the spool")
	}
	if _, _, err := f.svc.Content(ctx, f.tenant, other.ID); app.ErrorCode(err) != app.EGONE {
		t.Fatalf("purged content: %v", err)
	}
	if sm, _ := f.db.ArchiveMessage(ctx, f.tenant, other.ID); sm.Spool.Segment != "" {
		t.Fatalf("purged row still names its slice %+v", sm.Spool)
	}
	f.checkpointed()
	if _, err := f.svc.VerifyChain(ctx, f.tenant, "", nil); err != nil {
		t.Fatal(err)
	}

	// Captured again: revived from a new slice.
	again := f.ingest(ch, otherRaw)
	if again.ID != other.ID || !bytes.Equal(f.content(other.ID), otherRaw) {
		t.Fatal("revived message not readable")
	}
	f.checkpointed()
	if _, err := f.svc.VerifyChain(ctx, f.tenant, "", nil); err != nil {
		t.Fatal(err)
	}

	// Release and purge everything: no segment is needed any more.
	if _, err := f.svc.ReleaseHold(ctx, f.tenant, h.ID, "closed", "usr_1"); err != nil {
		t.Fatal(err)
	}
	if sum, err := f.svc.Purge(ctx, f.tenant); err != nil || sum.Purged != 2 {
		t.Fatalf("purge = %+v, %v", sum, err)
	}
	if segs, others := f.spoolFiles(); len(segs)+len(others) != 0 {
		t.Fatalf("spool after purging everything: %v %v", segs, others)
	}
	f.checkpointed()
	if rep, err := f.svc.VerifyChain(ctx, f.tenant, "", nil); err != nil || rep.Purged != 2 {
		t.Fatalf("verify: %+v, %v", rep, err)
	}
}

// TestSegmentLeftovers: bytes of a segment no row names (a crash after
// the fsync, before the commit) change nothing, and the segment goes once
// the mover runs.
func TestSegmentLeftovers(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t, opts{dir: dir, every: time.Hour})
	ch := f.channel()
	m := f.ingest(ch, testMessage(3, 10<<10))
	p, _, _ := f.spoolSlice(m)
	f.stop()
	// An orphan segment, and orphan bytes after the last slice.
	orphan := filepath.Join(filepath.Dir(p), "seg-1")
	os.WriteFile(orphan, testMessage(4, 10<<10), 0o600)
	fh, _ := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	fh.Write(testMessage(5, 10<<10))
	fh.Close()

	g := newFixture(t, opts{dir: dir, tenant: f.tenant, every: time.Hour, blobs: true})
	m2 := g.ingest(ch, testMessage(6, 10<<10))
	if p2, _, _ := g.spoolSlice(m2); p2 == p || p2 == orphan {
		t.Fatal("a restarted intake appended to an earlier segment")
	}
	g.waitMoved([]*archive.Message{m, m2})
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if segs, _ := g.spoolFiles(); len(segs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("segments left")
		}
	}
	if _, err := g.svc.VerifyChain(context.Background(), g.tenant, "", nil); err != nil {
		t.Fatal(err)
	}
}

// TestLargeMessageOwnSpoolFile: over the segment threshold a message is
// streamed to its own spool file, verified from it.
func TestLargeMessageOwnSpoolFile(t *testing.T) {
	f := newFixture(t, opts{every: time.Hour})
	ch := f.channel()
	raw := testMessage(9, 1<<20+100)
	m := f.ingest(ch, raw)
	sm, _ := f.db.ArchiveMessage(context.Background(), f.tenant, m.ID)
	if sm.Spool.Segment != "" {
		t.Fatalf("large message in segment %s", sm.Spool.Segment)
	}
	if _, others := f.spoolFiles(); len(others) != 1 || others[0] != m.SHA256 {
		t.Fatalf("spool files %v", others)
	}
	if !bytes.Equal(f.content(m.ID), raw) {
		t.Fatal("content differs")
	}
	f.ingest(ch, testMessage(10, 1000)) // a small one beside it
	if _, err := f.svc.Checkpoint(context.Background(), f.tenant); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.VerifyChain(context.Background(), f.tenant, "", nil); err != nil {
		t.Fatal(err)
	}
	f.stop()
	p := filepath.Join(f.dir, "archive", "spool", f.tenant, m.SHA256)
	b, _ := os.ReadFile(p)
	b[len(b)/2] ^= 1
	os.WriteFile(p, b, 0o600)
	f.wantBroken(app.CodeArchiveMessageMismatch)
}

// TestSmallLimit: with a size limit below the segment threshold, a
// message over it is refused.
func TestSmallLimit(t *testing.T) {
	f := newFixture(t, opts{every: time.Hour, maxBytes: 4000})
	ch := f.channel()
	_, err := f.svc.Ingest(context.Background(), ch, archive.Envelope{}, bytes.NewReader(testMessage(1, 4001)))
	if _, ok := err.(*archive.TooLarge); !ok {
		t.Fatalf("err = %v, want TooLarge", err)
	}
	raw := testMessage(2, 4000)
	m := f.ingest(ch, raw[:4000:4000])
	if m.Size != 4000 {
		t.Fatalf("size %d", m.Size)
	}
}
