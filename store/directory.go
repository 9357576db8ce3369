package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"backstop/app"
)

// The Microsoft 365 directory sync and the daily billing counts.

// escapeLike escapes LIKE's wildcards (with \ as the ESCAPE character).
func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// SyncDirectory implements app.DirectoryService.
func (db *DB) SyncDirectory(ctx context.Context, s app.DirectorySync) (app.DirectorySyncResult, error) {
	var res app.DirectorySyncResult
	err := db.WriteTx(ctx, func(tx *sql.Tx) error {
		res = app.DirectorySyncResult{}
		var tenantID string
		if err := tx.QueryRowContext(ctx, `SELECT tenant_id FROM sources WHERE id = ?`, s.SourceID).Scan(&tenantID); errors.Is(err, sql.ErrNoRows) {
			return app.NotFound("source")
		} else if err != nil {
			return err
		}
		existing, err := queryRows(ctx, tx, scanEntry, `SELECT `+entryColumns+` FROM directory_entries d WHERE d.source_id = ?`, s.SourceID)
		if err != nil {
			return err
		}
		byExternal := make(map[string]*app.DirectoryEntry, len(existing))
		for _, d := range existing {
			byExternal[d.ExternalID] = d
		}
		seen := make(map[string]bool, len(s.Entries))
		for _, in := range s.Entries {
			if in.ExternalID == "" || seen[in.ExternalID] {
				continue
			}
			seen[in.ExternalID] = true
			cur := byExternal[in.ExternalID]
			if cur == nil || cur.RemovedAt != nil {
				// New, or back after being removed: autoProtect decides again.
				in.Protected = s.AutoProtect && (s.ProtectEntry == nil || s.ProtectEntry(in))
			}
			if cur == nil {
				in.ID, in.SourceID, in.TenantID = "", s.SourceID, tenantID
				in.FirstSeenAt, in.LastSeenAt = s.At, s.At
				if err := insertDirectoryEntry(ctx, tx, in, db.Now); err != nil {
					return err
				}
				res.Added++
			} else {
				in.ID, in.SourceID, in.TenantID, in.FirstSeenAt, in.LastSeenAt = cur.ID, s.SourceID, tenantID, cur.FirstSeenAt, s.At
				if cur.RemovedAt == nil {
					in.Protected = cur.Protected
				}
				licenses, _ := json.Marshal(nonNil(in.Licenses))
				if _, err := tx.ExecContext(ctx, `UPDATE directory_entries SET kind=?, display_name=?, email=?, user_principal_name=?,
					enabled=?, licensed=?, licenses=?, protected=?, last_seen_at=?, removed_at=NULL WHERE id=?`, in.Kind, in.DisplayName,
					in.Email, in.UserPrincipalName, in.Enabled, in.Licensed, string(licenses), in.Protected, s.At.UnixMilli(), in.ID); err != nil {
					return err
				}
				address := in.Email
				if address == "" {
					address = in.UserPrincipalName
				}
				if _, err := tx.ExecContext(ctx, `UPDATE protected_objects SET display_name=?, address=?, protected=?
					WHERE directory_entry_id=? AND source_id IS NOT NULL`, in.DisplayName, address, in.Protected, in.ID); err != nil {
					return err
				}
				res.Updated++
			}
			if in.Protected && s.Objects != nil {
				n, err := createMissingObjects(ctx, tx, in, s.Objects(in), db.Now)
				if err != nil {
					return err
				}
				res.ObjectsCreated += n
			}
		}
		for _, d := range existing {
			if seen[d.ExternalID] || d.RemovedAt != nil {
				continue
			}
			if _, err := tx.ExecContext(ctx, `UPDATE directory_entries SET removed_at=?, protected=0 WHERE id=?`, s.At.UnixMilli(), d.ID); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE protected_objects SET protected=0 WHERE directory_entry_id=?`, d.ID); err != nil {
				return err
			}
			res.Removed++
		}
		return nil
	})
	return res, err
}

// createMissingObjects inserts the objects of want whose kind the entry
// has none of, protected, and returns how many it inserted.
func createMissingObjects(ctx context.Context, tx *sql.Tx, d *app.DirectoryEntry, want []*app.ProtectedObject, now func() time.Time) (int, error) {
	if len(want) == 0 {
		return 0, nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT kind FROM protected_objects WHERE directory_entry_id = ?`, d.ID)
	if err != nil {
		return 0, err
	}
	have := map[string]bool{}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			rows.Close()
			return 0, err
		}
		have[k] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	n := 0
	for _, o := range want {
		if have[o.Kind] {
			continue
		}
		have[o.Kind] = true
		o.TenantID, o.SourceID, o.DirectoryEntryID, o.Protected = d.TenantID, d.SourceID, d.ID, true
		if err := insertProtectedObject(ctx, tx, o, now); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// ProtectDirectoryEntry implements app.DirectoryService.
func (db *DB) ProtectDirectoryEntry(ctx context.Context, id string, protected bool, objects func(d *app.DirectoryEntry) []*app.ProtectedObject) (*app.DirectoryEntry, error) {
	err := db.WriteTx(ctx, func(tx *sql.Tx) error {
		d, err := scanEntry(tx.QueryRowContext(ctx, `SELECT `+entryColumns+` FROM directory_entries d WHERE d.id = ?`, id))
		if errors.Is(err, sql.ErrNoRows) {
			return app.NotFound("directory entry")
		} else if err != nil {
			return err
		}
		if protected && d.RemovedAt != nil {
			return app.FieldError("body.protected", "the user is gone from its tenant since %s: it cannot be protected", d.RemovedAt.UTC().Format(time.RFC3339))
		}
		if protected && objects != nil {
			if _, err := createMissingObjects(ctx, tx, d, objects(d), db.Now); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE directory_entries SET protected=? WHERE id=?`, protected, id); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE protected_objects SET protected=? WHERE directory_entry_id=? AND source_id IS NOT NULL`,
			protected, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	return db.DirectoryEntry(ctx, id)
}

// RecordDailyCounts implements app.DirectoryService.
func (db *DB) RecordDailyCounts(ctx context.Context, date string) error {
	if _, err := time.Parse(time.DateOnly, date); err != nil {
		return app.FieldError("date", "date must be YYYY-MM-DD")
	}
	rows, err := db.DirectoryCounts(ctx, "")
	if err != nil {
		return err
	}
	now := db.Now().UnixMilli()
	return db.WriteTx(ctx, func(tx *sql.Tx) error {
		for _, r := range rows {
			b, _ := json.Marshal(r.DirectoryCounts)
			if _, err := tx.ExecContext(ctx, `INSERT INTO directory_daily_counts (date, tenant_id, counts, recorded_at) VALUES (?,?,?,?)
				ON CONFLICT (date, tenant_id) DO UPDATE SET counts=excluded.counts, recorded_at=excluded.recorded_at`,
				date, r.TenantID, string(b), now); err != nil {
				return err
			}
		}
		return nil
	})
}

// HasDailyCounts implements app.DirectoryService.
func (db *DB) HasDailyCounts(ctx context.Context, date string) (bool, error) {
	var n int
	err := db.read.QueryRowContext(ctx, `SELECT count(*) FROM directory_daily_counts WHERE date = ?`, date).Scan(&n)
	return n > 0, err
}

// DailyCounts implements app.DirectoryService.
func (db *DB) DailyCounts(ctx context.Context, tenantID, from, to string) ([]app.DailyDirectoryCounts, error) {
	return queryRows(ctx, db.read, func(sc scanner) (app.DailyDirectoryCounts, error) {
		var r app.DailyDirectoryCounts
		var counts string
		if err := sc.Scan(&r.Date, &r.TenantID, &counts); err != nil {
			return r, err
		}
		return r, json.Unmarshal([]byte(counts), &r.DirectoryCounts)
	}, `SELECT date, tenant_id, counts FROM directory_daily_counts WHERE date >= ? AND date <= ? AND (? = '' OR tenant_id = ?)
		ORDER BY date, tenant_id`, from, to, tenantID, tenantID)
}
