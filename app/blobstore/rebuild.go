package blobstore

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"backstop/app"
)

// RebuildStats is what a rebuild found on a target.
type RebuildStats struct {
	TargetID  string
	Tenants   int
	Packs     int
	Blobs     int
	Snapshots int
	// Skipped names objects that could not be read, with why.
	Skipped []string
}

// ReadMarker returns the target id recorded at a target's root, or an
// error if the target holds no Backstop blob store.
func ReadMarker(ctx context.Context, b Backend) (string, error) {
	body, err := readAll(ctx, b, markerName, 0, -1, 4096)
	if errors.Is(err, ErrNotFound) {
		return "", fmt.Errorf("%s holds no Backstop blob store (no %s file at its root)", b, markerName)
	} else if err != nil {
		return "", err
	}
	var m marker
	if err := json.Unmarshal(body, &m); err != nil || m.Format != formatName {
		return "", fmt.Errorf("%s: %s is not a Backstop blob store marker", b, markerName)
	}
	if m.Version != formatVersion {
		return "", fmt.Errorf("%s: blob store format version %d; this Backstop reads version %d", b, m.Version, formatVersion)
	}
	return m.TargetID, nil
}

// Rebuild records in the catalogue everything a target holds: each
// tenant's sealed key (ensureTenant is called first, so the tenant row
// exists), its packs and blobs (from the index files, and from the pack
// headers of packs no index names), and its snapshots, all as stored on
// targetID (the target's id in this catalogue; "" means the id its marker
// records). It is idempotent and changes nothing on the target. The
// appliance key must be the one that sealed the tenants' keys.
func (s *Store) Rebuild(ctx context.Context, targetID string, b Backend, ensureTenant func(ctx context.Context, id, name string) error) (RebuildStats, error) {
	var st RebuildStats
	marked, err := ReadMarker(ctx, b)
	if err != nil {
		return st, err
	}
	if targetID == "" {
		targetID = marked
	}
	st.TargetID = targetID
	var tenants []string
	err = b.List(ctx, "tenants/", func(name string, _ int64) error {
		if parts := strings.Split(name, "/"); len(parts) == 3 && parts[2] == "key" {
			tenants = append(tenants, parts[1])
		}
		return nil
	})
	if err != nil {
		return st, err
	}
	for _, tenantID := range tenants {
		if err := s.rebuildTenant(ctx, targetID, b, tenantID, ensureTenant, &st); err != nil {
			return st, fmt.Errorf("tenant %s: %w", tenantID, err)
		}
		st.Tenants++
	}
	return st, nil
}

func (s *Store) rebuildTenant(ctx context.Context, targetID string, b Backend, tenantID string,
	ensureTenant func(ctx context.Context, id, name string) error, st *RebuildStats) error {
	body, err := readAll(ctx, b, keyName(tenantID), 0, -1, 64<<10)
	if err != nil {
		return err
	}
	var kf keyFile
	if err := json.Unmarshal(body, &kf); err != nil || kf.TenantID != tenantID {
		return fmt.Errorf("key file: %w", ErrCorrupt)
	}
	master, err := s.cfg.Key.openTenantKey(tenantID, kf.Sealed)
	if err != nil {
		return err
	}
	keys, err := newTenantKeys(master)
	if err != nil {
		return err
	}
	if err := ensureTenant(ctx, tenantID, kf.Name); err != nil {
		return err
	}
	if err := s.cfg.Catalog.AddTenantKey(ctx, tenantID, kf.Sealed, s.now()); err != nil && app.ErrorCode(err) != app.ECONFLICT {
		return err
	}

	// Packs: every pack file, described by an index file or its own header.
	sizes := map[string]int64{}
	packPrefix := tenantPrefix(tenantID) + "packs/"
	if err := b.List(ctx, packPrefix, func(name string, size int64) error {
		sizes[name[strings.LastIndexByte(name, '/')+1:]] = size
		return nil
	}); err != nil {
		return err
	}
	described := map[string][]app.BlobEntry{}
	err = b.List(ctx, indexName(tenantID, ""), func(name string, _ int64) error {
		sealed, err := readAll(ctx, b, name, 0, -1, 256<<20)
		if err != nil {
			return err
		}
		plain, err := keys.openMeta(adIndex, sealed)
		if err == nil {
			var packs []indexPack
			if packs, err = parseIndex(plain); err == nil {
				for _, p := range packs {
					if size, ok := sizes[p.ID]; ok && size == p.Size {
						described[p.ID] = append(described[p.ID], p.Entries...)
					}
				}
			}
		}
		if err != nil {
			st.Skipped = append(st.Skipped, name+": "+err.Error())
		}
		return nil
	})
	if err != nil {
		return err
	}
	var records []app.PackRecord
	for id, size := range sizes {
		entries, ok := described[id]
		if !ok {
			if entries, err = s.readPackHeader(ctx, keys, b, tenantID, id, size); err != nil {
				st.Skipped = append(st.Skipped, packName(tenantID, id)+": "+err.Error())
				continue
			}
		}
		records = append(records, app.PackRecord{TenantID: tenantID, PackID: id, TargetID: targetID, Size: size,
			CreatedAt: s.now(), Blobs: entries})
		st.Packs++
		st.Blobs += len(entries)
		if len(records) >= 100 {
			if err := s.cfg.Catalog.AddPacks(ctx, records); err != nil {
				return err
			}
			records = records[:0]
		}
	}
	if err := s.cfg.Catalog.AddPacks(ctx, records); err != nil {
		return err
	}

	prefix := snapshotName(tenantID, "")
	var snaps []string
	if err := b.List(ctx, prefix, func(name string, _ int64) error {
		snaps = append(snaps, strings.TrimPrefix(name, prefix))
		return nil
	}); err != nil {
		return err
	}
	for _, id := range snaps {
		f, err := s.loadSnapshotFile(ctx, keys, b, tenantID, id)
		if err != nil {
			st.Skipped = append(st.Skipped, snapshotName(tenantID, id)+": "+err.Error())
			continue
		}
		f.Snap.TargetID = targetID
		if err := s.cfg.Catalog.AddSnapshot(ctx, &f.Snap, hexIDs(f.Tree)); err != nil && app.ErrorCode(err) != app.ECONFLICT {
			return err
		}
		st.Snapshots++
	}
	return nil
}

// readPackHeader reads a pack's blob list from its sealed header at the end.
func (s *Store) readPackHeader(ctx context.Context, keys *tenantKeys, b Backend, tenantID, id string, size int64) ([]app.BlobEntry, error) {
	if size < 4+nonceSize+tagSize {
		return nil, fmt.Errorf("%w (pack too small)", ErrCorrupt)
	}
	name := packName(tenantID, id)
	tail, err := readAll(ctx, b, name, size-4, 4, 4)
	if err != nil {
		return nil, err
	}
	n := int64(binary.LittleEndian.Uint32(tail))
	if n > maxHeaderBytes || n > size-4 {
		return nil, fmt.Errorf("%w (header length %d)", ErrCorrupt, n)
	}
	sealed, err := readAll(ctx, b, name, size-4-n, n, n)
	if err != nil {
		return nil, err
	}
	return keys.parsePackHeader(sealed, size)
}
