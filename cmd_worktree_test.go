package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness/worktree"
	"tine/model"
	"tine/store"
)

// agentForks stores a root run of an agent in a new repository and, for
// each batch of names, forks made together, each finished in a worktree
// of its own where it wrote out-<name>.txt and left it uncommitted (agents
// rarely commit). It returns the database, the project and the forks.
func agentForks(t *testing.T, batches ...[]string) (string, string, map[string]model.Run) {
	t.Helper()
	ctx := context.Background()
	project := filepath.Join(t.TempDir(), "project")
	gitInit(t, project)
	db := filepath.Join(t.TempDir(), "t.db")
	st, err := store.Open(db)
	require.NoError(t, err)
	defer st.Close()
	root := model.Run{Harness: "claude", NativeID: "s", Cwd: project}
	require.NoError(t, st.CreateRun(ctx, &root, []model.Message{{Role: model.User, Parts: []model.Part{{Kind: model.Text, Text: "q"}}}}))
	forks := map[string]model.Run{}
	for _, names := range batches {
		var batch []*model.Run
		for _, n := range names {
			batch = append(batch, &model.Run{ParentID: root.ID, ForkAt: 1, Name: n, Harness: "claude", Cwd: project})
		}
		require.NoError(t, st.CreateForks(ctx, batch))
		for _, f := range batch {
			wt, err := worktree.Create(ctx, worktree.Spec{Source: project, Root: filepath.Join(filepath.Dir(db), "worktrees")})
			require.NoError(t, err)
			require.NoError(t, st.SetWorktree(ctx, f.ID, wt.Path, wt.Branch, wt.Base, wt.Start))
			require.NoError(t, st.SetStatus(ctx, f.ID, model.Completed, ""))
			require.NoError(t, os.WriteFile(filepath.Join(wt.Path, "out-"+f.Name+".txt"), []byte(f.Name+"\n"), 0o644))
			r, err := st.Run(ctx, f.ID)
			require.NoError(t, err)
			forks[f.Name] = r
		}
	}
	return db, project, forks
}

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	return strings.TrimSpace(string(out))
}

// Two best-of-N batches of one session: the second's best leaves the
// first's marked, and prune keeps both bests' worktrees; what the other
// forks' worktrees held uncommitted is committed to their branches (by
// tine) before they go, and rm refuses to delete it without --force.
func TestPruneKeepsEveryBatchsBestAndAllWork(t *testing.T) {
	db, project, forks := agentForks(t, []string{"a1", "a2"}, []string{"b1", "b2"})
	st, err := store.Open(db)
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, st.MarkBest(ctx, forks["a1"].ID, "the only fork of 2 whose check passed"))
	require.NoError(t, st.MarkBest(ctx, forks["b1"].ID, "the only fork of 2 whose check passed"))
	st.Close()

	_, errOut, code := tine(t, db, "worktree", "rm", "a2")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "a2: kept "+forks["a2"].Worktree+": its work in 1 file is in no commit; commit it there, or --force deletes it")
	assert.FileExists(t, filepath.Join(forks["a2"].Worktree, "out-a2.txt"))

	out, errOut, code := tine(t, db, "worktree", "prune")
	require.Equal(t, 0, code, errOut)
	assert.NotContains(t, out, "a1:", "the first batch's best is kept")
	assert.NotContains(t, out, "b1:", "the second batch's best is kept")
	for _, n := range []string{"a1", "b1"} {
		assert.FileExists(t, filepath.Join(forks[n].Worktree, "out-"+n+".txt"))
	}
	for _, n := range []string{"a2", "b2"} {
		f := forks[n]
		assert.Contains(t, out, n+": committed its uncommitted work (1 file) to branch "+f.Branch+" as ")
		assert.Contains(t, out, "; removed "+f.Worktree+"; kept branch "+f.Branch)
		assert.NoDirExists(t, f.Worktree)
		assert.Equal(t, n, gitIn(t, project, "show", f.Branch+":out-"+n+".txt"), "the work is on the branch")
		assert.Equal(t, "tine|tine: the uncommitted work of fork "+n, gitIn(t, project, "log", "-1", "--format=%an|%s", f.Branch))
	}

	_, errOut, code = tine(t, db, "worktree", "rm", "--force", "b1")
	require.Equal(t, 0, code, errOut)
	assert.NoDirExists(t, forks["b1"].Worktree)
	assert.Empty(t, gitIn(t, project, "branch", "--list", forks["b1"].Branch), "--force deletes the work and the branch")
}

// TestApplyingAForkAgainSaysItIsApplied: the second tine apply of a fork
// says it is applied already, not that the checkout clashes with it.
func TestApplyingAForkAgainSaysItIsApplied(t *testing.T) {
	t.Parallel()
	db, project, _ := agentForks(t, []string{"a"})
	out, errOut, code := tine(t, db, "apply", "a")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "applied a into "+project)
	_, errOut, code = tine(t, db, "apply", "a")
	assert.Equal(t, 1, code)
	assert.Equal(t, "tine: a: not applied: it is applied already: the checkout "+project+" holds its changes (1 file)\n", errOut)
}

// TestPrunesAtOnceAreSafe (issue 27, item 4): two tine worktree prune at
// once (and a gc beside them) each finish without an error, and between
// them every finished fork's worktree goes, its work committed to its
// branch once.
func TestPrunesAtOnceAreSafe(t *testing.T) {
	t.Parallel()
	names := []string{"p1", "p2", "p3", "p4", "p5", "p6"}
	db, project, forks := agentForks(t, names)
	var wg sync.WaitGroup
	type result struct {
		out, errOut string
		code        int
	}
	results := make([]result, 3)
	for i, args := range [][]string{{"worktree", "prune", "--all"}, {"worktree", "prune", "--all"}, {"gc"}} {
		wg.Go(func() {
			out, errOut, code := tine(t, db, args...)
			results[i] = result{out, errOut, code}
		})
	}
	wg.Wait()
	for i, r := range results {
		assert.Equal(t, 0, r.code, "%d: %s\n%s", i, r.out, r.errOut)
		assert.Empty(t, r.errOut, "%d", i)
	}
	for _, n := range names {
		f := forks[n]
		assert.NoDirExists(t, f.Worktree, n)
		assert.Equal(t, n, gitIn(t, project, "show", f.Branch+":out-"+n+".txt"), "%s: the work is on the branch", n)
		assert.Equal(t, "1", gitIn(t, project, "rev-list", "--count", f.BaseCommit+".."+f.Branch), "%s: committed once", n)
	}
}
