-- Where a run's turns run: place is "" on this machine, else a place's
-- name ("docker", "docker:CONTEXT"); place_opts its options as JSON (an
-- image, limits, a network); container the container a fork's turns run
-- in. A fork keeps its place for every later turn.
ALTER TABLE runs ADD COLUMN place TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN place_opts TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN container TEXT NOT NULL DEFAULT '';
