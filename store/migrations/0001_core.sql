-- Core schema: tenants, administrators, sessions, API keys, the audit log,
-- endpoints, enrollment tokens, jobs, settings and the update-check cache.
-- Times are INTEGER milliseconds since the Unix epoch (UTC); NULL = unknown.
-- Lists of strings are JSON arrays in TEXT columns.

CREATE TABLE tenants (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE users (
    id            TEXT PRIMARY KEY,
    email         TEXT NOT NULL UNIQUE,
    tenant_id     TEXT REFERENCES tenants(id),  -- NULL: provider administrator
    password_hash TEXT NOT NULL,
    created_at    INTEGER NOT NULL
) STRICT;

CREATE TABLE sessions (
    id_hash    TEXT PRIMARY KEY,               -- hex SHA-256 of the cookie value
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    csrf_token TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT;
CREATE INDEX sessions_expires ON sessions(expires_at);

CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,
    tenant_id    TEXT REFERENCES tenants(id),  -- NULL: provider key
    name         TEXT NOT NULL,
    provider     INTEGER NOT NULL DEFAULT 0,
    scopes       TEXT NOT NULL,                -- JSON array
    fingerprint  TEXT NOT NULL,                -- hex SHA-256 of the value
    created_at   INTEGER NOT NULL,
    created_by   TEXT NOT NULL DEFAULT '',
    expires_at   INTEGER,
    revoked_at   INTEGER,
    last_used_at INTEGER
) STRICT;
CREATE INDEX api_keys_tenant ON api_keys(tenant_id);

CREATE TABLE audit_log (
    id          INTEGER PRIMARY KEY,           -- rowid: increasing, the list cursor
    at          INTEGER NOT NULL,
    actor_type  TEXT NOT NULL,
    actor_id    TEXT NOT NULL,
    actor_name  TEXT NOT NULL,
    tenant_id   TEXT NOT NULL,                 -- '' when across all tenants
    action      TEXT NOT NULL,
    target      TEXT NOT NULL,
    status      INTEGER NOT NULL,
    ip          TEXT NOT NULL,
    user_agent  TEXT NOT NULL,
    request_id  TEXT NOT NULL
) STRICT;
CREATE INDEX audit_log_tenant ON audit_log(tenant_id, id);
CREATE INDEX audit_log_at ON audit_log(at);

CREATE TABLE endpoints (
    id                        TEXT PRIMARY KEY,
    tenant_id                 TEXT NOT NULL REFERENCES tenants(id),
    hostname                  TEXT NOT NULL DEFAULT '',
    display_name              TEXT NOT NULL DEFAULT '',
    profile                   TEXT NOT NULL,
    os                        TEXT NOT NULL DEFAULT '',
    arch                      TEXT NOT NULL DEFAULT '',
    agent_version             TEXT NOT NULL DEFAULT '',
    status                    TEXT NOT NULL DEFAULT 'active',
    created_at                INTEGER NOT NULL,
    revoked_at                INTEGER,
    secret_fingerprint        TEXT NOT NULL DEFAULT '',
    schedule                  TEXT NOT NULL DEFAULT '',
    paths                     TEXT NOT NULL DEFAULT '[]',
    excludes                  TEXT NOT NULL DEFAULT '[]',
    last_seen_at              INTEGER,
    last_backup_at            INTEGER,
    last_backup_state         TEXT NOT NULL DEFAULT '',
    last_success_at           INTEGER,
    last_snapshot_id          TEXT NOT NULL DEFAULT '',
    verify_state              TEXT NOT NULL DEFAULT '',
    verify_checked_at         INTEGER,
    verify_passed_snapshot_id TEXT NOT NULL DEFAULT '',
    repository_damaged        INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX endpoints_tenant ON endpoints(tenant_id, id);

CREATE TABLE enrollment_tokens (
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL REFERENCES tenants(id),
    profile     TEXT NOT NULL,
    token_hash  TEXT NOT NULL UNIQUE,          -- hex SHA-256 of the token
    endpoint_id TEXT,                          -- pre-created endpoint, if any
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    used_at     INTEGER
) STRICT;

CREATE TABLE jobs (
    id            TEXT PRIMARY KEY,
    tenant_id     TEXT NOT NULL,
    queue         TEXT NOT NULL,
    state         TEXT NOT NULL,
    target_type   TEXT NOT NULL,
    target_id     TEXT NOT NULL,
    target_name   TEXT NOT NULL DEFAULT '',
    trigger       TEXT NOT NULL,
    progress      TEXT NOT NULL DEFAULT '{}',  -- JSON
    queued_at     INTEGER NOT NULL,
    started_at    INTEGER,
    finished_at   INTEGER,
    snapshot_id   TEXT NOT NULL DEFAULT '',
    items_failed  INTEGER NOT NULL DEFAULT 0,
    error_message TEXT NOT NULL DEFAULT '',
    failure       TEXT,                        -- JSON, NULL when the job did not fail
    item_causes   TEXT NOT NULL DEFAULT '[]'   -- JSON
) STRICT;
CREATE INDEX jobs_tenant ON jobs(tenant_id, id);
CREATE INDEX jobs_state ON jobs(state, queue);
CREATE INDEX jobs_finished ON jobs(finished_at);

CREATE TABLE settings (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL                        -- JSON
) STRICT;

CREATE TABLE version_checks (
    channel      TEXT PRIMARY KEY,
    checked_at   INTEGER NOT NULL,
    latest_tag   TEXT NOT NULL DEFAULT '',
    latest       TEXT NOT NULL DEFAULT '',
    release_url  TEXT NOT NULL DEFAULT '',
    published_at INTEGER,
    check_error  TEXT NOT NULL DEFAULT ''
) STRICT;
