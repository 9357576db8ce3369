-- Webhooks, their delivery queue and the attempt log.
-- Secrets are stored sealed (XChaCha20-Poly1305, key in the data directory):
-- the database alone never reveals a signing secret.
CREATE TABLE webhooks (
    id              TEXT PRIMARY KEY,
    tenant_id       TEXT NOT NULL REFERENCES tenants(id),
    url             TEXT NOT NULL,
    events          TEXT NOT NULL,             -- JSON array of event types
    description     TEXT NOT NULL DEFAULT '',
    enabled         INTEGER NOT NULL DEFAULT 1,
    secret          BLOB NOT NULL,             -- sealed current secret
    previous_secret BLOB,                      -- sealed secret before the last rotation
    previous_until  INTEGER,                   -- it signs too until then
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
) STRICT;
CREATE INDEX webhooks_tenant ON webhooks(tenant_id, id);

-- One row per (event, webhook) sent, and one per replay. Rows live until
-- 30 days after finished_at. next_attempt_at is set while pending.
CREATE TABLE webhook_deliveries (
    id              TEXT PRIMARY KEY,
    webhook_id      TEXT NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
    tenant_id       TEXT NOT NULL,
    event_id        TEXT NOT NULL REFERENCES events(id),
    event_type      TEXT NOT NULL,
    state           TEXT NOT NULL,             -- pending, delivered, failed, gone
    attempts        INTEGER NOT NULL DEFAULT 0,
    created_at      INTEGER NOT NULL,
    finished_at     INTEGER,
    next_attempt_at INTEGER
) STRICT;
CREATE INDEX webhook_deliveries_due ON webhook_deliveries(next_attempt_at, id) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_webhook ON webhook_deliveries(webhook_id, id);
CREATE INDEX webhook_deliveries_event ON webhook_deliveries(event_id);
CREATE INDEX webhook_deliveries_finished ON webhook_deliveries(finished_at) WHERE finished_at IS NOT NULL;

CREATE TABLE webhook_attempts (
    delivery_id      TEXT NOT NULL REFERENCES webhook_deliveries(id) ON DELETE CASCADE,
    number           INTEGER NOT NULL,
    at               INTEGER NOT NULL,
    status_code      INTEGER,                  -- NULL: no answer
    duration_ms      INTEGER NOT NULL,
    error            TEXT NOT NULL DEFAULT '',
    response_excerpt TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (delivery_id, number)
) STRICT;
