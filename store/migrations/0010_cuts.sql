-- Where each run can be cut (rule 1 in ARCHITECTURE.md), stored as its
-- messages are: the cut facts of its own messages (model/cuts.go), a
-- chunk of 4096 messages a row, and the tool calls a prompt left
-- unanswered and the results that answered one later, which a run that
-- grows needs to go on from where it stopped. cuts = 1 says a run's facts
-- are stored; the runs of an older tine get theirs when first read
-- (Store.Boundaries), in a transaction.
ALTER TABLE runs ADD COLUMN cuts INTEGER NOT NULL DEFAULT 0;

CREATE TABLE cut_facts (
	run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
	chunk  INTEGER NOT NULL, -- the run's own messages chunk*4096 .. chunk*4096+4095
	count  INTEGER NOT NULL, -- how many of them facts holds
	facts  BLOB NOT NULL,
	PRIMARY KEY (run_id, chunk)
) STRICT, WITHOUT ROWID;

CREATE TABLE cut_calls (
	run_id   TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
	at       INTEGER NOT NULL, -- seq of the prompt that left the call unanswered, or of the result that answered it later
	call_at  INTEGER NOT NULL, -- seq of the assistant message that made the call
	call_id  TEXT NOT NULL,
	answered INTEGER NOT NULL
) STRICT;
CREATE INDEX cut_calls_run ON cut_calls (run_id);

