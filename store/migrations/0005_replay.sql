-- Replays (rule 9): a run made by replaying another run's tape to step N
-- in a fresh worktree, then going live. The run itself is a fork of the
-- replayed run at the boundary after step N; this row says how it was
-- made and how the replay went.
CREATE TABLE replays (
	run_id        TEXT PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
	of_run        TEXT NOT NULL,           -- the run whose tape was replayed
	step          INTEGER NOT NULL,        -- N: steps answered from the tape
	trial         INTEGER NOT NULL,        -- 1..k (1 for a k = 0 verification)
	continuations INTEGER NOT NULL,        -- k
	on_divergence TEXT NOT NULL,           -- stop | live
	status        TEXT NOT NULL,           -- replaying | forked | verified | diverged | unreplayed
	replayed      INTEGER NOT NULL DEFAULT 0, -- steps answered from the tape so far
	divergence    TEXT NOT NULL DEFAULT '',   -- JSON, '' when none
	aa            INTEGER,                 -- NULL: not measured; 1: reproduced the original outcome
	aa_reason     TEXT NOT NULL DEFAULT '',
	base          TEXT NOT NULL DEFAULT '', -- the commit the sandbox was made at
	tape_kind     TEXT NOT NULL DEFAULT '', -- recorded | transcript
	created_at    INTEGER NOT NULL
) STRICT;
CREATE INDEX replays_of ON replays (of_run);
