package chain

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/mod/sumdb/tlog"
)

// EvidenceSchema is the report's schema.
const EvidenceSchema = "backstop.evidence/v1"

// Evidence is the evidence report of a period.
type Evidence struct {
	Schema             string         `json:"schema"` // backstop.evidence/v1
	TenantID           string         `json:"tenantId"`
	From               time.Time      `json:"from"`
	To                 time.Time      `json:"to"`
	GeneratedAt        time.Time      `json:"generatedAt"`
	Origin             string         `json:"origin"`
	VerifierKey        string         `json:"verifierKey"`
	Checkpoint         string         `json:"checkpoint"`                   // signed note text
	CheckpointStamp    []byte         `json:"checkpointStamp,omitempty"`    // RFC 3161 response DER (base64 in JSON) over the checkpoint's body
	PreviousCheckpoint string         `json:"previousCheckpoint,omitempty"` // the newest checkpoint at or before the period's start
	ConsistencyProof   []tlog.Hash    `json:"consistencyProof"`             // previousCheckpoint → checkpoint
	FirstIndex         int64          `json:"firstIndex"`                   // first record in the period (-1: none)
	LastIndex          int64          `json:"lastIndex"`                    // last record in the period (-1: none)
	RangeProof         []tlog.Hash    `json:"rangeProof"`                   // see the package doc
	Counts             EvidenceCounts `json:"counts"`
	// Records are the period's records, contiguous from FirstIndex to
	// LastIndex, in index order.
	Records      []EvidenceRecord `json:"records"`
	Verification Verification     `json:"verification"`
	Holds        []EvidenceHold   `json:"holds"`
}

// EvidenceCounts counts the period's records.
type EvidenceCounts struct {
	Messages   int64 `json:"messages"`
	Tombstones int64 `json:"tombstones"`
	Holds      int64 `json:"holds"`
	Releases   int64 `json:"releases"`
	Bytes      int64 `json:"bytes"` // sum of the message records' sizes
}

// EvidenceRecord is one record of the period: its full text (so an auditor
// recomputes its leaf hash) and the fields an auditor reads without
// parsing it (which verification checks against the text).
type EvidenceRecord struct {
	Index  int64     `json:"index"`
	Type   string    `json:"type"`
	SHA256 string    `json:"sha256,omitempty"`
	At     time.Time `json:"at"`
	Record string    `json:"record"`
}

// Verification is the state of the last chain verification.
type Verification struct {
	State     string     `json:"state"` // ok, broken, never
	CheckedAt *time.Time `json:"checkedAt"`
	JobID     string     `json:"jobId,omitempty"`
}

// EvidenceHold is a hold active during the period.
type EvidenceHold struct {
	ID          string     `json:"id"`
	Name        string     `json:"name"`
	Matter      string     `json:"matter,omitempty"`
	CreatedAt   time.Time  `json:"createdAt"`
	ReleasedAt  *time.Time `json:"releasedAt,omitempty"`
	RecordIndex int64      `json:"recordIndex"`
}

// HashReader reads stored hashes (tlog.HashReader); the store implements
// it per tenant.
type HashReader = tlog.HashReader

// subtree is a complete subtree of the log: 2^level leaves starting at
// leaf index<<level (tlog's stored hash at that level and index).
type subtree struct {
	level int
	index int64
}

// cover is the left-to-right list of maximal complete subtrees covering
// the leaves [lo, hi): each is as large as its alignment and hi allow.
func cover(lo, hi int64) []subtree {
	var out []subtree
	for lo < hi {
		l := 0
		for l < 62 && lo&(1<<(l+1)-1) == 0 && lo+1<<(l+1) <= hi {
			l++
		}
		out = append(out, subtree{l, lo >> l})
		lo += 1 << l
	}
	return out
}

// rangeProofShape is the subtrees whose hashes make up the range proof of
// leaves [first, last] in a tree of size n, in proof order.
func rangeProofShape(first, last, n int64) []subtree {
	return append(cover(0, first), cover(last+1, n)...)
}

// ProveRange returns the range proof of the leaves [first, last] in the
// tree of size n (the package doc describes it).
func ProveRange(first, last, n int64, hr HashReader) ([]tlog.Hash, error) {
	if first < 0 || first > last || last >= n {
		return nil, fmt.Errorf("range proof: bad range [%d, %d] in a tree of size %d", first, last, n)
	}
	shape := rangeProofShape(first, last, n)
	idx := make([]int64, len(shape))
	for i, s := range shape {
		idx[i] = tlog.StoredHashIndex(s.level, s.index)
	}
	h, err := hr.ReadHashes(idx)
	if err != nil {
		return nil, fmt.Errorf("range proof: %w", err)
	}
	if len(h) != len(idx) {
		return nil, errors.New("range proof: short read of stored hashes")
	}
	return h, nil
}

// rangeRoot recomputes a tree's root from the leaf hashes of a contiguous
// range and its range proof: hashes go in left to right (the left
// subtrees, the leaves, the right subtrees) and merge like binary
// addition, so memory stays O(log n) and time O(leaves).
type rangeRoot struct {
	first, last, n int64
	shape          []subtree
	proof          []tlog.Hash
	next           int64 // next leaf expected
	stack          []levelHash
}

type levelHash struct {
	level int
	hash  tlog.Hash
}

func newRangeRoot(first, last, n int64, proof []tlog.Hash) (*rangeRoot, error) {
	if first < 0 || first > last || last >= n {
		return nil, fmt.Errorf("range [%d, %d] does not fit a tree of size %d", first, last, n)
	}
	shape := rangeProofShape(first, last, n)
	if len(proof) != len(shape) {
		return nil, fmt.Errorf("range proof has %d hashes, want %d", len(proof), len(shape))
	}
	r := &rangeRoot{first: first, last: last, n: n, shape: shape, proof: proof, next: first}
	left := len(cover(0, first))
	for i := 0; i < left; i++ {
		r.push(shape[i].level, proof[i])
	}
	return r, nil
}

func (r *rangeRoot) push(level int, h tlog.Hash) {
	for len(r.stack) > 0 && r.stack[len(r.stack)-1].level == level {
		h = tlog.NodeHash(r.stack[len(r.stack)-1].hash, h)
		r.stack = r.stack[:len(r.stack)-1]
		level++
	}
	r.stack = append(r.stack, levelHash{level, h})
}

// leaf adds the next leaf's hash.
func (r *rangeRoot) leaf(h tlog.Hash) {
	r.next++
	r.push(0, h)
}

// root adds the right subtrees and returns the root.
func (r *rangeRoot) root() (tlog.Hash, error) {
	if r.next != r.last+1 {
		return tlog.Hash{}, fmt.Errorf("range has %d leaves, want %d", r.next-r.first, r.last-r.first+1)
	}
	left := len(cover(0, r.first))
	for i := left; i < len(r.shape); i++ {
		r.push(r.shape[i].level, r.proof[i])
	}
	h := r.stack[len(r.stack)-1].hash
	for i := len(r.stack) - 2; i >= 0; i-- {
		h = tlog.NodeHash(r.stack[i].hash, h)
	}
	return h, nil
}

// BuildEvidence completes e for a checkpoint of size n. The caller sets
// e.Checkpoint (signed, of size n), e.PreviousCheckpoint (size m, 0 for
// none) and e.Records' Index and Record (contiguous, in index order);
// BuildEvidence fills each record's Type, SHA256 and At from its text,
// FirstIndex and LastIndex (-1 with no records), Counts, RangeProof and
// ConsistencyProof, and checks that the range proof recomputes the
// checkpoint's root. On error e is partly filled and must not be served.
func BuildEvidence(e *Evidence, n, m int64, hr HashReader) error {
	if e.Schema == "" {
		e.Schema = EvidenceSchema
	}
	body, err := noteBody(e.Checkpoint)
	if err != nil {
		return err
	}
	c, err := ParseCheckpointBody(body)
	if err != nil {
		return err
	}
	if c.Size != n {
		return fmt.Errorf("evidence: checkpoint size %d, want %d", c.Size, n)
	}
	if m < 0 || m > n {
		return fmt.Errorf("evidence: previous checkpoint size %d beyond %d", m, n)
	}
	e.ConsistencyProof = []tlog.Hash{}
	if m > 0 && m < n {
		p, err := tlog.ProveTree(n, m, hr)
		if err != nil {
			return fmt.Errorf("evidence: consistency proof: %w", err)
		}
		e.ConsistencyProof = p
	}
	e.Counts = EvidenceCounts{}
	e.RangeProof = []tlog.Hash{}
	if e.Records == nil {
		e.Records = []EvidenceRecord{}
	}
	if e.Holds == nil {
		e.Holds = []EvidenceHold{}
	}
	if len(e.Records) == 0 {
		e.FirstIndex, e.LastIndex = -1, -1
		return nil
	}
	e.FirstIndex = e.Records[0].Index
	e.LastIndex = e.FirstIndex + int64(len(e.Records)) - 1
	if e.LastIndex >= n {
		return fmt.Errorf("evidence: record %d beyond the checkpoint's size %d", e.LastIndex, n)
	}
	if e.RangeProof, err = ProveRange(e.FirstIndex, e.LastIndex, n, hr); err != nil {
		return err
	}
	rr, err := newRangeRoot(e.FirstIndex, e.LastIndex, n, e.RangeProof)
	if err != nil {
		return err
	}
	for i := range e.Records {
		er := &e.Records[i]
		if er.Index != e.FirstIndex+int64(i) {
			return fmt.Errorf("evidence: record %d where %d belongs (records must be contiguous)", er.Index, e.FirstIndex+int64(i))
		}
		r, err := ParseRecord([]byte(er.Record))
		if err != nil {
			return fmt.Errorf("evidence: record %d: %w", er.Index, err)
		}
		er.Type, er.SHA256, er.At = r.Type, r.SHA256, r.At
		e.Counts.add(r)
		rr.leaf(LeafHash([]byte(er.Record)))
	}
	root, err := rr.root()
	if err != nil {
		return err
	}
	if root != c.Root {
		return fmt.Errorf("evidence: records [%d, %d] do not hash to the checkpoint's root", e.FirstIndex, e.LastIndex)
	}
	return nil
}

func (c *EvidenceCounts) add(r *Record) {
	switch r.Type {
	case TypeMessage:
		c.Messages++
		c.Bytes += r.Size
	case TypeTombstone:
		c.Tombstones++
	case TypeHold:
		c.Holds++
	case TypeRelease:
		c.Releases++
	}
}
