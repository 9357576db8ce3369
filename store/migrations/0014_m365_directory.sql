-- Microsoft 365 directory (CONTRACT §13).
--
-- directory_entries.removed_at: when a directory sync last found the user
--   gone from its tenant (NULL while present); its objects keep their
--   snapshots but are unprotected.
-- directory_daily_counts: each tenant's billing counts as recorded at 00:00
--   UTC of date (YYYY-MM-DD), one row per tenant per day; counts holds the
--   app.DirectoryCounts JSON. A second recording of a day replaces the row.
ALTER TABLE directory_entries ADD COLUMN removed_at INTEGER;

CREATE TABLE directory_daily_counts (
    date        TEXT NOT NULL,
    tenant_id   TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    counts      TEXT NOT NULL,
    recorded_at INTEGER NOT NULL,
    PRIMARY KEY (date, tenant_id)
) STRICT;
CREATE INDEX directory_daily_counts_tenant ON directory_daily_counts(tenant_id, date);
