-- Jobs as a durable queue: who executes a job, its request parameters, its
-- attempt number for automatic retries, and when a queued retry becomes due.
-- Failed items of a job live in job_items; cron-driven schedules in
-- job_schedules.
ALTER TABLE jobs ADD COLUMN action TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN executor TEXT NOT NULL DEFAULT 'local';
ALTER TABLE jobs ADD COLUMN params TEXT NOT NULL DEFAULT '{}';       -- JSON
ALTER TABLE jobs ADD COLUMN attempt INTEGER NOT NULL DEFAULT 1;
ALTER TABLE jobs ADD COLUMN max_attempts INTEGER NOT NULL DEFAULT 1;
ALTER TABLE jobs ADD COLUMN not_before INTEGER;                       -- NULL: due at once
ALTER TABLE jobs ADD COLUMN retry_of TEXT NOT NULL DEFAULT '';
CREATE INDEX jobs_tenant_queued ON jobs(tenant_id, queued_at, id);
CREATE INDEX jobs_queued ON jobs(queued_at, id);
CREATE INDEX jobs_dispatch ON jobs(queue, queued_at, id) WHERE state = 'queued';
CREATE INDEX jobs_target ON jobs(target_type, target_id, action) WHERE state IN ('queued', 'running');

CREATE TABLE job_items (
    seq        INTEGER PRIMARY KEY,           -- rowid: report order
    job_id     TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    ref        TEXT NOT NULL,
    name       TEXT NOT NULL DEFAULT '',
    state      TEXT NOT NULL DEFAULT 'failed',
    at         INTEGER NOT NULL,
    code       TEXT NOT NULL DEFAULT '',      -- failure code, for grouping
    failure    TEXT                           -- JSON
) STRICT;
CREATE INDEX job_items_job ON job_items(job_id, code);

CREATE TABLE job_schedules (
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL REFERENCES tenants(id),
    action      TEXT NOT NULL,
    target_type TEXT NOT NULL,
    target_id   TEXT NOT NULL,
    spec        TEXT NOT NULL,                -- cron expression (5 fields or @every)
    params      TEXT NOT NULL DEFAULT '{}',   -- JSON
    enabled     INTEGER NOT NULL DEFAULT 1,
    created_at  INTEGER NOT NULL,
    UNIQUE (action, target_type, target_id)
) STRICT;
