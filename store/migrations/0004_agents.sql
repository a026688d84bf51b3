-- Agent forks: the worktree's base commit, handoffs, in-place runs, the
-- best-of-N check and why a fork was marked best, notes a harness left,
-- and who is running a run (so a dead owner's run is not "running"
-- forever) and whether someone asked to cancel it.
ALTER TABLE runs ADD COLUMN base_commit TEXT NOT NULL DEFAULT '';
-- the git tree of the files a fork's worktree started with (base_commit
-- plus the parent's uncommitted work): what the fork changed is against it
ALTER TABLE runs ADD COLUMN start_tree TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN handoff INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN in_place INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN check_cmd TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN check_number INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN check_ran INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN check_exit INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN check_score REAL;
ALTER TABLE runs ADD COLUMN check_output TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN check_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN check_error TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN best_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN note TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN owner_pid INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN owner_start INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0;
CREATE INDEX runs_running ON runs (status) WHERE status = 'running';
