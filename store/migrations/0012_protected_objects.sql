-- Sources, protected objects and the directory (CONTRACT §4, §12, §13).
--
-- sources: an account the appliance pulls from. settings holds the kind's
--   non-secret settings as JSON (IMAP: host, port, security, username,
--   trustFingerprint; Microsoft 365 later: azureTenantId, clientId, …);
--   sealed_secret the password or client secret, sealed and bound to the id.
-- directory_entries: users, shared mailboxes, rooms and IMAP accounts of a
--   tenant, keyed within their source by external_id (the Graph user id for
--   Microsoft 365; the source id for an IMAP account), so a directory sync
--   can upsert them. protected is the administrator's choice.
-- protected_objects: one thing backed up into the blob store, with the facts
--   backups and verify runs record (readiness is computed from them, never
--   stored). source_id is NULL once the source is deleted: the object stays,
--   unprotected, with its snapshots, until retention removes them.
-- Backup and verify schedules are rows of job_schedules.
CREATE TABLE sources (
    id            TEXT PRIMARY KEY,
    tenant_id     TEXT NOT NULL REFERENCES tenants(id),
    kind          TEXT NOT NULL,                -- imap, m365
    display_name  TEXT NOT NULL,
    disabled      INTEGER NOT NULL DEFAULT 0,
    state         TEXT NOT NULL DEFAULT 'ok',   -- ok, failing
    last_error    TEXT NOT NULL DEFAULT '',
    created_at    INTEGER NOT NULL,
    schedule      TEXT NOT NULL DEFAULT '',     -- cron; '' = daily default
    settings      TEXT NOT NULL DEFAULT '{}',   -- JSON, non-secret
    sealed_secret BLOB
) STRICT;
CREATE INDEX sources_tenant ON sources(tenant_id, id);

CREATE TABLE directory_entries (
    id                  TEXT PRIMARY KEY,
    tenant_id           TEXT NOT NULL REFERENCES tenants(id),
    source_id           TEXT NOT NULL REFERENCES sources(id) ON DELETE CASCADE,
    external_id         TEXT NOT NULL,
    kind                TEXT NOT NULL,          -- user, shared_mailbox, room, imap_account
    display_name        TEXT NOT NULL DEFAULT '',
    email               TEXT NOT NULL DEFAULT '',
    user_principal_name TEXT NOT NULL DEFAULT '',
    enabled             INTEGER NOT NULL DEFAULT 1,
    licensed            INTEGER NOT NULL DEFAULT 0,
    licenses            TEXT NOT NULL DEFAULT '[]',
    protected           INTEGER NOT NULL DEFAULT 0,
    first_seen_at       INTEGER NOT NULL,
    last_seen_at        INTEGER NOT NULL,
    UNIQUE (source_id, external_id)
) STRICT;
CREATE INDEX directory_entries_tenant ON directory_entries(tenant_id, id);

CREATE TABLE protected_objects (
    id                        TEXT PRIMARY KEY,
    tenant_id                 TEXT NOT NULL REFERENCES tenants(id),
    kind                      TEXT NOT NULL,    -- imap, mailbox, drive
    source_kind               TEXT NOT NULL,    -- imap, m365
    source_id                 TEXT REFERENCES sources(id) ON DELETE SET NULL,
    directory_entry_id        TEXT REFERENCES directory_entries(id) ON DELETE SET NULL,
    external_id               TEXT NOT NULL DEFAULT '',
    display_name              TEXT NOT NULL,
    address                   TEXT NOT NULL DEFAULT '',
    protected                 INTEGER NOT NULL,
    created_at                INTEGER NOT NULL,
    last_backup_at            INTEGER,
    last_backup_state         TEXT NOT NULL DEFAULT '',
    last_success_at           INTEGER,
    last_snapshot_id          TEXT NOT NULL DEFAULT '',
    last_snapshot_at          INTEGER,
    last_snapshot_items       INTEGER NOT NULL DEFAULT 0,
    last_snapshot_bytes       INTEGER NOT NULL DEFAULT 0,
    verify_state              TEXT NOT NULL DEFAULT '',
    verify_checked_at         INTEGER,
    verify_passed_snapshot_id TEXT NOT NULL DEFAULT '',
    repository_damaged        INTEGER NOT NULL DEFAULT 0,
    last_verify_started_at    INTEGER
) STRICT;
CREATE INDEX protected_objects_tenant ON protected_objects(tenant_id, id);
CREATE INDEX protected_objects_source ON protected_objects(source_id);
CREATE INDEX protected_objects_entry ON protected_objects(directory_entry_id);
