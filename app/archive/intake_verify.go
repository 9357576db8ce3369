package archive

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"

	"backstop/app"
	"backstop/app/archive/chain"

	"golang.org/x/mod/sumdb/tlog"
)

// VerifyReport is what VerifyChain found.
type VerifyReport struct {
	Records     int64
	Checkpoints int
	Messages    int64 // whose bytes were re-hashed
	Purged      int64
	Bytes       int64
	// ChainProblems and MessageProblems list what did not verify (at most
	// 100 each).
	ChainProblems   []string
	MessageProblems []string
	MismatchCount   int64
}

func (r *VerifyReport) chainProblem(format string, args ...any) {
	if len(r.ChainProblems) < 100 {
		r.ChainProblems = append(r.ChainProblems, fmt.Sprintf(format, args...))
	}
}

// VerifyChain checks a tenant's archive end to end (the archive_verify
// job): every record parses, names the tenant and keeps time order; every
// stored tlog hash equals the one recomputed from the record texts; every
// checkpoint's signature, size and root, and the consistency of each with
// the next (no fork, no roll-back); every message's bytes (spool or blob
// store) against its record's sha256 and size; every purged message has a
// tombstone. It stores the chain state (broken with the reason, or ok) and
// returns an *app.FailureError (archive.chain_broken first, else
// archive.message_mismatch) when anything failed. progress, if set, is
// called with bytes re-hashed.
func (s *Service) VerifyChain(ctx context.Context, tenantID, jobID string, progress func(done, total int64)) (*VerifyReport, error) {
	rep, err := s.verify(ctx, tenantID, progress)
	if err != nil {
		return rep, err // could not run: the state stays as it was
	}
	now := s.cfg.Now().UTC()
	st := &ChainState{TenantID: tenantID, State: ChainOK, LastVerifiedAt: &now, LastVerifyJob: jobID}
	var fail *app.FailureError
	switch {
	case len(rep.ChainProblems) > 0:
		st.State, st.BrokenReason = ChainBroken, rep.ChainProblems[0]
		fail = app.Fail(app.CodeArchiveChainBroken, map[string]any{"tenantId": tenantID, "reason": rep.ChainProblems[0]},
			fmt.Errorf("%d problems: %v", len(rep.ChainProblems), rep.ChainProblems))
	case len(rep.MessageProblems) > 0:
		st.State, st.BrokenReason = ChainBroken, rep.MessageProblems[0]
		fail = app.Fail(app.CodeArchiveMessageMismatch, map[string]any{"tenantId": tenantID, "count": rep.MismatchCount},
			fmt.Errorf("%d messages: %v", rep.MismatchCount, rep.MessageProblems))
	}
	if err := s.cfg.Store.SetArchiveState(ctx, st); err != nil {
		return rep, err
	}
	if fail != nil {
		s.log.Error("archive: verification failed", slog.String("tenantId", tenantID), slog.Any("error", fail))
		return rep, fail
	}
	return rep, nil
}

type recordInfo struct {
	typ, message, sha string
	size              int64
}

func (s *Service) verify(ctx context.Context, tenantID string, progress func(done, total int64)) (*VerifyReport, error) {
	rep := &VerifyReport{}
	st := s.cfg.Store
	n, err := st.ArchiveSize(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	rep.Records = n
	// The stored hashes, all of them (32 bytes each, about 2 per record).
	want := tlog.StoredHashIndex(0, n)
	stored := make([]tlog.Hash, 0, want)
	hr := st.ArchiveHashReader(tenantID)
	for lo := int64(0); lo < want; lo += 4096 {
		idx := make([]int64, 0, 4096)
		for i := lo; i < min(lo+4096, want); i++ {
			idx = append(idx, i)
		}
		hs, err := hr.ReadHashes(idx)
		if err != nil {
			rep.chainProblem("stored hashes: %v", err)
			return rep, nil
		}
		stored = append(stored, hs...)
	}
	// Recompute every stored hash from the record texts.
	computed := make([]tlog.Hash, 0, want)
	mine := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			if x >= int64(len(computed)) {
				return nil, fmt.Errorf("hash %d not computed yet", x)
			}
			out[i] = computed[x]
		}
		return out, nil
	})
	records := map[int64]recordInfo{}
	tombstoned := map[string]bool{}
	next := int64(0)
	var lastAt int64
	firstBad := int64(-1)
	err = st.ArchiveRecords(ctx, tenantID, 0, n, func(i int64, text []byte) error {
		if i != next {
			rep.chainProblem("record %d is missing", next)
			return errStop
		}
		next++
		r, err := chain.ParseRecord(text)
		switch {
		case err != nil:
			rep.chainProblem("record %d does not parse: %v", i, err)
		case r.Tenant != tenantID:
			rep.chainProblem("record %d names tenant %s", i, r.Tenant)
		case r.At.UnixMilli() < lastAt:
			rep.chainProblem("record %d is dated %s, before record %d", i, r.At.Format("2006-01-02T15:04:05.000Z"), i-1)
		}
		if r != nil {
			lastAt = r.At.UnixMilli()
			switch r.Type {
			case chain.TypeMessage:
				records[i] = recordInfo{typ: r.Type, message: r.Message, sha: r.SHA256, size: r.Size}
			case chain.TypeTombstone:
				tombstoned[r.Message] = true
			}
		}
		hs, err := tlog.StoredHashes(i, text, mine)
		if err != nil {
			return err
		}
		computed = append(computed, hs...)
		if firstBad < 0 {
			for j, h := range hs {
				x := int64(len(computed) - len(hs) + j)
				if x >= int64(len(stored)) || stored[x] != h {
					firstBad = i
					rep.chainProblem("record %d does not match the stored tree (stored hash %d)", i, x)
					break
				}
			}
		}
		return nil
	})
	if err != nil && err != errStop {
		return nil, err
	}
	if next < n {
		return rep, nil
	}
	if extra, err := hr.ReadHashes([]int64{want}); err == nil && len(extra) == 1 {
		rep.chainProblem("stored hashes go beyond the %d records (records were removed)", n)
	}

	// Checkpoints: signature, size, root, no fork, each consistent with the next.
	cps, err := st.ArchiveCheckpoints(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	rep.Checkpoints = len(cps)
	key, origin := s.cfg.Signer.VerifierKey(), s.cfg.Origin(tenantID)
	var notes []string
	var prev *StoredCheckpoint
	for _, c := range cps {
		cp, err := chain.OpenCheckpoint(c.Note, key, origin)
		if err != nil {
			rep.chainProblem("checkpoint of size %d: %v", c.Size, err)
			continue
		}
		notes = append(notes, c.Note)
		if cp.Size != c.Size || !bytes.Equal(cp.Root[:], c.Root) {
			rep.chainProblem("checkpoint of size %d: its row does not match its signed note", c.Size)
		}
		if cp.Size > n {
			rep.chainProblem("checkpoint of size %d is beyond the log's %d records (the log was rolled back)", cp.Size, n)
			continue
		}
		root, err := tlog.TreeHash(cp.Size, mine)
		if err != nil {
			return nil, err
		}
		if root != cp.Root {
			rep.chainProblem("checkpoint of size %d: the records give another root (records changed, removed or reordered)", cp.Size)
			continue
		}
		if prev != nil {
			proof, err := tlog.ProveTree(cp.Size, prev.Size, mine)
			if err == nil {
				err = chain.CheckConsistent(prev.Note, c.Note, key, proof)
			}
			if err != nil {
				rep.chainProblem("checkpoints of sizes %d and %d are not consistent: %v", prev.Size, cp.Size, err)
			}
		}
		prev = c
	}
	if err := chain.DetectFork(notes, key); err != nil {
		rep.chainProblem("%v", err)
	}

	// Messages: bytes against records, tombstones of purged ones.
	var total int64
	if err := st.ArchiveMessagesAll(ctx, tenantID, func(m *StoredMessage) error {
		if m.PurgedAt == nil {
			total += m.Size
		}
		return nil
	}); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	err = st.ArchiveMessagesAll(ctx, tenantID, func(m *StoredMessage) error {
		seen[m.ID] = true
		ri, ok := records[m.RecordIndex]
		if !ok || ri.message != m.ID || ri.sha != m.SHA256 || ri.size != m.Size {
			rep.chainProblem("message %s does not match its record %d", m.ID, m.RecordIndex)
			return nil
		}
		if m.PurgedAt != nil {
			rep.Purged++
			if !tombstoned[m.ID] {
				rep.chainProblem("message %s was purged without a tombstone record", m.ID)
			}
			return nil
		}
		if err := s.rehash(ctx, m); err != nil {
			rep.MismatchCount++
			if len(rep.MessageProblems) < 100 {
				rep.MessageProblems = append(rep.MessageProblems, fmt.Sprintf("message %s: %v", m.ID, err))
			}
		}
		rep.Messages++
		rep.Bytes += m.Size
		if progress != nil {
			progress(rep.Bytes, total)
		}
		return ctx.Err()
	})
	if err != nil {
		return nil, err
	}
	for i, ri := range records {
		if !seen[ri.message] {
			rep.chainProblem("record %d names message %s, which the catalogue does not have", i, ri.message)
			break
		}
	}
	return rep, nil
}

var errStop = fmt.Errorf("stop")

// rehash reads a message's bytes and compares them with its record.
func (s *Service) rehash(ctx context.Context, m *StoredMessage) error {
	r, err := s.OpenContent(ctx, m.TenantID, m.ID)
	if err != nil {
		return fmt.Errorf("content missing: %w", err)
	}
	defer r.Close()
	h := sha256.New()
	n, err := io.Copy(h, r)
	if err != nil {
		return fmt.Errorf("reading: %w", err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != m.SHA256 || n != m.Size {
		return fmt.Errorf("bytes hash to %s (%d bytes), the record says %s (%d bytes)", got, n, m.SHA256, m.Size)
	}
	return nil
}
