-- A merge (tine merge) gives a run one turn whose prompt carries what
-- forks learned. run_id is the run that got the turn and at its length
-- when the turn began (the merge's prompt is its message at+1);
-- merged_forks are the forks it carried, in the prompt's order (a
-- best-of-N winner first). The tree shows the merge where its prompt is,
-- and each merged fork where it went.
CREATE TABLE merges (
	id         INTEGER PRIMARY KEY,
	run_id     TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
	at         INTEGER NOT NULL,
	created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX merges_run ON merges (run_id);
CREATE TABLE merged_forks (
	merge_id INTEGER NOT NULL REFERENCES merges (id) ON DELETE CASCADE,
	position INTEGER NOT NULL,
	fork_id  TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
	PRIMARY KEY (merge_id, position)
) STRICT;
CREATE INDEX merged_forks_fork ON merged_forks (fork_id);
