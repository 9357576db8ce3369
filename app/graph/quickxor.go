package graph

import (
	"encoding/binary"
	"hash"
)

// QuickXorHash parameters: a 160-bit register, each byte XORed in 11 bits
// after the previous one (wrapping), the length XORed into the last 8
// bytes at the end. This follows Microsoft's published reference
// (learn.microsoft.com/onedrive/developer/code-snippets/quickxorhash).
const (
	qxWidth = 160
	qxShift = 11
	qxSize  = qxWidth / 8
)

type quickXorHash struct {
	cells  [(qxWidth-1)/64 + 1]uint64
	offset int // bit position of the next byte, mod qxWidth
	length uint64
}

// NewQuickXorHash returns OneDrive's quickXorHash (160 bits; the digest is
// what file.hashes.quickXorHash holds, base64-encoded).
func NewQuickXorHash() hash.Hash { return &quickXorHash{} }

func (h *quickXorHash) Write(p []byte) (int, error) {
	// Byte i of p lands at bit offset+11*i (mod 160); bytes 160 apart land
	// on the same bit, so each of the first 160 positions XORs its column
	// of bytes once.
	cell, bit := h.offset/64, h.offset%64
	for i := range min(len(p), qxWidth) {
		last := cell == len(h.cells)-1
		cellBits := 64
		if last {
			cellBits = qxWidth % 64
		}
		var column byte
		for j := i; j < len(p); j += qxWidth {
			column ^= p[j]
		}
		if bit <= cellBits-8 {
			h.cells[cell] ^= uint64(column) << bit
		} else { // the byte straddles two cells (the last wraps to the first)
			next := cell + 1
			if last {
				next = 0
			}
			h.cells[cell] ^= uint64(column) << bit
			h.cells[next] ^= uint64(column) >> (cellBits - bit)
		}
		bit += qxShift
		if bit >= cellBits {
			cell++
			if last {
				cell = 0
			}
			bit -= cellBits
		}
	}
	h.offset = (h.offset + qxShift*(len(p)%qxWidth)) % qxWidth
	h.length += uint64(len(p))
	return len(p), nil
}

func (h *quickXorHash) Sum(b []byte) []byte {
	var out [3 * 8]byte
	for i, c := range h.cells {
		binary.LittleEndian.PutUint64(out[i*8:], c)
	}
	digest := out[:qxSize]
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], h.length)
	for i := range n {
		digest[qxSize-8+i] ^= n[i]
	}
	return append(b, digest...)
}

func (h *quickXorHash) Reset()         { *h = quickXorHash{} }
func (h *quickXorHash) Size() int      { return qxSize }
func (h *quickXorHash) BlockSize() int { return 64 }
