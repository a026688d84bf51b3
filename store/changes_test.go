package store

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/model"
)

// TestChangesSeesEveryCommit: a commit by another process's connection or
// by this store's writer is seen once; a read is not a change.
func TestChangesSeesEveryCommit(t *testing.T) {
	t.Parallel()
	st, path := openTemp(t)
	ctx := context.Background()
	c, err := st.WatchChanges(ctx)
	require.NoError(t, err)
	defer c.Close()
	changed, err := c.Changed(ctx)
	require.NoError(t, err)
	assert.False(t, changed, "nothing yet")

	other, err := Open(path) // another process, as far as SQLite can tell
	require.NoError(t, err)
	defer other.Close()
	root := model.Run{Harness: "fake"}
	require.NoError(t, other.CreateRun(ctx, &root, conversation(2, "r")))
	changed, err = c.Changed(ctx)
	require.NoError(t, err)
	assert.True(t, changed, "another connection committed")
	changed, _ = c.Changed(ctx)
	assert.False(t, changed, "seen once")

	_, err = st.Trees(ctx)
	require.NoError(t, err)
	changed, _ = c.Changed(ctx)
	assert.False(t, changed, "a read is not a change")

	require.NoError(t, st.SetName(ctx, root.ID, "renamed"))
	changed, _ = c.Changed(ctx)
	assert.True(t, changed, "this store's own writer is another connection too")
}

// changedSince reads the runs changed after mark, as ids, and the next
// mark.
func changedSince(t *testing.T, st *Store, mark int64) ([]string, int64) {
	t.Helper()
	runs, next, err := st.RunsChangedSince(context.Background(), mark)
	require.NoError(t, err)
	ids := []string{}
	for _, r := range runs {
		ids = append(ids, r.ID)
	}
	assert.GreaterOrEqual(t, next, mark)
	return ids, next
}

// TestRunsChangedSince: from mark 0 every run; then exactly the runs made
// or changed since the mark, by this store's writes of every kind, by
// another process's, and by a bare UPDATE of the row; a deleted run that
// had the highest number does not give it again.
func TestRunsChangedSince(t *testing.T) {
	t.Parallel()
	st, path := openTemp(t)
	ctx := context.Background()
	root, _ := createRoot(t, st, 4, "changes")
	ids, mark := changedSince(t, st, 0)
	assert.Equal(t, []string{root.ID}, ids)
	ids, again := changedSince(t, st, mark)
	assert.Empty(t, ids, "nothing changed")
	assert.Equal(t, mark, again)

	a, b := &model.Run{ParentID: root.ID, ForkAt: 4}, &model.Run{ParentID: root.ID, ForkAt: 2}
	require.NoError(t, st.CreateForks(ctx, []*model.Run{a, b}))
	ids, mark = changedSince(t, st, mark)
	assert.Equal(t, []string{a.ID, b.ID}, ids, "forks made, in the order they were")

	require.NoError(t, st.SetStatus(ctx, a.ID, model.Running, ""))
	ids, mark = changedSince(t, st, mark)
	assert.Equal(t, []string{a.ID}, ids, "a status")

	require.NoError(t, st.AppendMessages(ctx, b.ID, conversation(2, "more")))
	runs, next, err := st.RunsChangedSince(ctx, mark)
	require.NoError(t, err)
	require.Len(t, runs, 1, "new messages")
	assert.Equal(t, b.ID, runs[0].ID)
	assert.Equal(t, 4, runs[0].Len(), "the run as it is now")
	mark = next

	// Another process, as far as SQLite can tell.
	other, err := Open(path)
	require.NoError(t, err)
	defer other.Close()
	c := model.Run{Harness: "fake"}
	require.NoError(t, other.CreateRun(ctx, &c, conversation(2, "c")))
	ids, mark = changedSince(t, st, mark)
	assert.Equal(t, []string{c.ID}, ids, "a run another process made")
	_, err = other.w.ExecContext(ctx, `UPDATE runs SET title = 'by hand' WHERE id = ?`, root.ID)
	require.NoError(t, err)
	ids, mark = changedSince(t, st, mark)
	assert.Equal(t, []string{root.ID}, ids, "a bare UPDATE of another connection")

	// c has the highest number; once it is gone, the next change still
	// numbers above the mark.
	require.NoError(t, st.SetName(ctx, c.ID, "last"))
	_, mark = changedSince(t, st, mark)
	_, err = st.w.ExecContext(ctx, `DELETE FROM runs WHERE id = ?`, c.ID)
	require.NoError(t, err)
	require.NoError(t, st.SetName(ctx, a.ID, "after-a-delete"))
	ids, _ = changedSince(t, st, mark)
	assert.Equal(t, []string{a.ID}, ids, "a change after the run with the highest number was deleted")

	ids, _ = changedSince(t, st, 0)
	slices.Sort(ids)
	want := []string{root.ID, a.ID, b.ID}
	slices.Sort(want)
	assert.Equal(t, want, ids, "every run there is, for mark 0")
}

// TestRunsChangedSinceAfterMigration: the runs of a database from before
// the runs were numbered are every run for mark 0, and numbered on from
// there.
func TestRunsChangedSinceAfterMigration(t *testing.T) {
	t.Parallel()
	raw, path := openBefore(t, "_run_changes.sql")
	for _, id := range []string{"old1", "old2"} {
		_, err := raw.Exec(`INSERT INTO runs (id, tree_id, status, created_at, last_at) VALUES (?, ?, 'completed', 1, 1)`, id, id)
		require.NoError(t, err)
	}
	require.NoError(t, raw.Close())
	st, err := Open(path)
	require.NoError(t, err)
	defer st.Close()
	ids, mark := changedSince(t, st, 0)
	assert.Equal(t, []string{"old1", "old2"}, ids)
	require.NoError(t, st.SetName(context.Background(), "old1", "renamed"))
	ids, _ = changedSince(t, st, mark)
	assert.Equal(t, []string{"old1"}, ids)
}
