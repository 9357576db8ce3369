package store

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"backstop/app"
)

// The blob store's catalogue (migration 0009, docs/blobstore.md).

var _ app.BlobCatalog = (*DB)(nil)

// TenantKey implements app.BlobCatalog.
func (db *DB) TenantKey(ctx context.Context, tenantID string) ([]byte, error) {
	var sealed []byte
	err := db.read.QueryRowContext(ctx, `SELECT sealed FROM blob_tenant_keys WHERE tenant_id = ?`, tenantID).Scan(&sealed)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, app.NotFound("tenant key")
	}
	return sealed, err
}

// AddTenantKey implements app.BlobCatalog.
func (db *DB) AddTenantKey(ctx context.Context, tenantID string, sealed []byte, at time.Time) error {
	return db.WriteTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO blob_tenant_keys (tenant_id, sealed, created_at) VALUES (?,?,?)`,
			tenantID, sealed, at.UnixMilli())
		return convertError(err)
	})
}

// BlobTenants implements app.BlobCatalog.
func (db *DB) BlobTenants(ctx context.Context) ([]string, error) {
	return queryRows(ctx, db.read, func(s scanner) (string, error) {
		var id string
		return id, s.Scan(&id)
	}, `SELECT tenant_id FROM blob_tenant_keys ORDER BY tenant_id`)
}

// LookupBlobs implements app.BlobCatalog. Ids are looked up in batches of
// up to 500 (SQLite's default limit on bound parameters is 32766).
func (db *DB) LookupBlobs(ctx context.Context, tenantID string, ids []app.BlobID) (map[app.BlobID]app.BlobLocation, error) {
	out := make(map[app.BlobID]app.BlobLocation, len(ids))
	if len(ids) == 1 {
		// The writer's dedup check, once per blob stored: a prepared statement.
		var loc app.BlobLocation
		err := db.queryRowCached(ctx, `SELECT b.pack_id, p.target_id, b.offset, b.length, b.raw_length
			FROM blobs b JOIN blob_packs p ON p.tenant_id = b.tenant_id AND p.pack_id = b.pack_id
			WHERE b.tenant_id = ? AND b.blob_id = ?`, tenantID, ids[0][:]).Scan(&loc.PackID, &loc.TargetID, &loc.Offset, &loc.Length, &loc.RawLength)
		if errors.Is(err, sql.ErrNoRows) {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		out[ids[0]] = loc
		return out, nil
	}
	for len(ids) > 0 {
		n := min(len(ids), 500)
		batch := ids[:n]
		ids = ids[n:]
		args := make([]any, 0, n+1)
		args = append(args, tenantID)
		for i := range batch {
			args = append(args, batch[i][:])
		}
		rows, err := db.read.QueryContext(ctx, `SELECT b.blob_id, b.pack_id, p.target_id, b.offset, b.length, b.raw_length
			FROM blobs b JOIN blob_packs p ON p.tenant_id = b.tenant_id AND p.pack_id = b.pack_id
			WHERE b.tenant_id = ? AND b.blob_id IN (?`+strings.Repeat(",?", n-1)+`)`, args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var raw []byte
			var loc app.BlobLocation
			if err := rows.Scan(&raw, &loc.PackID, &loc.TargetID, &loc.Offset, &loc.Length, &loc.RawLength); err != nil {
				rows.Close()
				return nil, err
			}
			var id app.BlobID
			copy(id[:], raw)
			out[id] = loc
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// AddPacks implements app.BlobCatalog.
func (db *DB) AddPacks(ctx context.Context, packs []app.PackRecord) error {
	return db.WriteTx(ctx, func(tx *sql.Tx) error {
		for _, p := range packs {
			if err := insertPack(ctx, tx, p, false); err != nil {
				return err
			}
		}
		return nil
	})
}

// insertPack records p; move says whether its blobs take over rows that
// already exist (a repack) or leave them (a duplicate written concurrently).
func insertPack(ctx context.Context, tx *sql.Tx, p app.PackRecord, move bool) error {
	if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO blob_packs (tenant_id, pack_id, target_id, size, blobs, created_at)
		VALUES (?,?,?,?,?,?)`, p.TenantID, p.PackID, p.TargetID, p.Size, len(p.Blobs), p.CreatedAt.UnixMilli()); err != nil {
		return err
	}
	verb := "INSERT OR IGNORE"
	if move {
		verb = "INSERT OR REPLACE"
	}
	stmt, err := tx.PrepareContext(ctx, verb+` INTO blobs (tenant_id, blob_id, type, pack_id, offset, length, raw_length) VALUES (?,?,?,?,?,?,?)`)
	if err != nil {
		return err
	}
	defer stmt.Close()
	for _, b := range p.Blobs {
		if _, err := stmt.ExecContext(ctx, p.TenantID, b.ID[:], int(b.Type), p.PackID, b.Offset, b.Length, b.RawLength); err != nil {
			return err
		}
	}
	return nil
}

// TenantPacks implements app.BlobCatalog: the blobs of each pack are those
// the catalogue locates there (a duplicate stored again elsewhere is not).
func (db *DB) TenantPacks(ctx context.Context, tenantID string, fn func(app.PackRecord) error) error {
	packs, err := queryRows(ctx, db.read, func(s scanner) (app.PackRecord, error) {
		p := app.PackRecord{TenantID: tenantID}
		var at int64
		err := s.Scan(&p.PackID, &p.TargetID, &p.Size, &at)
		p.CreatedAt = msTime(at)
		return p, err
	}, `SELECT pack_id, target_id, size, created_at FROM blob_packs WHERE tenant_id = ? ORDER BY pack_id`, tenantID)
	if err != nil {
		return err
	}
	for _, p := range packs {
		p.Blobs, err = queryRows(ctx, db.read, func(s scanner) (app.BlobEntry, error) {
			var e app.BlobEntry
			var raw []byte
			var typ int
			err := s.Scan(&raw, &typ, &e.Offset, &e.Length, &e.RawLength)
			copy(e.ID[:], raw)
			e.Type = byte(typ)
			return e, err
		}, `SELECT blob_id, type, offset, length, raw_length FROM blobs WHERE tenant_id = ? AND pack_id = ? ORDER BY offset`, tenantID, p.PackID)
		if err != nil {
			return err
		}
		if err := fn(p); err != nil {
			return err
		}
	}
	return nil
}

// CollectPacks implements app.BlobCatalog.
func (db *DB) CollectPacks(ctx context.Context, tenantID string, repacked []app.PackRecord, dead []app.GarbagePack) error {
	return db.WriteTx(ctx, func(tx *sql.Tx) error {
		for _, p := range repacked {
			if err := insertPack(ctx, tx, p, true); err != nil {
				return err
			}
		}
		for _, g := range dead {
			if _, err := tx.ExecContext(ctx, `DELETE FROM blobs WHERE tenant_id = ? AND pack_id = ?`, tenantID, g.PackID); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM blob_packs WHERE tenant_id = ? AND pack_id = ?`, tenantID, g.PackID); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO blob_gc (tenant_id, pack_id, target_id) VALUES (?,?,?)`,
				tenantID, g.PackID, g.TargetID); err != nil {
				return err
			}
		}
		return nil
	})
}

// Garbage implements app.BlobCatalog.
func (db *DB) Garbage(ctx context.Context, tenantID string) ([]app.GarbagePack, error) {
	return queryRows(ctx, db.read, func(s scanner) (app.GarbagePack, error) {
		g := app.GarbagePack{TenantID: tenantID}
		return g, s.Scan(&g.PackID, &g.TargetID)
	}, `SELECT pack_id, target_id FROM blob_gc WHERE tenant_id = ? ORDER BY pack_id`, tenantID)
}

// ForgetGarbage implements app.BlobCatalog.
func (db *DB) ForgetGarbage(ctx context.Context, tenantID string, packIDs []string) error {
	return db.WriteTx(ctx, func(tx *sql.Tx) error {
		for _, id := range packIDs {
			if _, err := tx.ExecContext(ctx, `DELETE FROM blob_gc WHERE tenant_id = ? AND pack_id = ?`, tenantID, id); err != nil {
				return err
			}
		}
		return nil
	})
}

const snapshotColumns = `id, tenant_id, protected_object_id, target_id, at, items, bytes, added_items, removed_items, job_id, tree`

func scanSnapshot(s scanner) (*app.Snapshot, []string, error) {
	var sn app.Snapshot
	var at int64
	var tree string
	if err := s.Scan(&sn.ID, &sn.TenantID, &sn.ProtectedObjectID, &sn.TargetID, &at, &sn.Items, &sn.Bytes,
		&sn.AddedItems, &sn.RemovedItems, &sn.JobID, &tree); err != nil {
		return nil, nil, err
	}
	sn.At = app.At(msTime(at))
	return &sn, strings.Fields(tree), nil
}

// AddSnapshot implements app.BlobCatalog.
func (db *DB) AddSnapshot(ctx context.Context, s *app.Snapshot, tree []string) error {
	return db.WriteTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO snapshots (`+snapshotColumns+`) VALUES (?,?,?,?,?,?,?,?,?,?,?)`,
			s.ID, s.TenantID, s.ProtectedObjectID, s.TargetID, s.At.UnixMilli(), s.Items, s.Bytes, s.AddedItems,
			s.RemovedItems, s.JobID, strings.Join(tree, " "))
		return convertError(err)
	})
}

// Snapshot implements app.BlobCatalog.
func (db *DB) Snapshot(ctx context.Context, id string) (*app.Snapshot, []string, error) {
	s, tree, err := scanSnapshot(db.read.QueryRowContext(ctx, `SELECT `+snapshotColumns+` FROM snapshots WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, app.NotFound("snapshot")
	}
	return s, tree, err
}

// Snapshots implements app.BlobCatalog and app.SnapshotLister: newest first.
func (db *DB) Snapshots(ctx context.Context, f app.SnapshotFilter) ([]*app.Snapshot, error) {
	q, args := `SELECT `+snapshotColumns+` FROM snapshots WHERE 1=1`, []any{}
	if f.TenantID != "" {
		q, args = q+` AND tenant_id = ?`, append(args, f.TenantID)
	}
	if f.ProtectedObjectID != "" {
		q, args = q+` AND protected_object_id = ?`, append(args, f.ProtectedObjectID)
	}
	if f.Before != "" {
		q, args = q+` AND (at, id) < (SELECT at, id FROM snapshots WHERE id = ?)`, append(args, f.Before)
	}
	q += ` ORDER BY at DESC, id DESC`
	if f.Limit > 0 {
		q, args = q+` LIMIT ?`, append(args, f.Limit)
	}
	return queryRows(ctx, db.read, func(s scanner) (*app.Snapshot, error) {
		sn, _, err := scanSnapshot(s)
		return sn, err
	}, q, args...)
}

// DeleteSnapshot implements app.BlobCatalog.
func (db *DB) DeleteSnapshot(ctx context.Context, tenantID, id string) error {
	return db.WriteTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM snapshots WHERE tenant_id = ? AND id = ?`, tenantID, id)
		return err
	})
}

// TenantSnapshotTrees implements app.BlobCatalog.
func (db *DB) TenantSnapshotTrees(ctx context.Context, tenantID string, fn func(*app.Snapshot, []string) error) error {
	type row struct {
		s    *app.Snapshot
		tree []string
	}
	rows, err := queryRows(ctx, db.read, func(s scanner) (row, error) {
		sn, tree, err := scanSnapshot(s)
		return row{sn, tree}, err
	}, `SELECT `+snapshotColumns+` FROM snapshots WHERE tenant_id = ? ORDER BY at, id`, tenantID)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if err := fn(r.s, r.tree); err != nil {
			return err
		}
	}
	return nil
}
