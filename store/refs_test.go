package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/model"
)

// RunRefs finds runs by the start of their id or name, with the tree's
// title for a fork, while the store is open for writing; it never makes a
// database, and it cannot write one.
func TestRunRefs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, path := openTemp(t) // open: RunRefs reads beside a writer
	root, _ := createRoot(t, s, 4, "weather")
	fk := model.Run{ParentID: root.ID, ForkAt: 2, Name: "rome-only"}
	require.NoError(t, s.CreateForks(ctx, []*model.Run{&fk}))

	refs, err := RunRefs(ctx, path, "", 10)
	require.NoError(t, err)
	assert.Len(t, refs, 2)

	refs, err = RunRefs(ctx, path, "rome", 10)
	require.NoError(t, err)
	require.Len(t, refs, 1)
	assert.Equal(t, RunRef{ID: fk.ID, Name: "rome-only", Title: "weather title"}, refs[0])

	refs, err = RunRefs(ctx, path, root.ID[:3], 10)
	require.NoError(t, err)
	require.NotEmpty(t, refs)
	for _, r := range refs {
		assert.Equal(t, root.ID[:3], r.ID[:3])
	}

	refs, err = RunRefs(ctx, path, "", 1)
	require.NoError(t, err)
	assert.Len(t, refs, 1, "at most limit")

	missing := filepath.Join(t.TempDir(), "none", "tine.db")
	refs, err = RunRefs(ctx, missing, "", 10)
	require.NoError(t, err)
	assert.Empty(t, refs)
	_, err = os.Stat(filepath.Dir(missing))
	assert.ErrorIs(t, err, os.ErrNotExist, "no database, nor its folder, is made")
}

// The connection RunRefs reads through cannot write, even once its
// query_only pragma is turned off: SQLite opened the file read-only.
func TestRunRefsConnectionCannotWrite(t *testing.T) {
	t.Parallel()
	s, path := openTemp(t)
	createRoot(t, s, 2, "a")
	db, err := openRefs(path)
	require.NoError(t, err)
	defer db.Close()
	conn, err := db.Conn(context.Background())
	require.NoError(t, err)
	defer conn.Close()
	ctx := context.Background()
	_, err = conn.ExecContext(ctx, "PRAGMA query_only = 0")
	require.NoError(t, err)
	_, err = conn.ExecContext(ctx, "DELETE FROM runs")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "readonly")
	assert.Equal(t, 1, count(t, s, "runs"))
}
