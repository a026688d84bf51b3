-- A fork's budget (tine fork|run|replay --max-tokens, --max-cost): the
-- bounds on what it spends of its own; its turns are stopped once it goes
-- over. 0 is no bound.
ALTER TABLE runs ADD COLUMN max_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN max_cost_usd REAL NOT NULL DEFAULT 0;
