-- How long a run's turns ran: started_at is when the turn running now
-- began (NULL between turns), worked_ns the sum of its finished turns. A
-- run's time in Compare and best-of-N is this, not finished minus
-- created, which counts the waits between turns (and for a slot).
ALTER TABLE runs ADD COLUMN started_at INTEGER;
ALTER TABLE runs ADD COLUMN worked_ns INTEGER NOT NULL DEFAULT 0;
