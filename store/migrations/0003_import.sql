-- Incremental import of agent sessions: which file a run came from, the
-- subagent runs a tool call started, and the links to sessions that are
-- not imported yet (resolved when they are, whichever file comes first).
ALTER TABLE runs ADD COLUMN source TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN spawned_by TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN spawned_call TEXT NOT NULL DEFAULT '';
CREATE INDEX runs_source ON runs (source) WHERE source != '';
CREATE INDEX runs_spawned ON runs (spawned_by) WHERE spawned_by != '';

CREATE TABLE links (
	run_id         TEXT PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
	kind           TEXT NOT NULL,
	harness        TEXT NOT NULL,
	parent_session TEXT NOT NULL,
	after_message  TEXT NOT NULL DEFAULT '',
	before_ordinal INTEGER NOT NULL DEFAULT 0,
	inherited      INTEGER NOT NULL DEFAULT 0,
	tool_call      TEXT NOT NULL DEFAULT ''
) STRICT;
CREATE INDEX links_parent ON links (harness, parent_session);

-- The id of the last record of a file's chain when it was read: a grown
-- file whose new records continue from it can be read from where it stopped.
ALTER TABLE sources ADD COLUMN leaf TEXT NOT NULL DEFAULT '';
