-- The blob store's catalogue (app/blobstore, docs/blobstore.md). Everything
-- here can be rebuilt from the storage targets (backstop admin
-- rebuild-catalogue): the tables are a fast index over what the targets hold.
--
-- blob_tenant_keys: each tenant's data key, sealed by the appliance key.
-- blob_packs: every pack file written, on which target, with its size (the
--   sum per target is a target's storedBytes).
-- blobs: which pack, offset and length hold each blob (keyed by the
--   tenant's HMAC of the plaintext; dedup is within a tenant).
-- snapshots: one row per snapshot of a protected object; tree lists the
--   blob ids of the snapshot's item manifest, as hex, space-separated.
-- blob_gc: packs being deleted by garbage collection, so a crash between
--   forgetting their blobs and deleting their files is finished on restart.
CREATE TABLE blob_tenant_keys (
    tenant_id  TEXT PRIMARY KEY REFERENCES tenants(id),
    sealed     BLOB NOT NULL,
    created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE blob_packs (
    tenant_id  TEXT NOT NULL,
    pack_id    TEXT NOT NULL,               -- hex SHA-256 of the pack file
    target_id  TEXT NOT NULL,
    size       INTEGER NOT NULL,
    blobs      INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, pack_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX blob_packs_target ON blob_packs(target_id, tenant_id);

CREATE TABLE blobs (
    tenant_id  TEXT NOT NULL,
    blob_id    BLOB NOT NULL,               -- 32 bytes
    type       INTEGER NOT NULL,            -- 100 'd' data, 116 't' tree
    pack_id    TEXT NOT NULL,
    offset     INTEGER NOT NULL,
    length     INTEGER NOT NULL,            -- stored (encrypted) length
    raw_length INTEGER NOT NULL,            -- plaintext length
    PRIMARY KEY (tenant_id, blob_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX blobs_pack ON blobs(tenant_id, pack_id);

CREATE TABLE snapshots (
    id                  TEXT PRIMARY KEY,
    tenant_id           TEXT NOT NULL,
    protected_object_id TEXT NOT NULL,
    target_id           TEXT NOT NULL,
    at                  INTEGER NOT NULL,
    items               INTEGER NOT NULL,
    bytes               INTEGER NOT NULL,
    added_items         INTEGER NOT NULL,
    removed_items       INTEGER NOT NULL,
    job_id              TEXT NOT NULL DEFAULT '',
    tree                TEXT NOT NULL
) STRICT;
CREATE INDEX snapshots_object ON snapshots(protected_object_id, at);
CREATE INDEX snapshots_tenant ON snapshots(tenant_id, at);

CREATE TABLE blob_gc (
    tenant_id TEXT NOT NULL,
    pack_id   TEXT NOT NULL,
    target_id TEXT NOT NULL,
    PRIMARY KEY (tenant_id, pack_id)
) STRICT, WITHOUT ROWID;
