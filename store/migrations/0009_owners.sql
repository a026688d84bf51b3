-- Nothing left running or pending (ARCHITECTURE.md, rule 14): a run whose
-- turn was handed to a process (a background `tine run-turns`, or the one
-- that will run it when a slot frees) is marked handed_over, with that
-- process as its owner, until the turn starts, so that ReapOrphans fails
-- it when that process died first; and a running run records the agent
-- its turn started: its process group and the mark in its environment
-- (internal/agentproc), so that ReapOrphans kills what the agent left
-- running before it marks the run of a dead owner.
ALTER TABLE runs ADD COLUMN handed_over INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN agent_pgid INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN agent_mark TEXT NOT NULL DEFAULT '';
CREATE INDEX runs_handed_over ON runs (handed_over) WHERE handed_over = 1;
