-- Each run carries the number of the last change made to its row
-- (change_seq), from one counter that only goes up (run_change_seq), so
-- that a follower (tine serve's event hub) reads only the runs made or
-- changed since the number it saw last instead of every run
-- (Store.RunsChangedSince). The triggers number every insert and update,
-- whichever process and whichever statement writes them; writers are one
-- at a time, so a reader's snapshot holds every number up to its highest.
-- A counter, not max(change_seq) + 1: a deleted run must not give its
-- number again.
ALTER TABLE runs ADD COLUMN change_seq INTEGER NOT NULL DEFAULT 0;
CREATE TABLE run_change_seq (n INTEGER NOT NULL) STRICT;
UPDATE runs SET change_seq = rowid;
INSERT INTO run_change_seq (n) SELECT coalesce(max(change_seq), 0) FROM runs;
CREATE INDEX runs_change_seq ON runs (change_seq);

CREATE TRIGGER runs_change_insert AFTER INSERT ON runs BEGIN
	UPDATE run_change_seq SET n = n + 1;
	UPDATE runs SET change_seq = (SELECT n FROM run_change_seq) WHERE rowid = new.rowid;
END;
CREATE TRIGGER runs_change_update AFTER UPDATE ON runs WHEN new.change_seq IS old.change_seq BEGIN
	UPDATE run_change_seq SET n = n + 1;
	UPDATE runs SET change_seq = (SELECT n FROM run_change_seq) WHERE rowid = new.rowid;
END;
