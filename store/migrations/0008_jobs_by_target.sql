-- A target's job history (a machine's recent runs), newest first.
CREATE INDEX jobs_target_queued ON jobs(target_id, queued_at, id);
