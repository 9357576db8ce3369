package blobstore_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"backstop/app"
	"backstop/app/blobstore"
	"backstop/store/storetest"
)

func TestRoundTripExactBytes(t *testing.T) {
	f := newFixture(t)
	items := []item{
		{"empty", nil},
		{"one-byte", []byte{0}},
		{"small", []byte("From: a@example.com\r\nSubject: hi\r\n\r\nbody\r\n")},
		{"at-threshold", randomBytes(128 << 10)},
		{"just-over", randomBytes(128<<10 + 1)},
		{"large", message(1, randomBytes(3<<20))},
	}
	snap := f.backup("po_1", items...)
	if snap.Items != int64(len(items)) {
		t.Fatalf("snapshot items = %d, want %d", snap.Items, len(items))
	}
	got := f.items(snap.ID)
	for _, it := range items {
		m, ok := got[it.name]
		if !ok {
			t.Fatalf("item %s missing from the manifest", it.name)
		}
		data, err := f.read(f.tenant, m)
		if err != nil {
			t.Fatalf("%s: %v", it.name, err)
		}
		if !bytes.Equal(data, it.data) {
			t.Fatalf("%s: read %d bytes that differ from the %d stored", it.name, len(data), len(it.data))
		}
	}
	if big := got["large"]; len(big.Blobs) < 10 {
		t.Fatalf("a 4 MiB item was cut into %d chunks, want ~64 KiB chunks", len(big.Blobs))
	}
}

func TestDedupRepeatedAttachment(t *testing.T) {
	f := newFixture(t)
	attachment := randomBytes(2 << 20)
	var items []item
	var total int
	for i := range 20 {
		m := message(i, attachment)
		total += len(m)
		items = append(items, item{name: string(rune('a' + i)), data: m})
	}
	f.backup("po_1", items...)
	stored := f.storedBytes()
	t.Logf("20 messages, %.1f MiB in all, stored in %.2f MiB", float64(total)/(1<<20), float64(stored)/(1<<20))
	if stored >= 4<<20 {
		t.Fatalf("stored %d bytes, want < 4 MiB", stored)
	}
}

func TestTargetRevealsNoPlaintextOrKnownHashes(t *testing.T) {
	f := newFixture(t)
	secret := bytes.Repeat([]byte("CONFIDENTIAL-PAYROLL-2026 "), 100)
	f.backup("po_1", item{"m", secret})
	err := filepath.Walk(f.local.Root(), func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		body, _ := os.ReadFile(p)
		if bytes.Contains(body, []byte("CONFIDENTIAL")) {
			t.Errorf("%s holds plaintext", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The same content in another tenant gets another blob id: ids are keyed.
	other := storetest.Tenant(t, f.db, "Other")
	ctx := context.Background()
	w1, _ := f.store.NewWriter(ctx, f.tenant)
	c1, _ := w1.PutItem(ctx, bytes.NewReader(secret))
	w1.Close()
	w2, err := f.store.NewWriter(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	c2, _ := w2.PutItem(ctx, bytes.NewReader(secret))
	w2.Close()
	if c1.SHA256 != c2.SHA256 || c1.Blobs[0] == c2.Blobs[0] {
		t.Fatalf("same content: sha256 equal %v, blob ids equal %v; want equal hashes and different ids",
			c1.SHA256 == c2.SHA256, c1.Blobs[0] == c2.Blobs[0])
	}
}

func TestFlippedByteIsDetectedNeverReturned(t *testing.T) {
	f := newFixture(t)
	data := randomBytes(300 << 10)
	snap := f.backup("po_1", item{"m", data})
	packs := f.packFiles()
	if len(packs) != 1 {
		t.Fatalf("%d packs, want 1", len(packs))
	}
	body, _ := os.ReadFile(packs[0])
	body[100] ^= 0x01
	if err := os.WriteFile(packs[0], body, 0o600); err != nil {
		t.Fatal(err)
	}
	it := f.items(snap.ID)["m"]
	got, err := f.read(f.tenant, it)
	if !errors.Is(err, blobstore.ErrCorrupt) {
		t.Fatalf("read of a damaged pack: err %v, want ErrCorrupt", err)
	}
	if len(got) > 0 && !bytes.Equal(got, data[:len(got)]) {
		t.Fatal("damaged bytes were returned as data")
	}
	pc, err := f.store.CheckPacks(context.Background(), f.tenant, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if pc.Packs != 1 || len(pc.Damaged) != 1 || !strings.Contains(pc.Damaged[0].Reason, "hash") {
		t.Fatalf("pack check = %+v, want the one pack reported damaged", pc)
	}
	sc, err := f.store.VerifySample(context.Background(), snap.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Sampled != 1 || sc.Mismatched != 1 || sc.Matched != 0 {
		t.Fatalf("verify sample = %+v, want the item mismatched", sc)
	}
}

func TestVerifySampleMatchesIntactSnapshot(t *testing.T) {
	f := newFixture(t)
	var items []item
	for i := range 30 {
		items = append(items, item{name: string(rune('A' + i)), data: message(i, randomBytes(i*1000))})
	}
	snap := f.backup("po_1", items...)
	sc, err := f.store.VerifySample(context.Background(), snap.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Sampled != 10 || sc.Matched != 10 {
		t.Fatalf("verify sample = %+v, want 10 of 10 matched", sc)
	}
	pc, err := f.store.CheckPacks(context.Background(), f.tenant, time.Time{})
	if err != nil || len(pc.Damaged) != 0 || pc.Packs == 0 {
		t.Fatalf("pack check = %+v, %v", pc, err)
	}
}

func TestIncrementalSnapshotStoresOnlyNewContent(t *testing.T) {
	f := newFixture(t)
	var items []item
	for i := range 200 {
		items = append(items, item{name: "m" + string(rune(i)), data: message(i, randomBytes(20<<10))})
	}
	s1 := f.backup("po_1", items...)
	before := f.storedBytes()
	items = append(items, item{"new", message(999, randomBytes(20<<10))})
	s2 := f.backup("po_1", items...)
	grew := f.storedBytes() - before
	if grew > 200<<10 {
		t.Fatalf("a second snapshot with one new 27 KiB message grew the store by %d bytes", grew)
	}
	if len(f.items(s2.ID)) != 201 || len(f.items(s1.ID)) != 200 {
		t.Fatal("manifests hold the wrong items")
	}
	list, err := f.store.Snapshots(context.Background(), app.SnapshotFilter{ProtectedObjectID: "po_1"})
	if err != nil || len(list) != 2 || list[0].ID != s2.ID {
		t.Fatalf("snapshots newest first = %v, %v", list, err)
	}
}
