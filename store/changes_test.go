package store

import (
	"context"
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
