-- Verify runs: one report per verify job (the sampled test restore of an
-- endpoint's newest snapshot, the pack re-hash and restic's check). The
-- endpoint facts readiness is computed from are updated in the same
-- transaction as the report is inserted. The report itself is kept whole as
-- JSON; the columns beside it are what the latest-report queries select on.
-- Per-endpoint verify schedules are rows of job_schedules (action 'verify').
CREATE TABLE verify_reports (
    job_id      TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL REFERENCES tenants(id),
    endpoint_id TEXT NOT NULL REFERENCES endpoints(id),
    state       TEXT NOT NULL,                 -- passed, failed, error
    finished_at INTEGER NOT NULL,
    report      TEXT NOT NULL                  -- JSON app.VerifyReport
) STRICT;
CREATE INDEX verify_reports_tenant ON verify_reports(tenant_id, finished_at);
CREATE INDEX verify_reports_endpoint ON verify_reports(endpoint_id, finished_at);
CREATE INDEX verify_reports_finished ON verify_reports(finished_at);
