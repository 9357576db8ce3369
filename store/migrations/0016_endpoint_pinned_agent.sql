-- Agent self-update (CONTRACT §9, §15). pinned_agent_version: '' lets the
-- endpoint's agent follow the appliance's build; a version keeps it there
-- (GET /agent/v1/update offers only that version, or nothing).
ALTER TABLE endpoints ADD COLUMN pinned_agent_version TEXT NOT NULL DEFAULT '';
