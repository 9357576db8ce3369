package graphtest

import (
	"encoding/binary"
	"hash"
)

// quickXorHash is OneDrive's quickXorHash (code-snippets/quickxorhash.md):
// a 160-bit register, each byte XORed in 11 bits further along (wrapping),
// and the file length XORed little-endian into the last 8 bytes.
type quickXorHash struct {
	data   [3]uint64 // 64 + 64 + 32 bits
	shift  int
	length int64
}

func newQuickXorHash() hash.Hash { return &quickXorHash{} }

const (
	qxWidth = 160
	qxShift = 11
)

func (h *quickXorHash) Write(p []byte) (int, error) {
	for _, b := range p {
		cell, off := h.shift/64, h.shift%64
		width := 64
		if cell == 2 {
			width = 32
		}
		h.data[cell] ^= uint64(b) << off
		if off > width-8 {
			next := cell + 1
			if cell == 2 {
				next = 0
			}
			h.data[next] ^= uint64(b) >> (width - off)
		}
		h.shift = (h.shift + qxShift) % qxWidth
	}
	h.length += int64(len(p))
	return len(p), nil
}

func (h *quickXorHash) Sum(in []byte) []byte {
	var out [20]byte
	binary.LittleEndian.PutUint64(out[0:], h.data[0])
	binary.LittleEndian.PutUint64(out[8:], h.data[1])
	binary.LittleEndian.PutUint32(out[16:], uint32(h.data[2]))
	var l [8]byte
	binary.LittleEndian.PutUint64(l[:], uint64(h.length))
	for i := range l {
		out[12+i] ^= l[i]
	}
	return append(in, out[:]...)
}

func (h *quickXorHash) Reset()         { *h = quickXorHash{} }
func (h *quickXorHash) Size() int      { return 20 }
func (h *quickXorHash) BlockSize() int { return 64 }
