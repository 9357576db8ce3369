-- Incidents (CONTRACT §15) and the event feed.
--
-- open_incidents: the incident open for one target and job kind (queue),
--   written in the transaction that inserts the job.failed/job.completed
--   event carrying it; deleted by the success that resolves it.
-- events_feed: the feed reads one tenant's events in id order.
CREATE TABLE open_incidents (
    target_type  TEXT NOT NULL,
    target_id    TEXT NOT NULL,
    queue        TEXT NOT NULL,
    tenant_id    TEXT NOT NULL,
    incident_key TEXT NOT NULL,
    opened_at    INTEGER NOT NULL,
    PRIMARY KEY (target_type, target_id, queue)
) STRICT;
CREATE INDEX events_feed ON events(tenant_id, id);
