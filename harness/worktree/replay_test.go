package worktree

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCreateAtRebuildsTheStart: a replay's sandbox is at the base commit
// with exactly the files a fork started with (its carried changes
// included), whatever the source holds now; Tree and Changes read what
// the replay then did.
func TestCreateAtRebuildsTheStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t)
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(repo, "untracked.txt"), []byte("carried\n"), 0o644))
	fork, err := Create(ctx, Spec{Source: repo, Root: root})
	require.NoError(t, err)
	// The source moves on after the fork started.
	require.NoError(t, os.WriteFile(filepath.Join(repo, "untracked.txt"), []byte("later\n"), 0o644))

	wt, err := CreateAt(ctx, Spec{Source: repo, Root: root, Branch: "main-fork-1"}, fork.Base, fork.Start)
	require.NoError(t, err)
	assert.Equal(t, "main-fork-1-replay-1", wt.Branch)
	b, err := os.ReadFile(filepath.Join(wt.Path, "untracked.txt"))
	require.NoError(t, err)
	assert.Equal(t, "carried\n", string(b), "the files the fork started with, not the source's now")
	tree, err := Tree(ctx, wt.Path)
	require.NoError(t, err)
	assert.Equal(t, fork.Start, tree)

	require.NoError(t, os.WriteFile(filepath.Join(wt.Path, "new.txt"), []byte("made by a tool\n"), 0o644))
	after, err := Tree(ctx, wt.Path)
	require.NoError(t, err)
	ch, err := Changes(ctx, wt.Path, tree, after)
	require.NoError(t, err)
	assert.Len(t, ch, 1)
	assert.Contains(t, ch, "new.txt")
	d, err := TreeDiff(ctx, wt.Path, tree, after, nil, 50)
	require.NoError(t, err)
	assert.Contains(t, d, "+made by a tool")

	_, err = CreateAt(ctx, Spec{Source: repo, Root: root}, "no-such-rev", "")
	assert.ErrorContains(t, err, "is not a commit")
	again, err := CreateAt(ctx, Spec{Source: repo, Root: root, Branch: "main-fork-1"}, fork.Base, "")
	require.NoError(t, err)
	assert.Equal(t, "main-fork-1-replay-2", again.Branch, "names are never reused")
	_, err = os.Stat(filepath.Join(again.Path, "untracked.txt"))
	assert.True(t, os.IsNotExist(err), "without a start tree: the base commit's files only")
}
