package blobstore

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"backstop/app"

	"github.com/klauspost/compress/zstd"
)

// The on-target format, version 1 (docs/blobstore.md has the reasons).
//
//	backstop-blobstore                       marker: format, version, target id (JSON)
//	tenants/<tenant>/key                     the tenant's data key, sealed by the appliance key (JSON)
//	tenants/<tenant>/packs/<hh>/<sha256>     packs: blobs, then the sealed header, then its length
//	tenants/<tenant>/index/<sha256>          sealed index files: pack -> blobs
//	tenants/<tenant>/snapshots/<sn_…>        sealed snapshot manifests
//
// A stored blob is nonce(24) || XChaCha20-Poly1305(flag || payload) with
// the blob's type and id as additional data, so a blob copied to another
// place or id fails to open. flag 0: payload is the plaintext; flag 1:
// payload is zstd of the plaintext.

// ErrCorrupt reports stored data that failed its check (a flipped byte, a
// truncated pack, a blob under the wrong id). Corrupt data is never returned.
var ErrCorrupt = errors.New("stored data failed its integrity check")

const (
	formatName    = "backstop-blobstore"
	formatVersion = 1
	markerName    = "backstop-blobstore"
	nonceSize     = 24
	tagSize       = 16
	blobOverhead  = nonceSize + 1 + tagSize
	flagRaw       = 0
	flagZstd      = 1
	// maxHeaderBytes bounds a pack header a reader will accept.
	maxHeaderBytes = 16 << 20
	// maxBlobBytes bounds one stored blob (chunks are at most 256 KiB).
	maxBlobBytes = 1 << 20
)

func tenantPrefix(tenantID string) string { return "tenants/" + tenantID + "/" }
func keyName(tenantID string) string      { return tenantPrefix(tenantID) + "key" }
func packName(tenantID, packID string) string {
	return tenantPrefix(tenantID) + "packs/" + packID[:2] + "/" + packID
}
func indexName(tenantID, id string) string    { return tenantPrefix(tenantID) + "index/" + id }
func snapshotName(tenantID, id string) string { return tenantPrefix(tenantID) + "snapshots/" + id }

var (
	zenc = sync.OnceValue(func() *zstd.Encoder {
		// The fastest match finder, but with literals always entropy-coded:
		// mail attachments are base64, which has no matches and compresses
		// only by its 64-symbol alphabet (the fastest level skips that by
		// default and stored 20 copies of a 2 MiB attachment in 4.1 MiB
		// instead of 3.4).
		e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithAllLitEntropyCompression(true),
			zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)), zstd.WithWindowSize(chunkMax), // a blob is at most chunkMax
			zstd.WithLowerEncoderMem(true))
		if err != nil {
			panic(err)
		}
		return e
	})
	zdec = sync.OnceValue(func() *zstd.Decoder {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(64<<20),
			zstd.WithDecoderLowmem(true))
		if err != nil {
			panic(err)
		}
		return d
	})
)

func blobAD(typ byte, id app.BlobID) []byte {
	ad := make([]byte, 0, 33)
	ad = append(ad, typ)
	return append(ad, id[:]...)
}

// scratch holds the compressed form of a blob while it is sealed.
var scratch = sync.Pool{New: func() any { b := make([]byte, 0, chunkMax+1024); return &b }}

// sealBlob compresses (when that saves at least 1/32) and encrypts plain,
// appending the stored form to dst. It encrypts in place within dst, so
// a caller that reuses dst allocates nothing per blob.
func (k *tenantKeys) sealBlob(dst []byte, typ byte, id app.BlobID, plain []byte) []byte {
	payload, flag := plain, byte(flagRaw)
	zp := scratch.Get().(*[]byte)
	defer scratch.Put(zp)
	if len(plain) >= 64 {
		z := zenc().EncodeAll(plain, (*zp)[:0])
		*zp = z[:0]
		if len(z) < len(plain)-len(plain)/32 {
			payload, flag = z, flagZstd
		}
	}
	start := len(dst)
	dst = slices.Grow(dst, nonceSize+1+len(payload)+tagSize)[:start+nonceSize]
	randRead(dst[start:])
	dst = append(dst, flag)
	dst = append(dst, payload...)
	head := dst[:start+nonceSize]
	return k.aead.Seal(head, head[start:], dst[start+nonceSize:], blobAD(typ, id))
}

// openBlob decrypts and decompresses a stored blob and checks that its
// plaintext hashes to id. It decrypts in place, so stored is overwritten
// (and the result may share its memory).
func (k *tenantKeys) openBlob(typ byte, id app.BlobID, stored []byte, rawLength int64) ([]byte, error) {
	if len(stored) < blobOverhead {
		return nil, fmt.Errorf("blob %x: %w (truncated)", id[:8], ErrCorrupt)
	}
	// Decrypted in place: stored is the caller's to give up.
	msg, err := k.aead.Open(stored[nonceSize:nonceSize], stored[:nonceSize], stored[nonceSize:], blobAD(typ, id))
	if err != nil {
		return nil, fmt.Errorf("blob %x: %w (authentication failed)", id[:8], ErrCorrupt)
	}
	plain := msg[1:]
	switch msg[0] {
	case flagRaw:
	case flagZstd:
		if rawLength < 0 || rawLength > maxBlobBytes {
			return nil, fmt.Errorf("blob %x: %w (length %d)", id[:8], ErrCorrupt, rawLength)
		}
		plain, err = zdec().DecodeAll(plain, make([]byte, 0, rawLength))
		if err != nil {
			return nil, fmt.Errorf("blob %x: %w (%v)", id[:8], ErrCorrupt, err)
		}
	default:
		return nil, fmt.Errorf("blob %x: %w (unknown encoding %d)", id[:8], ErrCorrupt, msg[0])
	}
	if int64(len(plain)) != rawLength || k.blobID(plain) != id {
		return nil, fmt.Errorf("blob %x: %w (content does not match its id)", id[:8], ErrCorrupt)
	}
	return plain, nil
}

// sealMeta encrypts a metadata file (header, index, snapshot) bound to its
// purpose.
func (k *tenantKeys) sealMeta(ad string, plain []byte) []byte {
	out := make([]byte, nonceSize, nonceSize+len(plain)+tagSize)
	if _, err := rand.Read(out); err != nil {
		panic(err)
	}
	return k.aead.Seal(out, out[:nonceSize], plain, []byte(ad))
}

func (k *tenantKeys) openMeta(ad string, sealed []byte) ([]byte, error) {
	if len(sealed) < nonceSize+tagSize {
		return nil, fmt.Errorf("%s: %w (truncated)", ad, ErrCorrupt)
	}
	plain, err := k.aead.Open(nil, sealed[:nonceSize], sealed[nonceSize:], []byte(ad))
	if err != nil {
		return nil, fmt.Errorf("%s: %w (authentication failed)", ad, ErrCorrupt)
	}
	return plain, nil
}

const (
	adPackHeader = "backstop-blobstore/v1 pack-header"
	adIndex      = "backstop-blobstore/v1 index"
)

func adSnapshot(id string) string { return "backstop-blobstore/v1 snapshot " + id }

// encodeEntries is the binary list of blobs shared by pack headers and
// index files: count, then type, id, offset, length, raw length per blob.
func encodeEntries(dst []byte, entries []app.BlobEntry) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(entries)))
	for _, e := range entries {
		dst = append(dst, e.Type)
		dst = append(dst, e.ID[:]...)
		dst = binary.AppendUvarint(dst, uint64(e.Offset))
		dst = binary.AppendUvarint(dst, uint64(e.Length))
		dst = binary.AppendUvarint(dst, uint64(e.RawLength))
	}
	return dst
}

// decodeEntries parses what encodeEntries wrote; limit bounds the offsets
// (a pack's size).
func decodeEntries(r *bytes.Reader, limit int64) ([]app.BlobEntry, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, err
	}
	if n > uint64(r.Len())/34 {
		return nil, fmt.Errorf("%d entries cannot fit in %d bytes", n, r.Len())
	}
	entries := make([]app.BlobEntry, 0, n)
	for range n {
		var e app.BlobEntry
		if e.Type, err = r.ReadByte(); err != nil {
			return nil, err
		}
		if e.Type != app.BlobData && e.Type != app.BlobTree {
			return nil, fmt.Errorf("unknown blob type %d", e.Type)
		}
		if _, err := r.Read(e.ID[:]); err != nil {
			return nil, err
		}
		vals := [3]uint64{}
		for i := range vals {
			if vals[i], err = binary.ReadUvarint(r); err != nil {
				return nil, err
			}
		}
		if vals[0] > uint64(limit) || vals[1] > maxBlobBytes+blobOverhead || vals[1] < blobOverhead ||
			vals[0]+vals[1] > uint64(limit) || vals[2] > maxBlobBytes {
			return nil, fmt.Errorf("blob entry out of range (offset %d, length %d, raw %d)", vals[0], vals[1], vals[2])
		}
		e.Offset, e.Length, e.RawLength = int64(vals[0]), int64(vals[1]), int64(vals[2])
		entries = append(entries, e)
	}
	return entries, nil
}

// packTrailer returns the sealed header and its length field for a pack
// whose blobs are entries.
func (k *tenantKeys) packTrailer(entries []app.BlobEntry) []byte {
	plain := encodeEntries([]byte{formatVersion}, entries)
	sealed := k.sealMeta(adPackHeader, plain)
	return binary.LittleEndian.AppendUint32(sealed, uint32(len(sealed)))
}

// parsePackHeader reads the entries of a pack from its sealed header (the
// bytes before the final 4-byte length) given the pack's total size. Each
// entry must lie within the blob area, in order, without overlap.
func (k *tenantKeys) parsePackHeader(sealed []byte, packSize int64) ([]app.BlobEntry, error) {
	plain, err := k.openMeta(adPackHeader, sealed)
	if err != nil {
		return nil, err
	}
	return parseHeaderPlain(plain, packSize-int64(len(sealed))-4)
}

func parseHeaderPlain(plain []byte, blobArea int64) ([]app.BlobEntry, error) {
	r := bytes.NewReader(plain)
	if v, err := r.ReadByte(); err != nil || v != formatVersion {
		return nil, fmt.Errorf("pack header: %w (version)", ErrCorrupt)
	}
	entries, err := decodeEntries(r, blobArea)
	if err != nil {
		return nil, fmt.Errorf("pack header: %w (%v)", ErrCorrupt, err)
	}
	var next int64
	for _, e := range entries {
		if e.Offset != next {
			return nil, fmt.Errorf("pack header: %w (blobs not contiguous)", ErrCorrupt)
		}
		next = e.Offset + e.Length
	}
	if next != blobArea || r.Len() != 0 {
		return nil, fmt.Errorf("pack header: %w (size mismatch)", ErrCorrupt)
	}
	return entries, nil
}

// indexPack is one pack in an index file.
type indexPack struct {
	ID      string
	Size    int64
	Entries []app.BlobEntry
}

// encodeIndex writes the plaintext of an index file (compressed; the
// caller seals it).
func encodeIndex(packs []indexPack) []byte {
	b := []byte{formatVersion}
	b = binary.AppendUvarint(b, uint64(len(packs)))
	for _, p := range packs {
		raw, _ := hex.DecodeString(p.ID)
		b = append(b, raw...)
		b = binary.AppendUvarint(b, uint64(p.Size))
		b = encodeEntries(b, p.Entries)
	}
	return zenc().EncodeAll(b, nil)
}

// parseIndex reads an index file's plaintext.
func parseIndex(compressed []byte) ([]indexPack, error) {
	plain, err := zdec().DecodeAll(compressed, nil)
	if err != nil {
		return nil, fmt.Errorf("index: %w (%v)", ErrCorrupt, err)
	}
	r := bytes.NewReader(plain)
	if v, err := r.ReadByte(); err != nil || v != formatVersion {
		return nil, fmt.Errorf("index: %w (version)", ErrCorrupt)
	}
	n, err := binary.ReadUvarint(r)
	if err != nil || n > uint64(r.Len())/33 {
		return nil, fmt.Errorf("index: %w (pack count)", ErrCorrupt)
	}
	packs := make([]indexPack, 0, n)
	for range n {
		var raw [32]byte
		if _, err := r.Read(raw[:]); err != nil {
			return nil, fmt.Errorf("index: %w (%v)", ErrCorrupt, err)
		}
		size, err := binary.ReadUvarint(r)
		if err != nil || size > 1<<40 {
			return nil, fmt.Errorf("index: %w (pack size)", ErrCorrupt)
		}
		entries, err := decodeEntries(r, int64(size))
		if err != nil {
			return nil, fmt.Errorf("index: %w (%v)", ErrCorrupt, err)
		}
		packs = append(packs, indexPack{ID: hex.EncodeToString(raw[:]), Size: int64(size), Entries: entries})
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("index: %w (trailing bytes)", ErrCorrupt)
	}
	return packs, nil
}

// packID is the name of a pack: the SHA-256 of its bytes, so any reader
// can check a pack without keys.
func packID(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
