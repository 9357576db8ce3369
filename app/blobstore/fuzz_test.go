package blobstore

import (
	"bytes"
	"encoding/binary"
	"testing"

	"backstop/app"
)

func fuzzKeys(t testing.TB) *tenantKeys {
	k, err := newTenantKeys(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func sampleEntries() []app.BlobEntry {
	return []app.BlobEntry{
		{ID: app.BlobID{1}, Type: app.BlobData, Offset: 0, Length: 100, RawLength: 80},
		{ID: app.BlobID{2}, Type: app.BlobTree, Offset: 100, Length: 41, RawLength: 0},
	}
}

// FuzzParsePackHeader feeds arbitrary plaintext headers (as if the key
// were known to an attacker who wrote the pack) to the header parser: it
// must never panic or accept entries outside the blob area.
func FuzzParsePackHeader(f *testing.F) {
	f.Add(encodeEntries([]byte{formatVersion}, sampleEntries()), int64(141))
	f.Add([]byte{formatVersion, 0}, int64(0))
	f.Add([]byte{formatVersion, 0xff, 0xff, 0xff, 0xff, 0x0f}, int64(1<<40))
	f.Fuzz(func(t *testing.T, plain []byte, area int64) {
		entries, err := parseHeaderPlain(plain, area)
		if err != nil {
			return
		}
		var next int64
		for _, e := range entries {
			if e.Offset != next || e.Length < blobOverhead || e.Offset+e.Length > area {
				t.Fatalf("accepted entry %+v in an area of %d", e, area)
			}
			next = e.Offset + e.Length
		}
	})
}

// FuzzParseIndex feeds arbitrary (decompressed) index bodies to the index
// parser.
func FuzzParseIndex(f *testing.F) {
	f.Add(encodeIndex([]indexPack{{ID: packID([]byte("x")), Size: 141, Entries: sampleEntries()}}))
	f.Add(encodeIndex(nil))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		packs, err := parseIndex(data)
		if err != nil {
			return
		}
		for _, p := range packs {
			for _, e := range p.Entries {
				if e.Offset+e.Length > p.Size {
					t.Fatalf("accepted entry %+v beyond pack size %d", e, p.Size)
				}
			}
		}
	})
}

// FuzzOpenPack parses whole packs as a reader of a target does: the
// trailer's length, the sealed header, and every blob it names. Mutated
// packs must fail with an error, never panic or return data.
func FuzzOpenPack(f *testing.F) {
	k := fuzzKeys(f)
	var pack []byte
	var entries []app.BlobEntry
	for _, plain := range [][]byte{[]byte("hello"), bytes.Repeat([]byte("abc"), 1000)} {
		id := k.blobID(plain)
		sealed := k.sealBlob(nil, app.BlobData, id, plain)
		entries = append(entries, app.BlobEntry{ID: id, Type: app.BlobData, Offset: int64(len(pack)), Length: int64(len(sealed)), RawLength: int64(len(plain))})
		pack = append(pack, sealed...)
	}
	pack = append(pack, k.packTrailer(entries)...)
	f.Add(pack)
	f.Fuzz(func(t *testing.T, pack []byte) {
		if len(pack) < 4 {
			return
		}
		n := int64(binary.LittleEndian.Uint32(pack[len(pack)-4:]))
		if n > int64(len(pack))-4 {
			return
		}
		sealed := pack[int64(len(pack))-4-n : len(pack)-4]
		entries, err := k.parsePackHeader(sealed, int64(len(pack)))
		if err != nil {
			return
		}
		for _, e := range entries {
			if _, err := k.openBlob(e.Type, e.ID, pack[e.Offset:e.Offset+e.Length], e.RawLength); err != nil {
				return
			}
		}
	})
}
