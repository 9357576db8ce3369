-- The latest retention prune of each endpoint repository (issue 12): what
-- GET /api/v1/endpoints/{id}/retention shows as lastPrune and the endpoint
-- page as "last applied". The full history is in the retention jobs'
-- job.completed events (data.retention.endpoints.each).
CREATE TABLE endpoint_prunes (
    endpoint_id       TEXT PRIMARY KEY REFERENCES endpoints(id) ON DELETE CASCADE,
    job_id            TEXT NOT NULL,
    at                INTEGER NOT NULL,
    bytes_before      INTEGER NOT NULL,
    bytes_after       INTEGER NOT NULL,
    snapshots_removed INTEGER NOT NULL,
    snapshots_kept    INTEGER NOT NULL,
    failed            INTEGER NOT NULL
) STRICT;
