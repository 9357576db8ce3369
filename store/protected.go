package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"backstop/app"
)

var (
	_ app.SourceStore            = (*DB)(nil)
	_ app.ProtectedObjectService = (*DB)(nil)
	_ app.DirectoryService       = (*DB)(nil)
)

// Sources.

const sourceColumns = `id, tenant_id, kind, display_name, disabled, state, last_error, created_at, schedule, settings, sealed_secret`

func scanSource(s scanner) (*app.Source, error) {
	var src app.Source
	var created int64
	var settings string
	if err := s.Scan(&src.ID, &src.TenantID, &src.Kind, &src.DisplayName, &src.Disabled, &src.State, &src.LastError,
		&created, &src.Schedule, &settings, &src.SealedSecret); err != nil {
		return nil, err
	}
	src.CreatedAt = msTime(created)
	switch src.Kind {
	case app.SourceIMAP:
		if err := json.Unmarshal([]byte(settings), &src.IMAP); err != nil {
			return nil, err
		}
	case app.SourceM365:
		if err := json.Unmarshal([]byte(settings), &src.M365); err != nil {
			return nil, err
		}
	}
	return &src, nil
}

func sourceSettings(s *app.Source) string {
	var v any
	switch s.Kind {
	case app.SourceIMAP:
		v = s.IMAP
	case app.SourceM365:
		v = s.M365
	default:
		return "{}"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// CreateSource implements app.SourceStore.
func (db *DB) CreateSource(ctx context.Context, s *app.Source, objects []*app.ProtectedObject, entries []*app.DirectoryEntry) error {
	if s.ID == "" {
		s.ID = app.NewID(app.PrefixSource)
	}
	if s.CreatedAt.IsZero() {
		s.CreatedAt = db.Now()
	}
	if s.State == "" {
		s.State = app.SourceOK
	}
	return db.WriteTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO sources (`+sourceColumns+`) VALUES (?,?,?,?,?,?,?,?,?,?,?)`,
			s.ID, s.TenantID, s.Kind, s.DisplayName, s.Disabled, s.State, s.LastError, s.CreatedAt.UnixMilli(), s.Schedule,
			sourceSettings(s), s.SealedSecret); err != nil {
			return convertError(err)
		}
		for _, d := range entries {
			d.SourceID, d.TenantID = s.ID, s.TenantID
			if err := insertDirectoryEntry(ctx, tx, d, db.Now); err != nil {
				return err
			}
		}
		for _, o := range objects {
			o.SourceID, o.TenantID = s.ID, s.TenantID
			if err := insertProtectedObject(ctx, tx, o, db.Now); err != nil {
				return err
			}
		}
		return nil
	})
}

// Source implements app.SourceStore.
func (db *DB) Source(ctx context.Context, id string) (*app.Source, error) {
	s, err := scanSource(db.read.QueryRowContext(ctx, `SELECT `+sourceColumns+` FROM sources WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, app.NotFound("source")
	}
	return s, err
}

// Sources implements app.SourceStore.
func (db *DB) Sources(ctx context.Context, f app.SourceFilter) ([]*app.Source, error) {
	q, args := `SELECT `+sourceColumns+` FROM sources WHERE id > ?`, []any{f.AfterID}
	if f.TenantID != "" {
		q, args = q+` AND tenant_id = ?`, append(args, f.TenantID)
	}
	q += ` ORDER BY id`
	if f.Limit > 0 {
		q, args = q+` LIMIT ?`, append(args, f.Limit)
	}
	return queryRows(ctx, db.read, scanSource, q, args...)
}

// UpdateSource implements app.SourceStore.
func (db *DB) UpdateSource(ctx context.Context, id string, fn func(s *app.Source) error) (*app.Source, error) {
	var out *app.Source
	err := db.WriteTx(ctx, func(tx *sql.Tx) error {
		s, err := scanSource(tx.QueryRowContext(ctx, `SELECT `+sourceColumns+` FROM sources WHERE id = ?`, id))
		if errors.Is(err, sql.ErrNoRows) {
			return app.NotFound("source")
		} else if err != nil {
			return err
		}
		name := s.DisplayName
		if err := fn(s); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE sources SET display_name=?, disabled=?, state=?, last_error=?, schedule=?,
			settings=?, sealed_secret=? WHERE id=?`, s.DisplayName, s.Disabled, s.State, s.LastError, s.Schedule,
			sourceSettings(s), s.SealedSecret, s.ID); err != nil {
			return err
		}
		if s.DisplayName != name && s.Kind == app.SourceIMAP {
			// An IMAP source is one account: its object and entry carry its name.
			if _, err := tx.ExecContext(ctx, `UPDATE protected_objects SET display_name=? WHERE source_id=?`, s.DisplayName, s.ID); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE directory_entries SET display_name=? WHERE source_id=?`, s.DisplayName, s.ID); err != nil {
				return err
			}
		}
		out = s
		return nil
	})
	return out, err
}

// DeleteSource implements app.SourceStore: the source's objects are
// unprotected and lose their source (ON DELETE SET NULL), its directory
// entries go (ON DELETE CASCADE), in one transaction.
func (db *DB) DeleteSource(ctx context.Context, id string) error {
	return db.WriteTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE protected_objects SET protected=0 WHERE source_id=?`, id); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM sources WHERE id=?`, id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return app.NotFound("source")
		}
		return nil
	})
}

// Protected objects.

const objectColumns = `o.id, o.tenant_id, o.kind, o.source_kind, coalesce(o.source_id, ''), coalesce(o.directory_entry_id, ''),
	o.external_id, o.display_name, o.address, o.protected, o.created_at, o.last_backup_at, o.last_backup_state,
	o.last_success_at, o.last_snapshot_id, o.last_snapshot_at, o.last_snapshot_items, o.last_snapshot_bytes, o.verify_state,
	o.verify_checked_at, o.verify_passed_snapshot_id, o.repository_damaged, o.last_verify_started_at,
	CASE WHEN s.id IS NULL THEN '' WHEN s.disabled THEN 'disabled' ELSE s.state END, coalesce(s.schedule, '')`

const objectFrom = ` FROM protected_objects o LEFT JOIN sources s ON s.id = o.source_id`

func scanObject(sc scanner) (*app.ProtectedObject, error) {
	var o app.ProtectedObject
	var created int64
	var backup, success, snapAt, checked, verifyStarted sql.NullInt64
	if err := sc.Scan(&o.ID, &o.TenantID, &o.Kind, &o.SourceKind, &o.SourceID, &o.DirectoryEntryID, &o.ExternalID,
		&o.DisplayName, &o.Address, &o.Protected, &created, &backup, &o.LastBackupState, &success, &o.LastSnapshotID,
		&snapAt, &o.LastSnapshotItems, &o.LastSnapshotBytes, &o.VerifyState, &checked, &o.VerifyPassedSnapshotID,
		&o.RepositoryDamaged, &verifyStarted, &o.SourceState, &o.SourceSchedule); err != nil {
		return nil, err
	}
	o.CreatedAt = msTime(created)
	o.LastBackupAt, o.LastSuccessAt, o.LastSnapshotAt = fromMs(backup), fromMs(success), fromMs(snapAt)
	o.VerifyCheckedAt, o.LastVerifyStartedAt = fromMs(checked), fromMs(verifyStarted)
	return &o, nil
}

func insertProtectedObject(ctx context.Context, tx *sql.Tx, o *app.ProtectedObject, now func() time.Time) error {
	if o.ID == "" {
		o.ID = app.NewID(app.PrefixProtected)
	}
	if o.CreatedAt.IsZero() {
		o.CreatedAt = now()
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO protected_objects (id, tenant_id, kind, source_kind, source_id,
		directory_entry_id, external_id, display_name, address, protected, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)`,
		o.ID, o.TenantID, o.Kind, o.SourceKind, nullString(o.SourceID), nullString(o.DirectoryEntryID), o.ExternalID,
		o.DisplayName, o.Address, o.Protected, o.CreatedAt.UnixMilli())
	return convertError(err)
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// ProtectedObject implements app.ProtectedObjectService.
func (db *DB) ProtectedObject(ctx context.Context, id string) (*app.ProtectedObject, error) {
	o, err := scanObject(db.read.QueryRowContext(ctx, `SELECT `+objectColumns+objectFrom+` WHERE o.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, app.NotFound("protected object")
	}
	return o, err
}

// ProtectedObjects implements app.ProtectedObjectService.
func (db *DB) ProtectedObjects(ctx context.Context, f app.ProtectedObjectFilter) ([]*app.ProtectedObject, error) {
	q, args := `SELECT `+objectColumns+objectFrom+` WHERE o.id > ?`, []any{f.AfterID}
	if f.TenantID != "" {
		q, args = q+` AND o.tenant_id = ?`, append(args, f.TenantID)
	}
	if f.Kind != "" {
		q, args = q+` AND o.kind = ?`, append(args, f.Kind)
	}
	if f.SourceID != "" {
		q, args = q+` AND o.source_id = ?`, append(args, f.SourceID)
	}
	q += ` ORDER BY o.id`
	if f.Limit > 0 {
		q, args = q+` LIMIT ?`, append(args, f.Limit)
	}
	return queryRows(ctx, db.read, scanObject, q, args...)
}

// UpdateProtectedObject implements app.ProtectedObjectService. Identity
// (tenant, kind, source) is not changed; everything else is written back.
func (db *DB) UpdateProtectedObject(ctx context.Context, id string, fn func(o *app.ProtectedObject) error) (*app.ProtectedObject, error) {
	var out *app.ProtectedObject
	err := db.WriteTx(ctx, func(tx *sql.Tx) error {
		o, err := scanObject(tx.QueryRowContext(ctx, `SELECT `+objectColumns+objectFrom+` WHERE o.id = ?`, id))
		if errors.Is(err, sql.ErrNoRows) {
			return app.NotFound("protected object")
		} else if err != nil {
			return err
		}
		if err := fn(o); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE protected_objects SET display_name=?, address=?, protected=?, last_backup_at=?,
			last_backup_state=?, last_success_at=?, last_snapshot_id=?, last_snapshot_at=?, last_snapshot_items=?,
			last_snapshot_bytes=?, verify_state=?, verify_checked_at=?, verify_passed_snapshot_id=?, repository_damaged=?,
			last_verify_started_at=? WHERE id=?`, o.DisplayName, o.Address, o.Protected, ms(o.LastBackupAt), o.LastBackupState,
			ms(o.LastSuccessAt), o.LastSnapshotID, ms(o.LastSnapshotAt), o.LastSnapshotItems, o.LastSnapshotBytes, o.VerifyState,
			ms(o.VerifyCheckedAt), o.VerifyPassedSnapshotID, o.RepositoryDamaged, ms(o.LastVerifyStartedAt), o.ID)
		out = o
		return err
	})
	return out, err
}

// Directory.

const entryColumns = `d.id, d.tenant_id, d.source_id, d.external_id, d.kind, d.display_name, d.email, d.user_principal_name,
	d.enabled, d.licensed, d.licenses, d.protected, d.first_seen_at, d.last_seen_at, d.removed_at,
	coalesce((SELECT group_concat(o.id, ' ') FROM (SELECT id FROM protected_objects WHERE directory_entry_id = d.id ORDER BY id) o), '')`

func scanEntry(sc scanner) (*app.DirectoryEntry, error) {
	var d app.DirectoryEntry
	var licenses, objects string
	var first, last int64
	var removed sql.NullInt64
	if err := sc.Scan(&d.ID, &d.TenantID, &d.SourceID, &d.ExternalID, &d.Kind, &d.DisplayName, &d.Email,
		&d.UserPrincipalName, &d.Enabled, &d.Licensed, &licenses, &d.Protected, &first, &last, &removed, &objects); err != nil {
		return nil, err
	}
	var err error
	if d.Licenses, err = decodeStringList(licenses); err != nil {
		return nil, err
	}
	d.ProtectedObjectIDs = strings.Fields(objects)
	d.FirstSeenAt, d.LastSeenAt = msTime(first), msTime(last)
	d.RemovedAt = fromMs(removed)
	return &d, nil
}

func insertDirectoryEntry(ctx context.Context, tx *sql.Tx, d *app.DirectoryEntry, now func() time.Time) error {
	if d.ID == "" {
		d.ID = app.NewID(app.PrefixUser)
	}
	if d.FirstSeenAt.IsZero() {
		d.FirstSeenAt = now()
	}
	if d.LastSeenAt.IsZero() {
		d.LastSeenAt = d.FirstSeenAt
	}
	licenses, _ := json.Marshal(nonNil(d.Licenses))
	_, err := tx.ExecContext(ctx, `INSERT INTO directory_entries (id, tenant_id, source_id, external_id, kind, display_name,
		email, user_principal_name, enabled, licensed, licenses, protected, first_seen_at, last_seen_at)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)`, d.ID, d.TenantID, d.SourceID, d.ExternalID, d.Kind, d.DisplayName, d.Email,
		d.UserPrincipalName, d.Enabled, d.Licensed, string(licenses), d.Protected, d.FirstSeenAt.UnixMilli(), d.LastSeenAt.UnixMilli())
	return convertError(err)
}

// DirectoryEntry implements app.DirectoryService.
func (db *DB) DirectoryEntry(ctx context.Context, id string) (*app.DirectoryEntry, error) {
	d, err := scanEntry(db.read.QueryRowContext(ctx, `SELECT `+entryColumns+` FROM directory_entries d WHERE d.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, app.NotFound("directory entry")
	}
	return d, err
}

// DirectoryEntries implements app.DirectoryService.
func (db *DB) DirectoryEntries(ctx context.Context, f app.DirectoryFilter) ([]*app.DirectoryEntry, error) {
	q, args := `SELECT `+entryColumns+` FROM directory_entries d WHERE d.id > ?`, []any{f.AfterID}
	if f.TenantID != "" {
		q, args = q+` AND d.tenant_id = ?`, append(args, f.TenantID)
	}
	if f.SourceID != "" {
		q, args = q+` AND d.source_id = ?`, append(args, f.SourceID)
	}
	if f.Kind != "" {
		q, args = q+` AND d.kind = ?`, append(args, f.Kind)
	}
	if f.Protected != nil {
		q, args = q+` AND d.protected = ?`, append(args, *f.Protected)
	}
	if f.Licensed != nil {
		q, args = q+` AND d.licensed = ?`, append(args, *f.Licensed)
	}
	if f.Query != "" {
		like := "%" + escapeLike(strings.ToLower(f.Query)) + "%"
		q += ` AND (lower(d.display_name) LIKE ? ESCAPE '\' OR lower(d.email) LIKE ? ESCAPE '\' OR lower(d.user_principal_name) LIKE ? ESCAPE '\')`
		args = append(args, like, like, like)
	}
	q += ` ORDER BY d.id`
	if f.Limit > 0 {
		q, args = q+` LIMIT ?`, append(args, f.Limit)
	}
	return queryRows(ctx, db.read, scanEntry, q, args...)
}

// SetDirectoryProtection implements app.DirectoryService.
func (db *DB) SetDirectoryProtection(ctx context.Context, id string, protected bool) (*app.DirectoryEntry, error) {
	err := db.WriteTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE directory_entries SET protected=? WHERE id=?`, protected, id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return app.NotFound("directory entry")
		}
		// An object whose source is gone cannot be backed up: it stays unprotected.
		_, err = tx.ExecContext(ctx, `UPDATE protected_objects SET protected=? WHERE directory_entry_id=? AND source_id IS NOT NULL`,
			protected, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	return db.DirectoryEntry(ctx, id)
}

// DirectoryCounts implements app.DirectoryService.
func (db *DB) DirectoryCounts(ctx context.Context, tenantID string) ([]app.TenantDirectoryCounts, error) {
	byTenant := map[string]*app.TenantDirectoryCounts{}
	get := func(t string) *app.TenantDirectoryCounts {
		if byTenant[t] == nil {
			byTenant[t] = &app.TenantDirectoryCounts{TenantID: t}
		}
		return byTenant[t]
	}
	rows, err := db.read.QueryContext(ctx, `SELECT tenant_id, kind, licensed, protected, count(*) FROM directory_entries
		WHERE removed_at IS NULL AND (?1 = '' OR tenant_id = ?1) GROUP BY tenant_id, kind, licensed, protected`, tenantID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var t, kind string
		var licensed, protected bool
		var n int
		if err := rows.Scan(&t, &kind, &licensed, &protected, &n); err != nil {
			return nil, err
		}
		c := get(t)
		switch kind {
		case app.DirectoryUser:
			c.Users += n
		case app.DirectorySharedMailbox:
			c.SharedMailboxes += n
		case app.DirectoryRoom:
			c.Rooms += n
		case app.DirectoryIMAPAccount:
			c.IMAPAccounts += n
		}
		if licensed {
			c.Licensed += n
		}
		if protected {
			c.Protected += n
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()
	orows, err := db.read.QueryContext(ctx, `SELECT tenant_id, kind, count(*) FROM protected_objects
		WHERE protected AND kind IN ('mailbox', 'drive') AND (?1 = '' OR tenant_id = ?1) GROUP BY tenant_id, kind`, tenantID)
	if err != nil {
		return nil, err
	}
	defer orows.Close()
	for orows.Next() {
		var t, kind string
		var n int
		if err := orows.Scan(&t, &kind, &n); err != nil {
			return nil, err
		}
		if kind == app.ObjectMailbox {
			get(t).ProtectedMailboxes += n
		} else {
			get(t).ProtectedDrives += n
		}
	}
	if err := orows.Err(); err != nil {
		return nil, err
	}
	out := make([]app.TenantDirectoryCounts, 0, len(byTenant))
	for _, c := range byTenant {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b app.TenantDirectoryCounts) int { return strings.Compare(a.TenantID, b.TenantID) })
	return out, nil
}
