package archive

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"backstop/app"
	"backstop/app/archive/chain"
)

// Evidence builds the tenant's evidence report of [from, to] (CONTRACT
// §14) as JSON: the latest signed checkpoint, the newest checkpoint at or
// before the period's first record (with the consistency proof from it),
// every record whose time is in the period (times never decrease along
// the log, so they are one contiguous run of indexes) with the range
// proof, the last verification and the holds active at some time in the
// period. Records after the latest checkpoint are not in the report: they
// cannot be proven yet (a checkpoint follows within CheckpointEvery).
// The export and the routes serve the same bytes.
func (s *Service) Evidence(ctx context.Context, tenantID string, from, to time.Time) ([]byte, error) {
	e, err := s.evidence(ctx, tenantID, from, to)
	if err != nil {
		return nil, err
	}
	return json.MarshalIndent(e, "", "  ")
}

func (s *Service) evidence(ctx context.Context, tenantID string, from, to time.Time) (*chain.Evidence, error) {
	from, to = from.UTC().Truncate(time.Millisecond), to.UTC().Truncate(time.Millisecond)
	if to.Before(from) {
		return nil, app.FieldError("query.to", "must not be before from")
	}
	if s.cfg.Signer == nil {
		return nil, app.Errorf(app.ENOTIMPLEMENTED, "the archive has no signing key on this appliance")
	}
	st := s.cfg.Store
	cp, err := st.ArchiveCheckpointAtMost(ctx, tenantID, -1)
	if app.ErrorCode(err) == app.ENOTFOUND {
		return nil, app.Errorf(app.ECONFLICT, "the archive has no signed checkpoint yet; retry in a minute")
	} else if err != nil {
		return nil, err
	}
	origin := ""
	if s.cfg.Origin != nil {
		origin = s.cfg.Origin(tenantID)
	}
	e := &chain.Evidence{Schema: chain.EvidenceSchema, TenantID: tenantID, From: from, To: to,
		GeneratedAt: s.cfg.Now().UTC().Truncate(time.Millisecond), Origin: origin, VerifierKey: s.cfg.Signer.VerifierKey(),
		Checkpoint: cp.Note, CheckpointStamp: cp.TSR, FirstIndex: -1, LastIndex: -1}
	first, last, ok, err := st.ArchiveRecordSpan(ctx, tenantID, from, to, cp.Size)
	if err != nil {
		return nil, err
	}
	var prev int64
	if ok {
		if last-first+1 > maxEvidenceRecords {
			return nil, app.FieldError("query.from", "the period holds %d records; at most %d fit one report: choose a shorter period",
				last-first+1, maxEvidenceRecords)
		}
		e.Records = make([]chain.EvidenceRecord, 0, last-first+1)
		err := st.ArchiveRecordRows(ctx, tenantID, first, last, func(index int64, _ string, _ time.Time, text []byte) error {
			e.Records = append(e.Records, chain.EvidenceRecord{Index: index, Record: string(text)})
			return nil
		})
		if err != nil {
			return nil, err
		}
		if pc, err := st.ArchiveCheckpointAtMost(ctx, tenantID, first); err == nil {
			e.PreviousCheckpoint, prev = pc.Note, pc.Size
		} else if app.ErrorCode(err) != app.ENOTFOUND {
			return nil, err
		}
	} else if pc, err := st.ArchiveCheckpointAtMost(ctx, tenantID, cp.Size-1); err == nil {
		e.PreviousCheckpoint, prev = pc.Note, pc.Size
	} else if app.ErrorCode(err) != app.ENOTFOUND {
		return nil, err
	}
	cs, err := st.ArchiveState(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	e.Verification = chain.Verification{State: cs.State, CheckedAt: cs.LastVerifiedAt, JobID: cs.LastVerifyJob}
	if cs.LastVerifiedAt == nil {
		e.Verification.State = "never"
	}
	holds, err := st.ArchiveHolds(ctx, tenantID, "", 0)
	if err != nil {
		return nil, err
	}
	e.Holds = []chain.EvidenceHold{}
	for i := len(holds) - 1; i >= 0; i-- { // oldest first
		h := holds[i]
		if h.CreatedAt.After(to) || h.ReleasedAt != nil && h.ReleasedAt.Before(from) {
			continue
		}
		e.Holds = append(e.Holds, chain.EvidenceHold{ID: h.ID, Name: h.Name, Matter: h.Matter, CreatedAt: h.CreatedAt,
			ReleasedAt: h.ReleasedAt, RecordIndex: h.RecordIndex})
	}
	if err := chain.BuildEvidence(e, cp.Size, prev, st.ArchiveHashReader(tenantID)); err != nil {
		return nil, fmt.Errorf("building the evidence of %s: %w", tenantID, err)
	}
	return e, nil
}

// maxEvidenceRecords bounds one report (about 400 bytes a record).
const maxEvidenceRecords = 2_000_000

// EvidencePDF renders the report JSON as the PDF of CONTRACT §14.
func EvidencePDF(reportJSON []byte) ([]byte, error) { return chain.RenderPDF(reportJSON) }
