package chain

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/mod/sumdb/tlog"
)

// VerifyReport is what VerifyEvidence found.
type VerifyReport struct {
	Records       int // records whose inclusion was proven
	MessagesFiles int // .eml files whose SHA-256 matched a record
	Problems      []string
	// Checkpoint is the verified checkpoint (zero when its signature failed).
	Checkpoint Checkpoint
	// StampTime is the time-stamp's genTime (zero: no stamp or not valid).
	StampTime time.Time
}

// maxProblemsPerKind keeps the list readable when a whole report is bad.
const maxProblemsPerKind = 20

// VerifyEvidence checks a report offline, with no server and no network:
// the checkpoint's signature against the report's verifier key (or
// pinnedKey when not "", which must then be the report's), the
// previousCheckpoint's signature and origin and the consistency proof from
// it, every record's text, type, sha256 and time against its fields, the
// records contiguous from firstIndex to lastIndex and inside [from, to],
// the checkpoint's root recomputed from every record and the range proof,
// the counts, the time-stamp at its own genTime when present, and, when
// messagesDir is not "", that every .eml file there (recursively) hashes
// to a message record of the report and every message record of the
// report not tombstoned in it has one. Any problem is listed; err is
// non-nil when there is at least one.
func VerifyEvidence(report []byte, pinnedKey, messagesDir string) (*VerifyReport, error) {
	vr := &VerifyReport{}
	var e Evidence
	if err := json.Unmarshal(report, &e); err != nil {
		vr.Problems = append(vr.Problems, "report: not an evidence report: "+err.Error())
		return vr, vr.err()
	}
	verifyEvidence(vr, &e, pinnedKey, messagesDir)
	return vr, vr.err()
}

func (vr *VerifyReport) err() error {
	if len(vr.Problems) == 0 {
		return nil
	}
	return fmt.Errorf("evidence: %d problems, the first: %s", len(vr.Problems), vr.Problems[0])
}

func (vr *VerifyReport) problem(format string, args ...any) {
	vr.Problems = append(vr.Problems, fmt.Sprintf(format, args...))
}

func verifyEvidence(vr *VerifyReport, e *Evidence, pinnedKey, messagesDir string) {
	if e.Schema != EvidenceSchema {
		vr.problem("schema is %q, want %q", e.Schema, EvidenceSchema)
	}
	key := e.VerifierKey
	if pinnedKey != "" {
		if pinnedKey != e.VerifierKey {
			vr.problem("the report's verifier key %q is not the pinned key %q", e.VerifierKey, pinnedKey)
		}
		key = pinnedKey
	}
	cp, err := OpenCheckpoint(e.Checkpoint, key, "")
	if err != nil {
		vr.problem("checkpoint: %v", err)
		return // nothing below means anything without a signed root
	}
	vr.Checkpoint = cp
	if e.Origin != cp.Origin {
		vr.problem("origin %q, but the checkpoint's is %q", e.Origin, cp.Origin)
	}
	if e.PreviousCheckpoint != "" {
		if err := CheckConsistent(e.PreviousCheckpoint, e.Checkpoint, key, e.ConsistencyProof); err != nil {
			vr.problem("previous checkpoint: %v", err)
		}
	} else if len(e.ConsistencyProof) > 0 {
		vr.problem("a consistency proof without a previous checkpoint")
	}
	if len(e.CheckpointStamp) > 0 {
		body, _ := noteBody(e.Checkpoint)
		if t, err := VerifyStamp(e.CheckpointStamp, []byte(body), nil); err != nil {
			vr.problem("checkpoint time-stamp: %v", err)
		} else {
			vr.StampTime = t
		}
	}

	messages := verifyRecords(vr, e, cp, messagesDir != "")

	if messagesDir != "" {
		verifyMessageFiles(vr, messagesDir, messages)
	}
}

// messageSet is what the report says about messages: the hashes of its
// message records and those tombstoned in it.
type messageSet struct {
	hashes     map[string]string // sha256 → first record's message id
	tombstoned map[string]bool   // sha256
}

// recordChunk is what one worker found in a run of records.
type recordChunk struct {
	counts   EvidenceCounts
	problems []string
	bad      int
	messages []*Record // message and tombstone records, when files are checked
}

// verifyChunk checks e.Records[lo:hi] on their own and hashes their leaves.
func verifyChunk(e *Evidence, lo, hi int, leaves []tlog.Hash, keepMessages bool) *recordChunk {
	c := &recordChunk{}
	badf := func(format string, args ...any) {
		c.bad++
		if c.bad <= maxProblemsPerKind {
			c.problems = append(c.problems, fmt.Sprintf(format, args...))
		}
	}
	for i := lo; i < hi; i++ {
		er := &e.Records[i]
		if want := e.FirstIndex + int64(i); er.Index != want {
			badf("records[%d]: index %d, want %d (records must be contiguous and in order)", i, er.Index, want)
		}
		text := []byte(er.Record)
		leaves[i] = LeafHash(text)
		r, err := ParseRecord(text)
		if err != nil {
			badf("record %d: %v", er.Index, err)
			continue
		}
		if r.Type != er.Type || r.SHA256 != er.SHA256 || !r.At.Equal(er.At) {
			badf("record %d: fields (type %s, sha256 %q, at %s) differ from its text (type %s, sha256 %q, at %s)",
				er.Index, er.Type, er.SHA256, er.At.UTC().Format(TimeLayout), r.Type, r.SHA256, r.At.Format(TimeLayout))
		}
		if e.TenantID != "" && r.Tenant != e.TenantID {
			badf("record %d: tenant %s, the report is of %s", er.Index, r.Tenant, e.TenantID)
		}
		if r.At.Before(e.From) || r.At.After(e.To) {
			badf("record %d: time %s outside the period [%s, %s]", er.Index, r.At.Format(TimeLayout),
				e.From.UTC().Format(time.RFC3339), e.To.UTC().Format(time.RFC3339))
		}
		c.counts.add(r)
		if keepMessages && (r.Type == TypeMessage || r.Type == TypeTombstone) {
			c.messages = append(c.messages, r)
		}
	}
	return c
}

// recordsChunkSize is how many records one worker takes at a time.
const recordsChunkSize = 16384

func verifyRecords(vr *VerifyReport, e *Evidence, cp Checkpoint, keepMessages bool) messageSet {
	ms := messageSet{hashes: map[string]string{}, tombstoned: map[string]bool{}}
	if len(e.Records) == 0 {
		if e.FirstIndex != -1 || e.LastIndex != -1 {
			vr.problem("no records, but firstIndex %d and lastIndex %d (want -1)", e.FirstIndex, e.LastIndex)
		}
		if e.Counts != (EvidenceCounts{}) {
			vr.problem("no records, but counts %+v", e.Counts)
		}
		return ms
	}
	if want := e.FirstIndex + int64(len(e.Records)) - 1; e.LastIndex != want {
		vr.problem("lastIndex %d, but %d records from firstIndex %d end at %d", e.LastIndex, len(e.Records), e.FirstIndex, want)
		return ms
	}
	rr, err := newRangeRoot(e.FirstIndex, e.LastIndex, cp.Size, e.RangeProof)
	if err != nil {
		vr.problem("range proof: %v", err)
		return ms
	}

	// Parsing and leaf hashing are independent per record: spread them
	// over the CPUs; the tree is then folded in order.
	leaves := make([]tlog.Hash, len(e.Records))
	chunks := make([]*recordChunk, (len(e.Records)+recordsChunkSize-1)/recordsChunkSize)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(chunks)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := int(next.Add(1) - 1)
				if k >= len(chunks) {
					return
				}
				lo := k * recordsChunkSize
				chunks[k] = verifyChunk(e, lo, min(lo+recordsChunkSize, len(e.Records)), leaves, keepMessages)
			}
		}()
	}
	wg.Wait()

	var counts EvidenceCounts
	bad, shown := 0, 0
	for _, c := range chunks {
		bad += c.bad
		for _, p := range c.problems {
			if shown < maxProblemsPerKind {
				vr.Problems = append(vr.Problems, p)
				shown++
			}
		}
		counts.Messages += c.counts.Messages
		counts.Tombstones += c.counts.Tombstones
		counts.Holds += c.counts.Holds
		counts.Releases += c.counts.Releases
		counts.Bytes += c.counts.Bytes
		for _, r := range c.messages {
			if r.Type == TypeTombstone {
				ms.tombstoned[r.SHA256] = true
			} else if _, ok := ms.hashes[r.SHA256]; !ok {
				ms.hashes[r.SHA256] = r.Message
			}
		}
	}
	if bad > shown {
		vr.problem("… and %d more record problems", bad-shown)
	}
	for _, h := range leaves {
		rr.leaf(h)
	}
	root, err := rr.root()
	if err != nil {
		vr.problem("range proof: %v", err)
	} else if root != cp.Root {
		vr.problem("records [%d, %d] and the range proof do not hash to the checkpoint's root %s: a record was changed, added, removed or reordered",
			e.FirstIndex, e.LastIndex, cp.Root)
	} else if bad == 0 {
		vr.Records = len(e.Records)
	}
	if counts != e.Counts {
		vr.problem("counts %+v, but the records count %+v", e.Counts, counts)
	}
	return ms
}

func verifyMessageFiles(vr *VerifyReport, dir string, ms messageSet) {
	found := map[string]bool{}
	var unmatched []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.EqualFold(filepath.Ext(path), ".eml") {
			return nil
		}
		sum, err := fileSHA256(path)
		if err != nil {
			return err
		}
		if _, ok := ms.hashes[sum]; !ok {
			rel, _ := filepath.Rel(dir, path)
			unmatched = append(unmatched, fmt.Sprintf("message file %s (sha256 %s) matches no message record of the report", rel, sum))
			return nil
		}
		found[sum] = true
		vr.MessagesFiles++
		return nil
	})
	if err != nil {
		vr.problem("messages: %v", err)
		return
	}
	vr.Problems = append(vr.Problems, unmatched...)
	var missing []string
	for sum, id := range ms.hashes {
		if !found[sum] && !ms.tombstoned[sum] {
			missing = append(missing, fmt.Sprintf("message %s (sha256 %s) has no .eml file in %s", id, sum, dir))
		}
	}
	sort.Strings(missing)
	vr.Problems = append(vr.Problems, missing...)
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
