-- Runs, their own messages and parts, the search index, and the tables for
-- tapes (replay) and sources (incremental import).
--
-- Times are unix nanoseconds. A fork is one runs row: its inherited prefix is
-- read from its ancestors (messages.seq < fork_at), never copied.

CREATE TABLE runs (
	id                 TEXT PRIMARY KEY,
	tree_id            TEXT NOT NULL REFERENCES runs (id),
	parent_id          TEXT REFERENCES runs (id),
	fork_at            INTEGER NOT NULL DEFAULT 0,
	fork_step          INTEGER NOT NULL DEFAULT 0,
	asked              TEXT NOT NULL DEFAULT '',
	snapped_reason     TEXT NOT NULL DEFAULT '',
	parent_len         INTEGER NOT NULL DEFAULT 0,
	name               TEXT NOT NULL DEFAULT '',
	harness            TEXT NOT NULL DEFAULT '',
	native_id          TEXT NOT NULL DEFAULT '',
	model              TEXT NOT NULL DEFAULT '',
	cwd                TEXT NOT NULL DEFAULT '',
	worktree           TEXT NOT NULL DEFAULT '',
	branch             TEXT NOT NULL DEFAULT '',
	title              TEXT NOT NULL DEFAULT '',
	status             TEXT NOT NULL,
	error              TEXT NOT NULL DEFAULT '',
	created_at         INTEGER NOT NULL,
	finished_at        INTEGER,
	-- latest of created_at, finished_at and the own messages' times: what
	-- "newest activity first" sorts by.
	last_at            INTEGER NOT NULL,
	input_tokens       INTEGER NOT NULL DEFAULT 0,
	output_tokens      INTEGER NOT NULL DEFAULT 0,
	cache_read_tokens  INTEGER NOT NULL DEFAULT 0,
	cache_write_tokens INTEGER NOT NULL DEFAULT 0,
	cost_usd           REAL NOT NULL DEFAULT 0,
	hidden             INTEGER NOT NULL DEFAULT 0,
	own_messages       INTEGER NOT NULL DEFAULT 0,
	CHECK ((parent_id IS NULL) = (tree_id = id)),
	CHECK (parent_id IS NOT NULL OR fork_at = 0),
	CHECK (fork_at >= 0 AND own_messages >= 0)
) STRICT;

CREATE INDEX runs_tree ON runs (tree_id);
CREATE INDEX runs_parent ON runs (parent_id);
CREATE INDEX runs_native ON runs (native_id);
CREATE INDEX runs_name ON runs (name);

CREATE TABLE messages (
	id                 INTEGER PRIMARY KEY,
	run_id             TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
	-- position in the run's full transcript: fork_at + i for the i-th own message
	seq                INTEGER NOT NULL,
	role               TEXT NOT NULL,
	native_id          TEXT NOT NULL DEFAULT '',
	model              TEXT NOT NULL DEFAULT '',
	input_tokens       INTEGER NOT NULL DEFAULT 0,
	output_tokens      INTEGER NOT NULL DEFAULT 0,
	cache_read_tokens  INTEGER NOT NULL DEFAULT 0,
	cache_write_tokens INTEGER NOT NULL DEFAULT 0,
	created_at         INTEGER,
	UNIQUE (run_id, seq)
) STRICT;

CREATE TABLE parts (
	message_id   INTEGER NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
	idx          INTEGER NOT NULL,
	kind         TEXT NOT NULL,
	text         TEXT NOT NULL DEFAULT '',
	tool_call_id TEXT NOT NULL DEFAULT '',
	tool_name    TEXT NOT NULL DEFAULT '',
	tool_input   TEXT NOT NULL DEFAULT '',
	is_error     INTEGER NOT NULL DEFAULT 0,
	raw          TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (message_id, idx)
) STRICT;

-- Contentless: the text lives in parts; the index holds only what search
-- needs. rowid is messages.id.
CREATE VIRTUAL TABLE message_fts USING fts5 (
	body,
	content = '',
	contentless_delete = 1,
	tokenize = 'unicode61 remove_diacritics 2'
);

-- Keeps the index in step when messages go (directly or by cascade).
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
	DELETE FROM message_fts WHERE rowid = old.id;
END;

CREATE TABLE tapes (
	run_id       TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
	step         INTEGER NOT NULL,
	request      TEXT, -- NULL for imported transcripts: tapes without requests
	response     TEXT NOT NULL DEFAULT '',
	tool_outputs TEXT NOT NULL DEFAULT '', -- JSON
	tree_hash    TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (run_id, step)
) STRICT;

CREATE TABLE sources (
	path        TEXT PRIMARY KEY,
	format      TEXT NOT NULL,
	size        INTEGER NOT NULL DEFAULT 0,
	mtime       INTEGER NOT NULL DEFAULT 0,
	"offset"    INTEGER NOT NULL DEFAULT 0, -- bytes already imported
	run_id      TEXT REFERENCES runs (id) ON DELETE SET NULL,
	imported_at INTEGER NOT NULL,
	skipped     TEXT NOT NULL DEFAULT '' -- why the file was not imported; '' when it was
) STRICT;

CREATE INDEX sources_run ON sources (run_id);
