package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"

	"backstop/app"
)

var _ app.EndpointService = (*DB)(nil)

const endpointColumns = `id, tenant_id, hostname, display_name, profile, os, arch, agent_version, status, created_at,
	revoked_at, secret_fingerprint, schedule, paths, excludes, last_seen_at, last_backup_at, last_backup_state,
	last_success_at, last_snapshot_id, verify_state, verify_checked_at, verify_passed_snapshot_id, repository_damaged, pinned_agent_version`

// insertEndpoint inserts one row of endpointColumns; endpointArgs gives its
// arguments. CreateEndpoint and ImportEndpoints share it so that a column
// added to one cannot be missed by the other.
const insertEndpoint = `INSERT INTO endpoints (` + endpointColumns + `)
	VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`

// CreateEndpoint stores e, assigning an id and creation time when unset.
func (db *DB) CreateEndpoint(ctx context.Context, e *app.Endpoint) error {
	if e.ID == "" {
		e.ID = app.NewID(app.PrefixEndpoint)
	}
	if e.CreatedAt.IsZero() {
		e.CreatedAt = db.Now()
	}
	if e.Status == "" {
		e.Status = app.EndpointActive
	}
	return db.WriteTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, insertEndpoint, endpointArgs(e)...)
		return convertError(err)
	})
}

// Endpoint returns the endpoint with the id, or a not-found error.
func (db *DB) Endpoint(ctx context.Context, id string) (*app.Endpoint, error) {
	if e, ok, err := db.cachedEndpoint(ctx, id); ok {
		return e, err
	}
	e, err := scanEndpoint(db.queryRowCached(ctx, `SELECT `+endpointColumns+` FROM endpoints WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, app.NotFound("endpoint")
	}
	return e, err
}

// EndpointStates lists every endpoint in id order with only ID, TenantID,
// Status and LastSnapshotID set, read from the table and not through the
// endpoint cache: the verify schedules are synced every ten minutes, and
// that must not load the cache (~1 KB an endpoint) that an idle appliance
// has dropped (idle_trim.go).
func (db *DB) EndpointStates(ctx context.Context) ([]*app.Endpoint, error) {
	return queryRows(ctx, db.read, func(s scanner) (*app.Endpoint, error) {
		var e app.Endpoint
		err := s.Scan(&e.ID, &e.TenantID, &e.Status, &e.LastSnapshotID)
		return &e, err
	}, `SELECT id, tenant_id, status, coalesce(last_snapshot_id, '') FROM endpoints ORDER BY id`)
}

// Endpoints lists endpoints in id order. It reads through the endpoint
// cache (endpoint_cache.go): the answer holds every write committed before
// the call, and the caller owns the returned endpoints.
func (db *DB) Endpoints(ctx context.Context, f app.EndpointFilter) ([]*app.Endpoint, error) {
	snap, err := db.endpointSnapshot(ctx)
	if err != nil {
		return nil, err
	}
	rows := snap.rows
	if f.TenantID != "" || f.Profile != "" {
		rows = make([]*app.Endpoint, 0, len(snap.rows))
		for _, e := range snap.rows {
			if (f.TenantID == "" || e.TenantID == f.TenantID) && (f.Profile == "" || e.Profile == f.Profile) {
				rows = append(rows, e)
			}
		}
	}
	if len(rows) == 0 {
		return nil, nil
	}
	return copyEndpoints(rows), nil
}

// UpdateEndpoint reads the endpoint, applies fn and writes it back in one
// write transaction, so concurrent reports never lose each other's facts.
func (db *DB) UpdateEndpoint(ctx context.Context, id string, fn func(e *app.Endpoint) error) (*app.Endpoint, error) {
	var out *app.Endpoint
	err := db.WriteTx(ctx, func(tx *sql.Tx) error {
		e, err := scanEndpoint(tx.QueryRowContext(ctx, `SELECT `+endpointColumns+` FROM endpoints WHERE id = ?`, id))
		if errors.Is(err, sql.ErrNoRows) {
			return app.NotFound("endpoint")
		} else if err != nil {
			return err
		}
		if err := fn(e); err != nil {
			return err
		}
		args := endpointArgs(e)
		_, err = tx.ExecContext(ctx, `UPDATE endpoints SET tenant_id=?2, hostname=?3, display_name=?4, profile=?5, os=?6,
			arch=?7, agent_version=?8, status=?9, created_at=?10, revoked_at=?11, secret_fingerprint=?12, schedule=?13,
			paths=?14, excludes=?15, last_seen_at=?16, last_backup_at=?17, last_backup_state=?18, last_success_at=?19,
			last_snapshot_id=?20, verify_state=?21, verify_checked_at=?22, verify_passed_snapshot_id=?23,
			repository_damaged=?24, pinned_agent_version=?25 WHERE id = ?1`, args...)
		out = e
		return convertError(err)
	})
	return out, err
}

func endpointArgs(e *app.Endpoint) []any {
	paths, _ := json.Marshal(nonNil(e.Paths))
	excludes, _ := json.Marshal(nonNil(e.Excludes))
	return []any{e.ID, e.TenantID, e.Hostname, e.DisplayName, e.Profile, e.OS, e.Arch, e.AgentVersion, e.Status,
		e.CreatedAt.UnixMilli(), ms(e.RevokedAt), e.SecretFingerprint, e.Schedule, string(paths), string(excludes),
		ms(e.LastSeenAt), ms(e.LastBackupAt), e.LastBackupState, ms(e.LastSuccessAt), e.LastSnapshotID,
		e.VerifyState, ms(e.VerifyCheckedAt), e.VerifyPassedSnapshotID, e.RepositoryDamaged, e.PinnedAgentVersion}
}

func scanEndpoint(s scanner) (*app.Endpoint, error) {
	var e app.Endpoint
	var created int64
	var revoked, seen, backup, success, verified sql.NullInt64
	var paths, excludes string
	if err := s.Scan(&e.ID, &e.TenantID, &e.Hostname, &e.DisplayName, &e.Profile, &e.OS, &e.Arch, &e.AgentVersion,
		&e.Status, &created, &revoked, &e.SecretFingerprint, &e.Schedule, &paths, &excludes, &seen, &backup,
		&e.LastBackupState, &success, &e.LastSnapshotID, &e.VerifyState, &verified, &e.VerifyPassedSnapshotID,
		&e.RepositoryDamaged, &e.PinnedAgentVersion); err != nil {
		return nil, err
	}
	e.CreatedAt, e.RevokedAt = msTime(created), fromMs(revoked)
	e.LastSeenAt, e.LastBackupAt, e.LastSuccessAt, e.VerifyCheckedAt = fromMs(seen), fromMs(backup), fromMs(success), fromMs(verified)
	var err error
	if e.Paths, err = decodeStringList(paths); err != nil {
		return nil, err
	}
	if e.Excludes, err = decodeStringList(excludes); err != nil {
		return nil, err
	}
	return &e, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
