package blobstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"backstop/app"
)

// PackCheck is the result of re-reading a tenant's packs.
type PackCheck struct {
	Packs   int
	Bytes   int64
	Damaged []Damage
}

// Damage names a pack or item that failed its check, and why.
type Damage struct {
	PackID   string `json:"packId,omitempty"`
	TargetID string `json:"targetId,omitempty"`
	ItemID   string `json:"itemId,omitempty"`
	Path     string `json:"path,omitempty"`
	Reason   string `json:"reason"`
}

// CheckPacks re-reads every pack of the tenant written at or after since:
// the file must hash to its name, its header must open, and every blob the
// catalogue locates in it must decrypt and match its id.
func (s *Store) CheckPacks(ctx context.Context, tenantID string, since time.Time) (PackCheck, error) {
	var pc PackCheck
	keys, err := s.tenantKeys(ctx, tenantID, false)
	if app.ErrorCode(err) == app.ENOTFOUND {
		return pc, nil
	} else if err != nil {
		return pc, err
	}
	err = s.cfg.Catalog.TenantPacks(ctx, tenantID, func(p app.PackRecord) error {
		if p.CreatedAt.Before(since) {
			return nil
		}
		b, err := s.cfg.Targets.Backend(ctx, p.TargetID)
		if err != nil {
			return err
		}
		pc.Packs++
		pc.Bytes += p.Size
		if reason := checkPack(ctx, keys, b, tenantID, p); reason != "" {
			pc.Damaged = append(pc.Damaged, Damage{PackID: p.PackID, TargetID: p.TargetID, Reason: reason})
		}
		return ctx.Err()
	})
	return pc, err
}

func checkPack(ctx context.Context, keys *tenantKeys, b Backend, tenantID string, p app.PackRecord) string {
	data, err := readAll(ctx, b, packName(tenantID, p.PackID), 0, -1, p.Size)
	if err != nil {
		return err.Error()
	}
	if int64(len(data)) != p.Size {
		return fmt.Sprintf("size %d, catalogue says %d", len(data), p.Size)
	}
	if packID(data) != p.PackID {
		return "content does not hash to the pack's name (a changed or damaged file)"
	}
	for _, e := range p.Blobs {
		if _, err := keys.openBlob(e.Type, e.ID, data[e.Offset:e.Offset+e.Length], e.RawLength); err != nil {
			return err.Error()
		}
	}
	return ""
}

// SampleCheck is the result of reading back sampled items of a snapshot.
type SampleCheck struct {
	Sampled    int
	Matched    int
	Mismatched int
	Damaged    []Damage
}

// VerifySample reads back up to n items of a snapshot chosen at random
// (every item when n <= 0), each through the same path a restore uses, and
// compares its SHA-256 with the catalogue's.
func (s *Store) VerifySample(ctx context.Context, snapshotID string, n int) (SampleCheck, error) {
	var sc SampleCheck
	snap, _, err := s.cfg.Catalog.Snapshot(ctx, snapshotID)
	if err != nil {
		return sc, err
	}
	var sample []Item
	seen := 0
	err = s.Items(ctx, snapshotID, func(it Item) error {
		if it.Kind == "folder" {
			return nil
		}
		seen++
		if n <= 0 || len(sample) < n {
			sample = append(sample, it)
		} else if j := rand.IntN(seen); j < n {
			sample[j] = it
		}
		return nil
	})
	if err != nil {
		return sc, err
	}
	for _, it := range sample {
		sc.Sampled++
		r, err := s.Open(ctx, snap.TenantID, it.Content)
		if err == nil {
			_, err = io.Copy(io.Discard, r)
			r.Close()
		}
		if err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNotFound) {
			return sc, err
		} else if err != nil {
			sc.Mismatched++
			sc.Damaged = append(sc.Damaged, Damage{ItemID: it.ID, Path: it.Path, Reason: err.Error()})
			continue
		}
		sc.Matched++
	}
	return sc, ctx.Err()
}
