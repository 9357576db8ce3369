package archive

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"backstop/app/archive/chain"
)

// PurgeSummary is the archive step of a retention job.
type PurgeSummary struct {
	Examined     int   `json:"examined" doc:"Messages old enough for the shortest rule that were checked."`
	Purged       int   `json:"purged" doc:"Messages whose content was deleted (each has a tombstone record)."`
	Held         int   `json:"held" doc:"Expired messages kept because an active legal hold covers them."`
	BytesPurged  int64 `json:"bytesPurged"`
	SpoolRemoved int   `json:"spoolRemoved" doc:"Spool files of purged messages removed (a run after a crash), and spool segments deleted."`
}

// purgeBatch is how many messages one transaction tombstones.
const purgeBatch = 500

// Purge applies the tenant's retention rules: every message whose time is
// up (captured_at + days <= now; days 0 expires at the next run) and that
// no active legal hold covers loses its content, in this order:
//
//  1. one transaction appends its tombstone record (reason: the rule),
//     sets purged_at, drops the content reference (the blob store's
//     garbage collection frees the blobs) and its search row;
//  2. then its spool file, if it has one, is removed, and its slice of a
//     spool segment, if it has one (even moved already: the segment may
//     still be kept for other messages), is wiped (intake_segment.go);
//  3. at the end, segments no row needs any more are deleted, and the
//     mover is woken to move the others' messages, so their segments go
//     too.
//
// A crash between 1 and 2 leaves the bytes of a purged message in the
// spool; the next Purge removes them (its rows keep their slice until it
// is wiped). Bytes in a segment that no row names (see intake_segment.go)
// stay until the segment is deleted; the API never serves a purged
// message. Hold creation waits for a batch in progress, so a hold placed
// during a purge is honoured by the next batch.
func (s *Service) Purge(ctx context.Context, tenantID string) (PurgeSummary, error) {
	var sum PurgeSummary
	// Wipes a crash left undone.
	if pending, err := s.cfg.Store.ArchivePurgedInSegments(ctx, tenantID); err != nil {
		return sum, err
	} else if err := s.wipePurged(ctx, tenantID, pending); err != nil {
		return sum, err
	}
	r, _, err := s.RetentionOf(ctx, tenantID)
	if err != nil {
		return sum, err
	}
	minDays := r.DefaultDays
	for _, rule := range r.Rules {
		minDays = min(minDays, rule.Days)
	}
	now := s.cfg.Now().UTC().Truncate(time.Millisecond)
	capturedBy := now.AddDate(0, 0, -minDays)
	after := int64(0)
	for {
		page, err := s.cfg.Store.ArchiveRetentionCandidates(ctx, tenantID, capturedBy, after, purgeBatch)
		if err != nil {
			return sum, err
		}
		if len(page) == 0 {
			break
		}
		after = page[len(page)-1].RowID
		sum.Examined += len(page)
		var expired []*MessageRow
		reasons := map[int64]string{}
		for _, m := range page {
			days, reason := ruleFor(r, &m.Message)
			if !m.CapturedAt.AddDate(0, 0, days).After(now) {
				expired = append(expired, m)
				reasons[m.RowID] = reason
			}
		}
		if len(expired) == 0 {
			continue
		}
		purged, held, err := s.purgeBatch(ctx, tenantID, expired, reasons, now)
		if err != nil {
			return sum, err
		}
		sum.Held += held
		var wipe []*StoredMessage
		for _, m := range purged {
			sum.Purged++
			sum.BytesPurged += m.Size
			if m.Spool.Segment != "" {
				wipe = append(wipe, &StoredMessage{Message: m.Message, Spool: m.Spool})
			} else if m.Spooled {
				if err := s.removeSpool(tenantID, m.SHA256); err != nil {
					return sum, err
				}
			}
		}
		if err := s.wipePurged(ctx, tenantID, wipe); err != nil {
			return sum, err
		}
	}
	n, err := s.removePurgedSpool(ctx, tenantID)
	sum.SpoolRemoved = n
	if err != nil {
		return sum, err
	}
	n, err = s.intake.cleanSegments(ctx, tenantID)
	sum.SpoolRemoved += n
	if err != nil {
		return sum, err
	}
	if sum.Purged > 0 {
		select {
		case s.intake.spooled <- struct{}{}:
		default:
		}
	}
	if sum.Purged > 0 || sum.Held > 0 {
		s.log.Info("archive retention applied", "tenant_id", tenantID, "purged", sum.Purged, "held", sum.Held,
			"bytes_purged", sum.BytesPurged)
	}
	return sum, nil
}

// purgeBatch tombstones the expired messages no active hold covers, under
// the policy lock (holds are read inside it).
func (s *Service) purgeBatch(ctx context.Context, tenantID string, expired []*MessageRow, reasons map[int64]string,
	now time.Time) (purged []*MessageRow, held int, err error) {
	s.policy.mu.Lock()
	defer s.policy.mu.Unlock()
	holds, err := s.activeHolds(ctx, tenantID)
	if err != nil {
		return nil, 0, err
	}
	covered, err := s.heldRows(ctx, holds, expired)
	if err != nil {
		return nil, 0, err
	}
	var recs []*chain.Record
	var rows []int64
	for _, m := range expired {
		if covered[m.RowID] {
			held++
			continue
		}
		purged = append(purged, m)
		rows = append(rows, m.RowID)
		recs = append(recs, &chain.Record{Type: chain.TypeTombstone, Tenant: tenantID, Message: m.ID, SHA256: m.SHA256,
			At: now, Reason: reasons[m.RowID]})
	}
	if len(recs) == 0 {
		return nil, held, nil
	}
	_, err = s.cfg.Store.AppendArchiveRecords(ctx, tenantID, recs, func(tx *sql.Tx, _ int64) error {
		return s.cfg.Store.MarkArchivePurgedTx(ctx, tx, tenantID, rows, now)
	})
	if err != nil {
		return nil, held, err
	}
	s.appended(tenantID)
	return purged, held, nil
}

func (s *Service) removeSpool(tenantID, sha string) error {
	err := os.Remove(filepath.Join(s.spoolDir(tenantID), sha))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// removePurgedSpool removes spool files of purged messages (left by a
// crash after the tombstone committed).
func (s *Service) removePurgedSpool(ctx context.Context, tenantID string) (int, error) {
	if s.cfg.DataDir == "" {
		return 0, nil
	}
	entries, err := os.ReadDir(s.spoolDir(tenantID))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	} else if err != nil {
		return 0, err
	}
	var shas []string
	for _, e := range entries {
		if n := e.Name(); e.Type().IsRegular() && len(n) == 64 {
			shas = append(shas, n)
		}
	}
	purged, err := s.cfg.Store.ArchivePurgedSHA256(ctx, tenantID, shas)
	if err != nil {
		return 0, err
	}
	n := 0
	for sha := range purged {
		if err := s.removeSpool(tenantID, sha); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
