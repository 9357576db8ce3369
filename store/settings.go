package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"backstop/app"
)

var (
	_ app.SettingsService     = (*DB)(nil)
	_ app.VersionCheckService = (*DB)(nil)
	_ app.JobCounter          = (*DB)(nil)
)

// settingsRecord is the stored form of app.Settings (one JSON row).
type settingsRecord struct {
	UpdateCheck          bool   `json:"updateCheck"`
	UpdateChannel        string `json:"updateChannel"`
	UpdateCheckEnabledAt *int64 `json:"updateCheckEnabledAt,omitempty"`
}

// Settings returns the stored settings, or the defaults (update check off,
// stable channel) when none were saved.
func (db *DB) Settings(ctx context.Context) (*app.Settings, error) {
	return readSettings(ctx, db.read.QueryRowContext(ctx, "SELECT value FROM settings WHERE key = 'settings'"))
}

func readSettings(ctx context.Context, row *sql.Row) (*app.Settings, error) {
	var raw string
	rec := settingsRecord{UpdateChannel: "stable"}
	if err := row.Scan(&raw); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, err
	} else if err == nil {
		if err := json.Unmarshal([]byte(raw), &rec); err != nil {
			return nil, err
		}
	}
	s := &app.Settings{UpdateCheck: rec.UpdateCheck, UpdateChannel: rec.UpdateChannel}
	if rec.UpdateCheckEnabledAt != nil {
		s.UpdateCheckEnabledAt = app.Ptr(msTime(*rec.UpdateCheckEnabledAt))
	}
	return s, nil
}

// UpdateSettings applies fn to the settings in one write transaction.
func (db *DB) UpdateSettings(ctx context.Context, fn func(s *app.Settings) error) (*app.Settings, error) {
	var out *app.Settings
	err := db.WriteTx(ctx, func(tx *sql.Tx) error {
		s, err := readSettings(ctx, tx.QueryRowContext(ctx, "SELECT value FROM settings WHERE key = 'settings'"))
		if err != nil {
			return err
		}
		if err := fn(s); err != nil {
			return err
		}
		rec := settingsRecord{UpdateCheck: s.UpdateCheck, UpdateChannel: s.UpdateChannel}
		if s.UpdateCheckEnabledAt != nil {
			rec.UpdateCheckEnabledAt = app.Ptr(s.UpdateCheckEnabledAt.UnixMilli())
		}
		raw, _ := json.Marshal(rec)
		_, err = tx.ExecContext(ctx, `INSERT INTO settings (key, value) VALUES ('settings', ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`, string(raw))
		out = s
		return err
	})
	return out, err
}

// VersionCheck returns the cached check for the channel, or a not-found error.
func (db *DB) VersionCheck(ctx context.Context, channel string) (*app.VersionCheck, error) {
	var c app.VersionCheck
	var checked int64
	var published sql.NullInt64
	err := db.read.QueryRowContext(ctx, `SELECT channel, checked_at, latest_tag, latest, release_url, published_at, check_error
		FROM version_checks WHERE channel = ?`, channel).Scan(&c.Channel, &checked, &c.LatestTag, &c.Latest, &c.ReleaseURL, &published, &c.CheckError)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, app.NotFound("version check")
	} else if err != nil {
		return nil, err
	}
	c.CheckedAt, c.PublishedAt = msTime(checked), fromMs(published)
	return &c, nil
}

// SaveVersionCheck replaces the cached check for c.Channel.
func (db *DB) SaveVersionCheck(ctx context.Context, c *app.VersionCheck) error {
	_, err := db.write.ExecContext(ctx, `INSERT INTO version_checks (channel, checked_at, latest_tag, latest, release_url, published_at, check_error)
		VALUES (?,?,?,?,?,?,?) ON CONFLICT (channel) DO UPDATE SET checked_at=excluded.checked_at, latest_tag=excluded.latest_tag,
		latest=excluded.latest, release_url=excluded.release_url, published_at=excluded.published_at, check_error=excluded.check_error`,
		c.Channel, c.CheckedAt.UnixMilli(), c.LatestTag, c.Latest, c.ReleaseURL, ms(c.PublishedAt), c.CheckError)
	return err
}

var _ app.ActiveJobCounter = (*DB)(nil)

// CountActiveJobs implements app.ActiveJobCounter on the jobs_state index.
func (db *DB) CountActiveJobs(ctx context.Context) ([]app.JobQueueCount, error) {
	return queryRows(ctx, db.read, func(s scanner) (app.JobQueueCount, error) {
		var c app.JobQueueCount
		return c, s.Scan(&c.State, &c.Queue, &c.Count)
	}, `SELECT state, queue, count(*) FROM jobs WHERE state IN ('queued', 'running') GROUP BY state, queue`)
}

// CountJobs counts running and queued jobs and those finished since the time.
func (db *DB) CountJobs(ctx context.Context, tenantID string, since time.Time) (app.JobCounts, error) {
	var c app.JobCounts
	err := db.read.QueryRowContext(ctx, `SELECT
		count(*) FILTER (WHERE state = 'running'),
		count(*) FILTER (WHERE state = 'queued'),
		count(*) FILTER (WHERE state = 'failed' AND finished_at >= ?2),
		count(*) FILTER (WHERE state = 'succeeded' AND finished_at >= ?2)
		FROM jobs WHERE (?1 = '' OR tenant_id = ?1) AND (state IN ('running','queued') OR finished_at >= ?2)`,
		tenantID, since.UnixMilli()).Scan(&c.Running, &c.Queued, &c.Failed24h, &c.Succeeded24h)
	return c, err
}
