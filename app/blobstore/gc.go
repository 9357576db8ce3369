package blobstore

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"backstop/app"
)

// GCStats is what a collection did.
type GCStats struct {
	Snapshots      int   // snapshots whose items were marked live
	Recovered      int   // manifests found on a target without a row, re-recorded
	PacksDeleted   int   // packs deleted (dead, repacked or orphaned)
	BlobsRepacked  int   // live blobs copied out of mostly-dead packs
	OrphansDeleted int   // packs on a target the catalogue never recorded
	BytesFreed     int64 // bytes deleted minus bytes written by repacking
}

// repackBelow: a pack whose live bytes are under this fraction of its size
// has its live blobs copied to a new pack and is then deleted.
const repackBelow = 0.5

// CollectGarbage deletes the tenant's blobs that no snapshot references,
// safely while backups of the tenant run:
//
//  1. finish deleting packs a crashed collection had already retired;
//  2. re-record manifests found on a target without a catalogue row (a
//     crash between storing a manifest and recording it);
//  3. mark live every blob of every snapshot (reading the manifests; any
//     unreadable manifest aborts the collection: nothing is deleted on
//     incomplete knowledge);
//  4. under the tenant's write lock, add every blob a running or
//     meanwhile-finished writer referenced, then retire packs without a live
//     blob: their blobs leave the catalogue and the packs are marked, in one
//     transaction;
//  5. copy the live blobs of mostly-dead packs into new packs, and retire
//     the old ones the same way (re-checking under the lock);
//  6. delete the retired packs' files, then their marks;
//  7. with no writer active, delete packs the catalogue never recorded
//     (left by a crash between upload and record);
//  8. replace the tenant's index files by one per target.
//
// A kill at any step leaves the catalogue naming only packs that exist.
func (s *Store) CollectGarbage(ctx context.Context, tenantID string) (GCStats, error) {
	var st GCStats
	ts := s.tenant(tenantID)
	ts.gc.Lock()
	defer ts.gc.Unlock()
	keys, err := s.tenantKeys(ctx, tenantID, false)
	if app.ErrorCode(err) == app.ENOTFOUND {
		return st, nil // nothing was ever stored for the tenant
	} else if err != nil {
		return st, err
	}
	if err := s.deleteRetired(ctx, tenantID, &st); err != nil {
		return st, err
	}

	ts.rw.Lock()
	ts.collecting, ts.closedUsed, ts.opened = true, map[app.BlobID]struct{}{}, 0
	ts.rw.Unlock()
	defer func() {
		ts.rw.Lock()
		ts.collecting, ts.closedUsed = false, nil
		ts.rw.Unlock()
	}()

	targets, err := s.tenantTargets(ctx, tenantID)
	if err != nil {
		return st, err
	}
	for id, b := range targets {
		if err := s.recoverSnapshots(ctx, keys, id, b, tenantID, &st); err != nil {
			return st, err
		}
	}
	live, err := s.liveBlobs(ctx, tenantID, &st)
	if err != nil {
		return st, err
	}

	// Retire dead packs; pick mostly-dead ones for repacking.
	var partial []app.PackRecord
	err = s.underLock(ts, live, func() error {
		var dead []app.GarbagePack
		err := s.cfg.Catalog.TenantPacks(ctx, tenantID, func(p app.PackRecord) error {
			var liveBytes int64
			for _, e := range p.Blobs {
				if _, ok := live[e.ID]; ok {
					liveBytes += e.Length
				}
			}
			switch {
			case liveBytes == 0:
				dead = append(dead, app.GarbagePack{TenantID: tenantID, PackID: p.PackID, TargetID: p.TargetID})
			case float64(liveBytes) < repackBelow*float64(p.Size):
				partial = append(partial, p)
			}
			return nil
		})
		if err != nil || len(dead) == 0 {
			return err
		}
		return s.cfg.Catalog.CollectPacks(ctx, tenantID, nil, dead)
	})
	if err != nil {
		return st, err
	}
	if len(partial) > 0 {
		if err := s.repack(ctx, tenantID, ts, live, partial, &st); err != nil {
			return st, err
		}
	}
	if err := s.deleteRetired(ctx, tenantID, &st); err != nil {
		return st, err
	}
	if err := s.deleteOrphans(ctx, ts, tenantID, targets, &st); err != nil {
		return st, err
	}
	if st.PacksDeleted > 0 {
		if err := s.compactIndex(ctx, keys, tenantID, targets); err != nil {
			return st, err
		}
	}
	s.log.Info("blob store garbage collected", slog.String("tenant", tenantID), slog.Int("packs_deleted", st.PacksDeleted),
		slog.Int("blobs_repacked", st.BlobsRepacked), slog.Int64("bytes_freed", st.BytesFreed))
	return st, nil
}

// underLock runs fn under the tenant's write lock after adding to live
// every blob referenced by writers that are running or closed since the
// collection began.
func (s *Store) underLock(ts *tenantState, live map[app.BlobID]struct{}, fn func() error) error {
	ts.rw.Lock()
	defer ts.rw.Unlock()
	for w := range ts.writers {
		w.mu.Lock()
		for id, b := range w.blobs {
			if b&blobUsed != 0 {
				live[id] = struct{}{}
			}
		}
		w.mu.Unlock()
	}
	for id := range ts.closedUsed {
		live[id] = struct{}{}
	}
	return fn()
}

// tenantTargets returns the targets holding the tenant's packs plus the
// one new data goes to.
func (s *Store) tenantTargets(ctx context.Context, tenantID string) (map[string]Backend, error) {
	out := map[string]Backend{}
	id, b, err := s.cfg.Targets.ForTenant(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	out[id] = b
	err = s.cfg.Catalog.TenantPacks(ctx, tenantID, func(p app.PackRecord) error {
		if _, ok := out[p.TargetID]; ok {
			return nil
		}
		b, err := s.cfg.Targets.Backend(ctx, p.TargetID)
		out[p.TargetID] = b
		return err
	})
	return out, err
}

// recoverSnapshots re-records manifests stored on a target that the
// catalogue lacks, so their blobs count as live.
func (s *Store) recoverSnapshots(ctx context.Context, keys *tenantKeys, targetID string, b Backend, tenantID string, st *GCStats) error {
	prefix := snapshotName(tenantID, "")
	var missing []string
	err := b.List(ctx, prefix, func(name string, _ int64) error {
		id := strings.TrimPrefix(name, prefix)
		if _, _, err := s.cfg.Catalog.Snapshot(ctx, id); app.ErrorCode(err) == app.ENOTFOUND {
			missing = append(missing, id)
		} else if err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return Failure(targetID, err)
	}
	for _, id := range missing {
		f, err := s.loadSnapshotFile(ctx, keys, b, tenantID, id)
		if errors.Is(err, ErrNotFound) {
			continue // forgotten meanwhile
		} else if err != nil {
			return err
		}
		f.Snap.TargetID = targetID
		if err := s.cfg.Catalog.AddSnapshot(ctx, &f.Snap, hexIDs(f.Tree)); err != nil && app.ErrorCode(err) != app.ECONFLICT {
			return err
		}
		st.Recovered++
		s.log.Warn("blob store: re-recorded a snapshot found on the target", slog.String("snapshot", id))
	}
	return nil
}

// liveBlobs reads every snapshot's manifest and returns the blobs they
// reference: the manifest's own tree blobs and every item's content.
func (s *Store) liveBlobs(ctx context.Context, tenantID string, st *GCStats) (map[app.BlobID]struct{}, error) {
	live := map[app.BlobID]struct{}{}
	var snaps []string
	err := s.cfg.Catalog.TenantSnapshotTrees(ctx, tenantID, func(sn *app.Snapshot, tree []string) error {
		ids, err := parseIDs(tree)
		if err != nil {
			return err
		}
		for _, id := range ids {
			live[id] = struct{}{}
		}
		snaps = append(snaps, sn.ID)
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, id := range snaps {
		err := s.Items(ctx, id, func(it Item) error {
			for _, b := range it.Blobs {
				live[b] = struct{}{}
			}
			return nil
		})
		if app.ErrorCode(err) == app.ENOTFOUND {
			continue // forgotten meanwhile: its blobs need not live
		} else if err != nil {
			return nil, wrapf(err, "reading snapshot %s (nothing was deleted)", id)
		}
		st.Snapshots++
	}
	if s.cfg.ExtraRoots != nil {
		if err := s.cfg.ExtraRoots(ctx, tenantID, func(id app.BlobID) { live[id] = struct{}{} }); err != nil {
			return nil, wrapf(err, "listing the archive's blobs (nothing was deleted)")
		}
	}
	return live, nil
}

// repack copies the live blobs of mostly-dead packs into new packs and
// retires the old packs, all but those in which a blob became referenced
// during the copy without having been copied.
func (s *Store) repack(ctx context.Context, tenantID string, ts *tenantState, live map[app.BlobID]struct{}, partial []app.PackRecord, st *GCStats) error {
	w, err := s.newWriter(ctx, tenantID, true)
	if err != nil {
		return err
	}
	defer w.Close()
	copied := map[app.BlobID]struct{}{}
	for _, p := range partial {
		b, err := s.cfg.Targets.Backend(ctx, p.TargetID)
		if err != nil {
			return err
		}
		data, err := readAll(ctx, b, packName(tenantID, p.PackID), 0, p.Size, p.Size)
		if err != nil {
			return Failure(p.TargetID, err)
		}
		if packID(data) != p.PackID {
			s.log.Error("blob store: pack damaged, not repacked", slog.String("pack", p.PackID))
			continue
		}
		for _, e := range p.Blobs {
			if _, ok := live[e.ID]; !ok {
				continue
			}
			if err := w.appendStored(ctx, e, data[e.Offset:e.Offset+e.Length]); err != nil {
				return err
			}
			copied[e.ID] = struct{}{}
		}
	}
	if err := w.Flush(ctx); err != nil {
		return err
	}
	return s.underLock(ts, live, func() error {
		var retire []app.GarbagePack
		for _, p := range partial {
			ok := true
			for _, e := range p.Blobs {
				if _, isLive := live[e.ID]; isLive {
					if _, done := copied[e.ID]; !done {
						ok = false
						break
					}
				}
			}
			if ok {
				retire = append(retire, app.GarbagePack{TenantID: tenantID, PackID: p.PackID, TargetID: p.TargetID})
			}
		}
		if err := s.cfg.Catalog.CollectPacks(ctx, tenantID, w.records, retire); err != nil {
			return err
		}
		st.BlobsRepacked += len(copied)
		for _, r := range w.records {
			st.BytesFreed -= r.Size
		}
		return nil
	})
}

// deleteRetired deletes the files of retired packs, then their marks.
func (s *Store) deleteRetired(ctx context.Context, tenantID string, st *GCStats) error {
	retired, err := s.cfg.Catalog.Garbage(ctx, tenantID)
	if err != nil || len(retired) == 0 {
		return err
	}
	var done []string
	for _, g := range retired {
		b, err := s.cfg.Targets.Backend(ctx, g.TargetID)
		if err != nil {
			return err
		}
		name := packName(tenantID, g.PackID)
		size, err := b.Stat(ctx, name)
		if err == nil {
			err = b.Delete(ctx, name)
		} else if errors.Is(err, ErrNotFound) {
			size, err = 0, nil
		}
		if err != nil {
			return Failure(g.TargetID, err)
		}
		st.PacksDeleted++
		st.BytesFreed += size
		done = append(done, g.PackID)
	}
	return s.cfg.Catalog.ForgetGarbage(ctx, tenantID, done)
}

// deleteOrphans deletes packs on the tenant's targets that the catalogue
// does not name. It runs only while no writer of the tenant is active and
// none was opened during the collection, and holds the tenant's lock
// throughout, so a pack being uploaded (on the target before it is in the
// catalogue) is never taken for an orphan.
func (s *Store) deleteOrphans(ctx context.Context, ts *tenantState, tenantID string, targets map[string]Backend, st *GCStats) error {
	ts.rw.Lock()
	defer ts.rw.Unlock()
	if len(ts.writers) > 0 || ts.opened > 0 {
		return nil
	}
	known := map[string]bool{}
	err := s.cfg.Catalog.TenantPacks(ctx, tenantID, func(p app.PackRecord) error {
		known[p.PackID] = true
		return nil
	})
	if err != nil {
		return err
	}
	prefix := tenantPrefix(tenantID) + "packs/"
	for targetID, b := range targets {
		var orphans []string
		err := b.List(ctx, prefix, func(name string, size int64) error {
			if id := name[strings.LastIndexByte(name, '/')+1:]; !known[id] {
				orphans = append(orphans, name)
				st.BytesFreed += size
			}
			return nil
		})
		if err != nil {
			return Failure(targetID, err)
		}
		for _, name := range orphans {
			if err := b.Delete(ctx, name); err != nil {
				return Failure(targetID, err)
			}
			st.OrphansDeleted++
			st.PacksDeleted++
		}
	}
	return nil
}

// compactIndex writes one index file per target for the tenant's packs
// there and deletes the index files that existed before it. A writer's
// index file written meanwhile is not among those listed, so it stays.
func (s *Store) compactIndex(ctx context.Context, keys *tenantKeys, tenantID string, targets map[string]Backend) error {
	for targetID, b := range targets {
		var old []string
		prefix := indexName(tenantID, "")
		if err := b.List(ctx, prefix, func(name string, _ int64) error {
			old = append(old, name)
			return nil
		}); err != nil {
			return Failure(targetID, err)
		}
		var packs []indexPack
		err := s.cfg.Catalog.TenantPacks(ctx, tenantID, func(p app.PackRecord) error {
			if p.TargetID == targetID {
				packs = append(packs, indexPack{ID: p.PackID, Size: p.Size, Entries: p.Blobs})
			}
			return nil
		})
		if err != nil {
			return err
		}
		if len(packs) > 0 {
			body := keys.sealMeta(adIndex, encodeIndex(packs))
			name := indexName(tenantID, packID(body))
			if err := createBytes(ctx, b, name, body); err != nil && !errors.Is(err, ErrExists) {
				return Failure(targetID, err)
			}
			old = removeString(old, name)
		}
		for _, name := range old {
			if err := b.Delete(ctx, name); err != nil {
				return Failure(targetID, err)
			}
		}
	}
	return nil
}

func removeString(list []string, s string) []string {
	out := list[:0]
	for _, v := range list {
		if v != s {
			out = append(out, v)
		}
	}
	return out
}
