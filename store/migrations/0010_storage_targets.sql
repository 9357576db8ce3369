-- Storage targets (CONTRACT §11), where tenants' new data goes, and the one
-- download of the appliance key file.
--
-- storage_targets: a local directory or an S3-compatible bucket. The S3
--   secret access key is stored sealed (XChaCha20-Poly1305 under the data
--   directory's secrets key, bound to the row id): the database alone never
--   reveals it. Exactly one row is the default (is_default = 1; the partial
--   unique index allows no second). The state columns hold the last check.
-- storage_placements: a tenant placed on a target; at most one per tenant.
--   A tenant without a row uses the default target. Moving a tenant applies
--   to new data: packs already written stay where blob_packs says they are.
-- appliance_key_downloads: at most one row (id = 1): when and by whom the
--   appliance key file was downloaded.
CREATE TABLE storage_targets (
    id             TEXT PRIMARY KEY,
    name           TEXT NOT NULL,
    kind           TEXT NOT NULL CHECK (kind IN ('local', 's3')),
    is_default     INTEGER NOT NULL DEFAULT 0,
    path           TEXT NOT NULL DEFAULT '',
    endpoint       TEXT NOT NULL DEFAULT '',
    region         TEXT NOT NULL DEFAULT '',
    bucket         TEXT NOT NULL DEFAULT '',
    prefix         TEXT NOT NULL DEFAULT '',
    access_key_id  TEXT NOT NULL DEFAULT '',
    secret         BLOB,                    -- sealed S3 secret access key
    path_style     INTEGER NOT NULL DEFAULT 0,
    tls            INTEGER NOT NULL DEFAULT 1,
    state          TEXT NOT NULL DEFAULT 'ok',
    capacity_bytes INTEGER,
    used_bytes     INTEGER,
    free_bytes     INTEGER,
    checked_at     INTEGER,
    last_error     TEXT,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX storage_targets_one_default ON storage_targets(is_default) WHERE is_default = 1;

CREATE TABLE storage_placements (
    tenant_id TEXT PRIMARY KEY REFERENCES tenants(id),
    target_id TEXT NOT NULL REFERENCES storage_targets(id)
) STRICT, WITHOUT ROWID;
CREATE INDEX storage_placements_target ON storage_placements(target_id, tenant_id);

CREATE TABLE appliance_key_downloads (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    at         INTEGER NOT NULL,
    user_id    TEXT NOT NULL,
    user_email TEXT NOT NULL
) STRICT;
