-- A batch is the forks made together (one request, at one boundary): a
-- best-of-N best is the best of its batch, so a later batch's best leaves
-- an earlier one's marked. '' for a run made in none (an import, a root),
-- which is a batch of its own. The forks an older tine made go, per
-- parent and boundary, into one: what their best was of.
ALTER TABLE runs ADD COLUMN batch TEXT NOT NULL DEFAULT '';
UPDATE runs SET batch = parent_id || ':' || fork_at WHERE parent_id IS NOT NULL;
CREATE INDEX runs_batch ON runs (batch) WHERE batch != '';
