-- The email archive (CONTRACT §14). Times are Unix milliseconds.
--
-- archive_channels: capture channels. address is the smtp_journal
--   recipient (lowercase, unique); source_id names the imap/m365 source of a
--   polling channel; cursor is the poller's state (JSON, the poller's own).
--   A deleted channel keeps its row (deleted_at) so records keep naming it.
-- archive_intake: accepted/rejected counts per channel per hour (hour =
--   Unix hour number), for messages24h / rejected24h.
-- archive_messages: one row per tenant per distinct content (sha256 of the
--   exact bytes). content is the blobstore.Content JSON once the bytes are
--   in the blob store, '' while they are in the spool. The spool is
--   data_dir/archive/spool/<tenant>/: a message of at most 1 MiB is a slice
--   of a segment file there (spool_segment, its name seg-<n>; spool_offset,
--   spool_length: the slice), appended with the rest of its group-commit
--   batch and fsynced once before the row commits; a larger one is its own
--   file <sha256> (spool_segment NULL). A segment is deleted once no row
--   whose bytes are still only there (content '', not purged) names it; the
--   rows naming it then get spool_* NULL. A moved row keeps spool_* until
--   then, so a purge can wipe its slice (the segment outlives the move
--   while other messages of it wait for the mover). A purged row keeps
--   spool_* until its slice is wiped (hole punched or zeroed): rows purged
--   with spool_segment set are wipes still to do (a crash in between).
--   Bytes in a segment that no row names (a crash after the segment's
--   fsync and before the commit: never acknowledged; or a copy a batch
--   appended while the batch before it stored the same content) stay until
--   the segment is deleted. purged_at is set when retention deleted the
--   content (the row stays: records name it).
--   custodians is every address the message concerns (from, to, cc, bcc,
--   envelope recipients, journal envelope), lowercase, space-separated with
--   a leading and trailing space, so a custodian match is LIKE '% a@b %'.
-- archive_captures: every capture of a message (each is a message record):
--   the channel, the record index, the SMTP envelope and, for a journal
--   report, its parsed envelope (JSON).
-- archive_records: the log's entries in order, per tenant: idx from 0, the
--   record text exactly as hashed (chain.Record.Marshal()).
-- archive_hashes: the tlog stored hashes (tlog.StoredHashes), hidx from 0,
--   so proofs read O(log n) rows.
-- archive_checkpoints: every signed checkpoint (C2SP signed note text),
--   with its RFC 3161 time-stamp response (DER) when archive.tsa_url is set.
-- archive_holds: legal holds. record_index / release_record_index are the
--   hold and release records.
-- archive_retention: per tenant { defaultDays, rules } (JSON rules).
-- archive_state: per tenant chain state (ok|broken|empty) and the last
--   verification.
-- archive_fts: full-text index (FTS5, contentless) of subject, addresses and
--   body text; rowid = archive_messages.rowid.
CREATE TABLE archive_channels (
    id              TEXT PRIMARY KEY,
    tenant_id       TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    kind            TEXT NOT NULL,
    display_name    TEXT NOT NULL,
    address         TEXT,
    source_id       TEXT,
    state           TEXT NOT NULL DEFAULT 'idle',
    last_error      TEXT NOT NULL DEFAULT '',
    last_message_at INTEGER,
    messages_total  INTEGER NOT NULL DEFAULT 0,
    cursor          TEXT NOT NULL DEFAULT '',
    created_at      INTEGER NOT NULL,
    deleted_at      INTEGER
) STRICT;
CREATE UNIQUE INDEX archive_channels_address ON archive_channels(address) WHERE address IS NOT NULL AND deleted_at IS NULL;
CREATE INDEX archive_channels_tenant ON archive_channels(tenant_id, id);

CREATE TABLE archive_intake (
    channel_id TEXT NOT NULL,
    hour       INTEGER NOT NULL,
    accepted   INTEGER NOT NULL DEFAULT 0,
    rejected   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (channel_id, hour)
) STRICT, WITHOUT ROWID;

CREATE TABLE archive_messages (
    id            TEXT NOT NULL UNIQUE,
    tenant_id     TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    sha256        TEXT NOT NULL,
    size          INTEGER NOT NULL,
    content       TEXT NOT NULL DEFAULT '',
    record_index  INTEGER NOT NULL,
    captured_at   INTEGER NOT NULL,
    channel_id    TEXT NOT NULL,
    subject       TEXT NOT NULL DEFAULT '',
    from_addr     TEXT NOT NULL DEFAULT '',
    to_addrs      TEXT NOT NULL DEFAULT '',
    date          INTEGER,
    message_id    TEXT NOT NULL DEFAULT '',
    custodians    TEXT NOT NULL DEFAULT '',
    journal       INTEGER NOT NULL DEFAULT 0,
    purged_at     INTEGER,
    spool_segment TEXT,
    spool_offset  INTEGER,
    spool_length  INTEGER,
    UNIQUE (tenant_id, sha256)
) STRICT;
CREATE INDEX archive_messages_tenant_time ON archive_messages(tenant_id, captured_at);
CREATE INDEX archive_messages_spool ON archive_messages(tenant_id) WHERE content = '' AND purged_at IS NULL;
CREATE INDEX archive_messages_segment ON archive_messages(tenant_id, spool_segment) WHERE spool_segment IS NOT NULL;

CREATE TABLE archive_captures (
    message_id   TEXT NOT NULL,
    tenant_id    TEXT NOT NULL,
    channel_id   TEXT NOT NULL,
    record_index INTEGER NOT NULL,
    at           INTEGER NOT NULL,
    envelope     TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (tenant_id, record_index)
) STRICT;
CREATE INDEX archive_captures_message ON archive_captures(message_id);

CREATE TABLE archive_records (
    tenant_id  TEXT NOT NULL,
    idx        INTEGER NOT NULL,
    type       TEXT NOT NULL,
    at         INTEGER NOT NULL,
    message_id TEXT,
    record     BLOB NOT NULL,
    PRIMARY KEY (tenant_id, idx)
) STRICT, WITHOUT ROWID;
CREATE INDEX archive_records_time ON archive_records(tenant_id, at);

CREATE TABLE archive_hashes (
    tenant_id TEXT NOT NULL,
    hidx      INTEGER NOT NULL,
    hash      BLOB NOT NULL,
    PRIMARY KEY (tenant_id, hidx)
) STRICT, WITHOUT ROWID;

CREATE TABLE archive_checkpoints (
    tenant_id TEXT NOT NULL,
    size      INTEGER NOT NULL,
    root      BLOB NOT NULL,
    note      TEXT NOT NULL,
    at        INTEGER NOT NULL,
    tsr       BLOB,
    tsa_time  INTEGER,
    PRIMARY KEY (tenant_id, size)
) STRICT, WITHOUT ROWID;

CREATE TABLE archive_holds (
    id                   TEXT PRIMARY KEY,
    tenant_id            TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    name                 TEXT NOT NULL,
    matter               TEXT NOT NULL DEFAULT '',
    custodians           TEXT NOT NULL DEFAULT '[]',
    from_at              INTEGER,
    to_at                INTEGER,
    query                TEXT NOT NULL DEFAULT '',
    created_at           INTEGER NOT NULL,
    created_by           TEXT NOT NULL DEFAULT '',
    record_index         INTEGER NOT NULL,
    released_at          INTEGER,
    release_reason       TEXT NOT NULL DEFAULT '',
    released_by          TEXT NOT NULL DEFAULT '',
    release_record_index INTEGER
) STRICT;
CREATE INDEX archive_holds_tenant ON archive_holds(tenant_id, id);

CREATE TABLE archive_retention (
    tenant_id    TEXT PRIMARY KEY REFERENCES tenants(id) ON DELETE CASCADE,
    default_days INTEGER NOT NULL,
    rules        TEXT NOT NULL DEFAULT '[]',
    updated_at   INTEGER NOT NULL
) STRICT;

CREATE TABLE archive_state (
    tenant_id        TEXT PRIMARY KEY,
    chain_state      TEXT NOT NULL DEFAULT 'ok',
    last_verified_at INTEGER,
    last_verify_job  TEXT NOT NULL DEFAULT '',
    broken_reason    TEXT NOT NULL DEFAULT ''
) STRICT;

CREATE VIRTUAL TABLE archive_fts USING fts5(subject, addresses, body, content='', contentless_delete=1);
