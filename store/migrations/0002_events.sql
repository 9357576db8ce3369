-- The event outbox: one row per event, written in the transaction that
-- caused it. body is the exact JSON envelope receivers get (signed as is).
-- dispatched_at is set once the webhook dispatcher has created the
-- deliveries for every webhook subscribed to the event.
CREATE TABLE events (
    id            TEXT PRIMARY KEY,
    type          TEXT NOT NULL,
    tenant_id     TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    body          TEXT NOT NULL,
    dispatched_at INTEGER
) STRICT;
CREATE INDEX events_undispatched ON events(id) WHERE dispatched_at IS NULL;
