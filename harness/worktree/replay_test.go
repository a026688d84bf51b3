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

// TestTreesIgnoreARewrittenGitFile: the agent in a replay's worktree (in
// its sandbox) may rewrite the worktree's .git file to point at a
// repository of its own, whose config runs a command (core.fsmonitor, run
// by the `git add` of every snapshot). tine's own git on that tree, which
// runs outside the sandbox, goes on with the git directory it found before
// the agent ran: the command never runs, and the trees are the worktree's.
func TestTreesIgnoreARewrittenGitFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t)
	wt, err := Create(ctx, Spec{Source: repo, Root: t.TempDir()})
	require.NoError(t, err)
	trees, err := Trees(ctx, wt.Path)
	require.NoError(t, err)
	gitDir, err := GitDir(ctx, wt.Path)
	require.NoError(t, err)
	before, err := trees(ctx)
	require.NoError(t, err)

	// What a replayed tool does: a repository of its own (in its TMPDIR),
	// and the worktree's .git pointing at it.
	marker := filepath.Join(t.TempDir(), "escaped")
	evil := filepath.Join(t.TempDir(), "evil")
	gitT(t, wt.Path, "init", "-q", evil)
	f, err := os.OpenFile(filepath.Join(evil, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString("[core]\n\tfsmonitor = \"touch " + marker + "; false\"\n\tworktree = " + wt.Path + "\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, os.WriteFile(filepath.Join(wt.Path, ".git"), []byte("gitdir: "+filepath.Join(evil, ".git")+"\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(wt.Path, "new.txt"), []byte("made by a tool\n"), 0o644))

	after, err := trees(ctx)
	require.NoError(t, err)
	assert.NoFileExists(t, marker, "tine's git ran a command of the agent's repository")
	ch, err := Changes(ctx, gitDir, before, after)
	assert.NoError(t, err, "the tree is in the worktree's repository")
	assert.Contains(t, ch, "new.txt", "the tree is the worktree's, read through its own git directory")
	d, err := TreeDiff(ctx, gitDir, before, after, []string{"new.txt"}, 50)
	assert.NoError(t, err)
	assert.Contains(t, d, "+made by a tool")

	// Once the agent is done, the .git file is the worktree's again, and
	// tine's git there (a diff for Compare) reads its own repository.
	require.NoError(t, RestoreGitFile(wt.Path, gitDir))
	stat, err := DiffStat(ctx, wt.Path, wt.Base)
	require.NoError(t, err)
	assert.NotEmpty(t, stat)
	assert.NoFileExists(t, marker, "tine's git ran a command of the agent's repository")
	require.NoError(t, RestoreGitFile(wt.Path, gitDir), "again: nothing to do")
}
