package archive_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/archive"
	"backstop/app/archive/chain"

	"golang.org/x/mod/sumdb/tlog"
)

func TestIngestOnceAndProof(t *testing.T) {
	f := newFixture(t, opts{every: 50 * time.Millisecond})
	ctx := context.Background()
	ch := f.channel()
	raw := testMessage(1, 2000)
	m1, err := f.svc.Ingest(ctx, ch, archive.Envelope{MailFrom: "a@x", RcptTo: []string{ch.Address}}, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	m2, err := f.svc.Ingest(ctx, ch, archive.Envelope{}, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if m1.ID != m2.ID || m1.RecordIndex != 0 {
		t.Fatalf("re-capture made another message: %s %s (index %d)", m1.ID, m2.ID, m1.RecordIndex)
	}
	sum := sha256.Sum256(raw)
	if m1.SHA256 != hex.EncodeToString(sum[:]) || m1.Subject != "test 1" || m1.From != "alice@example.com" {
		t.Fatalf("message = %+v", m1)
	}
	if got := f.content(m1.ID); !bytes.Equal(got, raw) {
		t.Fatal("content differs")
	}
	n, _ := f.db.ArchiveSize(ctx, f.tenant)
	if n != 2 {
		t.Fatalf("size %d, want 2 records", n)
	}
	msgs, _, _ := f.db.ArchiveStats(ctx, f.tenant)
	if msgs != 1 {
		t.Fatalf("%d messages, want 1", msgs)
	}
	p, err := f.svc.Record(ctx, f.tenant, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := chain.OpenCheckpoint(p.Checkpoint, f.signer.VerifierKey(), "backstop.test/archive/"+f.tenant)
	if err != nil {
		t.Fatal(err)
	}
	var proof tlog.RecordProof
	for _, s := range p.Proof {
		b, _ := base64.StdEncoding.DecodeString(s)
		var h tlog.Hash
		copy(h[:], b)
		proof = append(proof, h)
	}
	if err := tlog.CheckRecord(proof, cp.Size, cp.Root, 1, chain.LeafHash([]byte(p.Record))); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Consistency(ctx, f.tenant, 1, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Consistency(ctx, f.tenant, 0, 3); app.ErrorCode(err) != app.EINVALID {
		t.Fatalf("bad range: %v", err)
	}
	if _, err := f.svc.VerifyChain(ctx, f.tenant, "job_x", nil); err != nil {
		t.Fatal(err)
	}
}

func TestCheckpointWithinInterval(t *testing.T) {
	every := 300 * time.Millisecond
	f := newFixture(t, opts{every: every})
	ctx := context.Background()
	ch := f.channel()
	start := time.Now()
	if _, err := f.svc.Ingest(ctx, ch, archive.Envelope{}, bytes.NewReader(testMessage(1, 100))); err != nil {
		t.Fatal(err)
	}
	for {
		cp, err := f.db.LatestArchiveCheckpoint(ctx, f.tenant)
		if err == nil && cp.Size == 1 {
			break
		}
		if time.Since(start) > every {
			t.Fatalf("no checkpoint within %v", every)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("checkpoint after %v (interval %v)", time.Since(start), every)
}

func TestMoverAndBlobContent(t *testing.T) {
	f := newFixture(t, opts{every: 50 * time.Millisecond, blobs: true})
	ctx := context.Background()
	ch := f.channel()
	raw := testMessage(7, 300<<10)
	m, err := f.svc.Ingest(ctx, ch, archive.Envelope{}, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		sm, err := f.db.ArchiveMessage(ctx, f.tenant, m.ID)
		if err != nil {
			t.Fatal(err)
		}
		if sm.Content != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("not moved to the blob store")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := f.content(m.ID); !bytes.Equal(got, raw) {
		t.Fatal("content differs after the move")
	}
	if _, err := f.blobs.CollectGarbage(ctx, f.tenant); err != nil {
		t.Fatal(err)
	}
	if got := f.content(m.ID); !bytes.Equal(got, raw) {
		t.Fatal("content lost to garbage collection")
	}
	if _, err := f.svc.VerifyChain(ctx, f.tenant, "", nil); err != nil {
		t.Fatal(err)
	}
}
