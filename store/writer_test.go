package store

import (
	"context"
	"database/sql"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/model"
)

// requireIndexMatches checks that the search index holds exactly the
// stored messages, each under its searchKey: a row for each message with
// text, none for a message that is gone.
func requireIndexMatches(t *testing.T, s *Store) {
	t.Helper()
	want := map[int64]bool{}
	rows, err := s.r.Query(`SELECT id, created_at FROM messages`)
	require.NoError(t, err)
	for rows.Next() {
		var id int64
		var at sql.NullInt64
		require.NoError(t, rows.Scan(&id, &at))
		key, err := searchKey(id, at)
		require.NoError(t, err)
		want[key] = true
	}
	require.NoError(t, rows.Err())
	rows, err = s.r.Query(`SELECT rowid FROM message_fts`)
	require.NoError(t, err)
	var stale int
	for rows.Next() {
		var key int64
		require.NoError(t, rows.Scan(&key))
		if !want[key] {
			stale++
		}
		delete(want, key)
	}
	require.NoError(t, rows.Err())
	assert.Zero(t, stale, "index rows of messages that are gone")
	assert.Empty(t, want, "messages the index lacks")
}

// TestBatchIndexesWhatItKeeps: the writer indexes a transaction's text at
// its end, yet a fork linked in the same batch (its copies of the parent's
// messages deleted) and a file rolled back to its savepoint leave no index
// rows behind, and every message kept is found.
func TestBatchIndexesWhatItKeeps(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	bad := []model.FileRun{
		{Parent: -1, Run: model.Run{Harness: "claude", NativeID: "S3"}, Messages: []model.Message{nm(model.User, "x1", "rolledback")}},
		{Parent: 5, Run: model.Run{Harness: "claude", NativeID: "S3"}, Messages: []model.Message{nm(model.User, "x2", "y")}},
	}
	files := []struct {
		path string
		runs []model.FileRun
	}{{"/p.jsonl", parentFile()}, {"/f.jsonl", forkFile()}}
	store := func(files []struct {
		path string
		runs []model.FileRun
	}) {
		err := s.ImportFiles(ctx, len(files),
			func(i int) (model.Source, []model.FileRun) { return src(files[i].path), files[i].runs },
			func(int, []model.Run, error) {}, nil)
		require.NoError(t, err)
	}
	store(files)
	runs, err := s.Runs(ctx)
	require.NoError(t, err)
	require.Len(t, runs, 2)
	assert.Equal(t, 6, count(t, s, "messages"), "the fork's copies are gone")
	requireIndexMatches(t, s)

	// A batch with a failing file is written again with savepoints.
	store([]struct {
		path string
		runs []model.FileRun
	}{{"/bad.jsonl", bad}, {"/g.jsonl", []model.FileRun{{Parent: -1, Run: model.Run{Harness: "claude", NativeID: "S4"},
		Messages: []model.Message{nm(model.User, "g1", "kept words")}}}}})
	requireIndexMatches(t, s)
	hits, err := s.Search(ctx, "rolledback", 0)
	require.NoError(t, err)
	assert.Empty(t, hits)
	hits, err = s.Search(ctx, "kept words", 0)
	require.NoError(t, err)
	assert.Len(t, hits, 1)
	hits, err = s.Search(ctx, "q2", 0)
	require.NoError(t, err)
	assert.Len(t, hits, 1, "the parent's message, once: the fork's copy is not indexed")
}
