-- Run names are unique (among runs that have one): a name says which run a
-- command means (Store.Resolve), and forks started at once once shared
-- one. Before this runs, dedupeNames renames the later runs of a shared
-- name "<name>-2", "-3", ... (the first free).
CREATE UNIQUE INDEX runs_name_unique ON runs (name) WHERE name != '';
