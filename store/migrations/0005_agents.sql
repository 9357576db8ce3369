-- The runs agents report. Commands for an agent are not a table of their
-- own: they are the queued external jobs whose target is the endpoint,
-- handed out by heartbeats until a run claims them (command id = job id).
-- A run's id is chosen by the agent so that a run made while the appliance
-- was unreachable can be reported later; finishing a run twice is a no-op.
-- sampled keeps the files a backup hashed, for restore tests (verify runs).
CREATE TABLE agent_runs (
    id          TEXT PRIMARY KEY,              -- run_… chosen by the agent
    endpoint_id TEXT NOT NULL REFERENCES endpoints(id),
    job_id      TEXT NOT NULL,
    kind        TEXT NOT NULL,
    command_id  TEXT NOT NULL DEFAULT '',
    started_at  INTEGER NOT NULL,
    finished_at INTEGER,
    state       TEXT NOT NULL DEFAULT 'running',
    snapshot_id TEXT NOT NULL DEFAULT '',
    stats       TEXT NOT NULL DEFAULT '{}',    -- JSON
    sampled     TEXT NOT NULL DEFAULT '[]'     -- JSON [{path, size, sha256}]
) STRICT;
CREATE INDEX agent_runs_endpoint ON agent_runs(endpoint_id, id);
CREATE INDEX agent_runs_snapshot ON agent_runs(snapshot_id) WHERE snapshot_id != '';
