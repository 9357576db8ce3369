-- Snapshot retention policies (CONTRACT §11, app/retention, docs/retention.md).
--
-- retention_policies: a tenant's policy; no row means the default policy
--   (keep all 30 days, daily 90, weekly 365, monthly 2557).
-- endpoint_retention: an endpoint's override of its tenant's policy; no row
--   means the endpoint inherits the tenant's policy.
-- Tiers are in days; 0 skips a tier. The nightly retention jobs are rows of
-- job_schedules (action 'retention', target type 'tenant').
CREATE TABLE retention_policies (
    tenant_id         TEXT PRIMARY KEY REFERENCES tenants(id),
    keep_all_days     INTEGER NOT NULL,
    keep_daily_days   INTEGER NOT NULL,
    keep_weekly_days  INTEGER NOT NULL,
    keep_monthly_days INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
) STRICT;

CREATE TABLE endpoint_retention (
    endpoint_id       TEXT PRIMARY KEY REFERENCES endpoints(id),
    keep_all_days     INTEGER NOT NULL,
    keep_daily_days   INTEGER NOT NULL,
    keep_weekly_days  INTEGER NOT NULL,
    keep_monthly_days INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
) STRICT;
