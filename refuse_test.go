package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/model"
	"tine/store"
)

// TestAMissingCLIIsRefusedBeforeAnythingIsMade: a fork, a next turn or a
// retry through an agent whose CLI is not installed fails with exit 1,
// naming the npm package, and leaves no fork, worktree or branch behind.
func TestAMissingCLIIsRefusedBeforeAnythingIsMade(t *testing.T) {
	t.Parallel()
	sh := asShell([]string{"HOME=" + t.TempDir(), "TINE_CLAUDE_BIN=" + filepath.Join(t.TempDir(), "no-claude-here")})
	repo := filepath.Join(t.TempDir(), "project")
	gitInit(t, repo)
	db := filepath.Join(t.TempDir(), "t.db")
	st, err := store.Open(db)
	require.NoError(t, err)
	ctx := context.Background()
	root := model.Run{Name: "mine", Harness: "claude", Cwd: repo, NativeID: "11111111-2222-4333-8444-555555555555", Status: model.Completed}
	require.NoError(t, st.CreateRun(ctx, &root, []model.Message{
		{Role: model.User, Parts: []model.Part{{Kind: model.Text, Text: "hello"}}},
		{Role: model.Assistant, Parts: []model.Part{{Kind: model.Text, Text: "hi"}}},
	}))
	failed := model.Run{ParentID: root.ID, ForkAt: 2, Name: "failed-one", Harness: "claude", Cwd: repo, Status: model.Failed}
	require.NoError(t, st.CreateForks(ctx, []*model.Run{&failed}))
	require.NoError(t, st.Close())

	for _, args := range [][]string{
		{"fork", "mine", "-m", "go on", "--wait"},
		{"fork", "mine", "-m", "go on"}, // in the background
		{"run", "mine", "-m", "go on", "--wait"},
		{"retry", "failed-one", "--wait"},
	} {
		_, errOut, code := sh.tine(t, db, args...)
		assert.Equal(t, 1, code, "%v: %s", args, errOut)
		assert.Contains(t, errOut, "npm install -g @anthropic-ai/claude-code", args)
		assert.Contains(t, errOut, "TINE_CLAUDE_BIN names", args) // the shell's, not this process's
	}
	st, err = store.Open(db)
	require.NoError(t, err)
	defer st.Close()
	runs, err := st.TreeRuns(ctx, root.TreeID)
	require.NoError(t, err)
	assert.Len(t, runs, 2, "no fork was made")
	_, err = os.Stat(filepath.Join(filepath.Dir(db), "worktrees"))
	assert.ErrorIs(t, err, os.ErrNotExist, "no worktree was made")
	assert.Equal(t, "main", git(t, repo, "branch", "--format=%(refname:short)"), "no branch was made")
}

// TestRunWithoutAMessageIsAUsageError: tine run without -m on a run that
// ends with the model's reply is refused with exit 2, making no fork; a
// pending fork cut after a prompt may still run without one (the model
// answers it).
func TestRunWithoutAMessageIsAUsageError(t *testing.T) {
	db, id := importSeed(t)
	_, errOut, code := tine(t, db, "run", id, "--harness", "script", "--wait")
	assert.Equal(t, 2, code, errOut)
	assert.Contains(t, errOut, "-m MSG")
	st, err := store.Open(db)
	require.NoError(t, err)
	root, err := st.Run(context.Background(), id)
	require.NoError(t, err)
	runs, err := st.TreeRuns(context.Background(), root.TreeID)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	assert.Len(t, runs, 1, "no fork was made")

	_, errOut, code = tine(t, db, "fork", id, "--at", "last_user", "--name", "again", "--harness", "script")
	require.Equal(t, 0, code, errOut)
	_, errOut, code = tine(t, db, "run", "again", "--wait")
	assert.Equal(t, 0, code, errOut)
}

// TestANewDatabaseIsSaid: a --db path where there is no database (a typo)
// says that a new, empty one was made there, and which folders were made
// for it; the next command, on the database that is there now, says
// nothing.
func TestANewDatabaseIsSaid(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "typo", "deeper", "t.db")
	_, errOut, code := tine(t, db, "ls")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "tine: there was no database at "+db+": made a new, empty one (and the folder "+filepath.Join(dir, "typo")+")\n", errOut)
	_, errOut, code = tine(t, db, "ls")
	require.Equal(t, 0, code, errOut)
	assert.Empty(t, errOut)
}

// TestOutputToAPipeIsNotCut: a table printed to a pipe or a file keeps
// every column whole; only a terminal's lines are cut to fit.
func TestOutputToAPipeIsNotCut(t *testing.T) {
	out, errOut, code := tine(t, filepath.Join(t.TempDir(), "t.db"), "harnesses")
	require.Equal(t, 0, code, errOut)
	assert.NotContains(t, out, "…")
	assert.Contains(t, out, "TINE_CLAUDE_BIN to use another claude binary", "the last of claude's needs")
}

// TestHarnessesSaysAnAPIWithoutAKeyIsNotReady: a model API with no key
// (and no server of one's own) is not "yes" here.
func TestHarnessesSaysAnAPIWithoutAKeyIsNotReady(t *testing.T) {
	t.Parallel()
	sh := asShell([]string{"OPENAI_BASE_URL=http://127.0.0.1:11434/v1"}, "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY")
	out, errOut, code := sh.tine(t, filepath.Join(t.TempDir(), "t.db"), "harnesses")
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `(?m)^anthropic +no `, out)
	assert.Contains(t, out, "anthropic: ANTHROPIC_API_KEY is not set")
	assert.Regexp(t, `(?m)^openai +yes `, out, "a server of one's own needs no key")
}

// TestCompareWithOneRunSaysWhatToCompare: compare given one run is a
// usage error that names what it could be compared with.
func TestCompareWithOneRunSaysWhatToCompare(t *testing.T) {
	db, id := importSeed(t)
	_, errOut, code := tine(t, db, "compare", id)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "alone has nothing to compare with, and it has no forks yet")
	_, errOut, code = tine(t, db, "fork", id, "-n", "2", "--name", "a", "--name", "b", "--harness", "script")
	require.Equal(t, 0, code, errOut)
	_, errOut, code = tine(t, db, "compare", id)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "e.g. its forks: tine compare "+model.ShortID(id)+" a b")
	_, errOut, code = tine(t, db, "compare", "a")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "e.g. its siblings: tine compare a b")
	assert.NotContains(t, errOut, "missing argument")
}

// TestExportMarkdownSaysWhereAForkWorked: a fork's Markdown says its
// worktree and branch (not only the checkout it was made from), its base,
// its check and why it is the best.
func TestExportMarkdownSaysWhereAForkWorked(t *testing.T) {
	db, st, root := openSeed(t)
	id, ctx := root.ID, context.Background()
	fk := model.Run{ParentID: id, TreeID: root.TreeID, ForkAt: 6, Name: "good", Harness: "claude", Cwd: "/src/proj", Status: model.Completed}
	require.NoError(t, st.CreateForks(ctx, []*model.Run{&fk}))
	require.NoError(t, st.SetWorktree(ctx, fk.ID, "/data/worktrees/proj-1/main-fork-1", "main-fork-1", "0123456789abcdef", ""))
	require.NoError(t, st.SetCheck(ctx, fk.ID, model.Check{Cmd: "go test ./...", Ran: true, Exit: 0}))
	require.NoError(t, st.MarkBest(ctx, fk.ID, "the only fork of 2 whose check passed"))
	require.NoError(t, st.Close())

	md, errOut, code := tine(t, db, "export", "good", "--format", "md")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, md, "- worked in: `/data/worktrees/proj-1/main-fork-1`, a git worktree on branch `main-fork-1` of `/src/proj`\n")
	assert.Contains(t, md, "- base commit: `0123456789abcdef`\n")
	assert.Contains(t, md, "- check: `go test ./...`: passed\n")
	assert.Contains(t, md, "- best: ★ the only fork of 2 whose check passed\n")
	assert.NotContains(t, md, "- cwd: `/src/proj`", "the checkout it was made from is not where it worked")
}
