// Package chain is the archive's verifiable log, free of the database: the
// record format of CONTRACT §14, RFC 6962 hashing through
// golang.org/x/mod/sumdb/tlog, checkpoints as C2SP signed notes
// (golang.org/x/mod/sumdb/note, Ed25519), inclusion and consistency proofs,
// RFC 3161 time-stamps of checkpoints, the evidence report (JSON and a
// deterministic PDF rendered from it) and its offline verification.
//
// SEAM: this file pins the API app/archive, restapi and the CLI are written
// against. The implementation replaces the bodies.
package chain

import (
	"context"
	"crypto/x509"
	"net/http"
	"time"

	"golang.org/x/mod/sumdb/tlog"
)

// Record types.
const (
	TypeMessage   = "message"
	TypeTombstone = "tombstone"
	TypeHold      = "hold"
	TypeRelease   = "release"
)

// Record is one log entry (CONTRACT §14).
type Record struct {
	Type    string
	Tenant  string
	Message string    // am_… (message, tombstone)
	SHA256  string    // hex, of the exact bytes (message, tombstone)
	Size    int64     // message
	Channel string    // ch_… (message)
	At      time.Time // capture, purge, hold or release time (ms precision, UTC)
	Reason  string    // tombstone: the rule; hold/release: "<hold id> <name>"
}

// Marshal is the record text exactly as hashed: "backstop-archive/v1\n"
// then "key value\n" lines in the order of CONTRACT §14, only the keys the
// type has. At is RFC 3339 with milliseconds, UTC ("2006-01-02T15:04:05.000Z").
// A value never holds a newline (Marshal replaces \r and \n by spaces).
func (r *Record) Marshal() []byte { panic("seam") }

// ParseRecord parses a record's text, strictly (unknown keys, wrong order,
// missing keys of the type, or a trailing byte: an error).
func ParseRecord(text []byte) (*Record, error) { panic("seam") }

// LeafHash is tlog.RecordHash(text).
func LeafHash(text []byte) tlog.Hash { return tlog.RecordHash(text) }

// Checkpoint is a parsed checkpoint (C2SP tlog-checkpoint body).
type Checkpoint struct {
	Origin string
	Size   int64
	Root   tlog.Hash
}

// Body is the checkpoint's note text before signatures:
// "<origin>\n<size>\n<base64 root>\n".
func (c Checkpoint) Body() string { panic("seam") }

// Signer signs checkpoints with the appliance's Ed25519 archive key.
type Signer struct{}

// LoadOrCreateSigner reads the note signer key from path (mode 0600),
// creating it (name = the public host, e.g. "backstop.example.com") on
// first use with temp file + fsync + rename.
func LoadOrCreateSigner(path, name string) (*Signer, error) { panic("seam") }

// VerifierKey is the note verifier key ("<name>+<hash>+<base64 key>") an
// auditor pins.
func (s *Signer) VerifierKey() string { panic("seam") }

// Sign returns the signed note text of c.
func (s *Signer) Sign(c Checkpoint) (string, error) { panic("seam") }

// OpenCheckpoint verifies a signed note against the verifier key and
// parses its body; origin must match when not "".
func OpenCheckpoint(note, verifierKey, origin string) (Checkpoint, error) { panic("seam") }

// ---- RFC 3161 ----

// Stamp asks the TSA at url for a time-stamp of SHA-256(body) (nonce,
// certReq) and returns the response DER and its genTime.
func Stamp(ctx context.Context, client *http.Client, url string, body []byte) (tsr []byte, genTime time.Time, err error) {
	panic("seam")
}

// VerifyStamp checks tsr against body: imprint, signature, and the chain
// to roots with EKU timeStamping, verified at the stamp's own genTime (an
// expired TSA certificate does not break old evidence). roots nil: the
// certificates in the response are trusted as given (self-contained
// evidence; the auditor pins the TSA root separately).
func VerifyStamp(tsr, body []byte, roots *x509.CertPool) (genTime time.Time, err error) {
	panic("seam")
}

// ---- Evidence (CONTRACT §14) ----

// Evidence is the evidence report of a period.
type Evidence struct {
	Schema             string           `json:"schema"` // backstop.evidence/v1
	TenantID           string           `json:"tenantId"`
	From               time.Time        `json:"from"`
	To                 time.Time        `json:"to"`
	GeneratedAt        time.Time        `json:"generatedAt"`
	Origin             string           `json:"origin"`
	VerifierKey        string           `json:"verifierKey"`
	Checkpoint         string           `json:"checkpoint"`                   // signed note text
	CheckpointStamp    []byte           `json:"checkpointStamp,omitempty"`    // RFC 3161 response DER (base64 in JSON)
	PreviousCheckpoint string           `json:"previousCheckpoint,omitempty"` // the newest checkpoint at or before the period's start
	ConsistencyProof   []tlog.Hash      `json:"consistencyProof"`             // previousCheckpoint → checkpoint
	FirstIndex         int64            `json:"firstIndex"`                   // first record in the period (-1: none)
	LastIndex          int64            `json:"lastIndex"`
	Counts             EvidenceCounts   `json:"counts"`
	Records            []EvidenceRecord `json:"records"`
	Verification       Verification     `json:"verification"`
	Holds              []EvidenceHold   `json:"holds"`
}

// EvidenceCounts counts the period's records.
type EvidenceCounts struct {
	Messages   int64 `json:"messages"`
	Tombstones int64 `json:"tombstones"`
	Holds      int64 `json:"holds"`
	Releases   int64 `json:"releases"`
	Bytes      int64 `json:"bytes"`
}

// EvidenceRecord is one record of the period: its full text (so an auditor
// recomputes its leaf hash) and its inclusion proof in the checkpoint.
type EvidenceRecord struct {
	Index  int64       `json:"index"`
	Type   string      `json:"type"`
	SHA256 string      `json:"sha256,omitempty"`
	At     time.Time   `json:"at"`
	Record string      `json:"record"`
	Proof  []tlog.Hash `json:"proof"`
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

// BuildEvidence fills proofs into e: e.Checkpoint (signed, of size n) and
// e.Records (Index and Record set by the caller) get their inclusion
// proofs and the consistency proof from previous (size m, 0 for none).
func BuildEvidence(e *Evidence, n, m int64, hr HashReader) error { panic("seam") }

// VerifyReport is what VerifyEvidence found.
type VerifyReport struct {
	Records       int // records whose inclusion was proven
	MessagesFiles int // .eml files whose SHA-256 matched a record
	Problems      []string
}

// VerifyEvidence checks a report offline, with no server and no network:
// the checkpoint's signature against the report's verifier key (or
// pinnedKey when not ""), the consistency proof from previousCheckpoint,
// every record's text, type, sha256 and time against its fields and its
// inclusion proof, the counts, the time-stamp when present, and, when
// messagesDir is not "", that every .eml file there hashes to a message
// record of the report (and every message record of the report has one).
// Any problem is listed; err is non-nil when there is at least one.
func VerifyEvidence(report []byte, pinnedKey, messagesDir string) (*VerifyReport, error) {
	panic("seam")
}

// RenderPDF renders the report deterministically (same JSON, same bytes):
// the period, counts, checkpoint root hash and size, verifier key and
// verification state as text (monospace for hashes), the holds, the
// records table, and the JSON itself embedded as an attachment
// "evidence.json".
func RenderPDF(reportJSON []byte) ([]byte, error) { panic("seam") }
