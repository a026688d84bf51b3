-- The search index is keyed by each message's search key, not its id:
-- the second it was written (from 2000-01-01, clamped to 33 bits) above
-- its id (30 bits), so that reading the index by rowid reads messages
-- newest first and a search stops at its limit (store/search.go,
-- searchKey). The index is contentless: its rows are written again from
-- the parts by Go after this (reindexSearch).
DROP TRIGGER messages_fts_delete;
DROP TABLE message_fts;

CREATE VIRTUAL TABLE message_fts USING fts5 (
	body,
	content = '',
	contentless_delete = 1,
	tokenize = 'unicode61 remove_diacritics 2'
);

CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
	DELETE FROM message_fts WHERE rowid =
		(min(max(coalesce(old.created_at, 0) / 1000000000 - 946684800, 0), 8589934591) << 30) | old.id;
END;
