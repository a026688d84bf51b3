-- A person can mark the best of a set of forks (Compare screen, best-of-N).
ALTER TABLE runs ADD COLUMN best INTEGER NOT NULL DEFAULT 0;
