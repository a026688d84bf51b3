package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness/worktree"
	"tine/model"
	"tine/store"
)

// TestGCRemovesOldTapesAndOrphanWorktrees: gc removes the tapes of runs
// that ended before the cut (a dry run only says so), the worktrees under
// tine's folder that no run holds, keeps such a worktree with uncommitted
// work, and one made lately (a fork may be being given it), and never
// touches a worktree a run holds.
func TestGCRemovesOldTapesAndOrphanWorktrees(t *testing.T) {
	t.Parallel()
	db, id := importSeed(t)
	ctx := context.Background()
	st, err := store.Open(db)
	require.NoError(t, err)
	req := `{"model":"m","messages":[]}`
	for step := 1; step <= 3; step++ {
		require.NoError(t, st.AddTapeStep(ctx, id, model.TapeStep{Step: step, Request: &req, Response: `{"answer":"x"}`}))
	}
	// Worktrees under tine's folder: one a run holds, one orphan clean,
	// one orphan with uncommitted work.
	repo := t.TempDir()
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
	}
	git(repo, "init", "-q", "-b", "main")
	require.NoError(t, os.WriteFile(filepath.Join(repo, "f.txt"), []byte("x\n"), 0o644))
	git(repo, "add", ".")
	git(repo, "commit", "-q", "-m", "init")
	root := filepath.Join(filepath.Dir(db), "worktrees", "proj-1234")
	wt := func(name string) string {
		p := filepath.Join(root, name)
		git(repo, "worktree", "add", "-q", "-b", name, p)
		return p
	}
	held, clean, dirty, recent := wt("held"), wt("clean"), wt("dirty"), wt("recent")
	require.NoError(t, os.WriteFile(filepath.Join(dirty, "work.txt"), []byte("unsaved\n"), 0o644))
	// Made long ago, but recent: a fork may be being given that one.
	long := time.Now().Add(-2 * worktree.Settle)
	for _, d := range []string{held, clean, dirty} {
		require.NoError(t, os.Chtimes(filepath.Join(d, ".git"), long, long))
	}
	parent, err := st.Run(ctx, id)
	require.NoError(t, err)
	fk := &model.Run{ParentID: id, TreeID: parent.TreeID, ForkAt: 1, Name: "with-wt", Harness: "script", Status: model.Pending}
	require.NoError(t, st.CreateForks(ctx, []*model.Run{fk}))
	require.NoError(t, st.SetWorktree(ctx, fk.ID, held, "held", "", ""))
	require.NoError(t, st.Close())

	// A recent tape stays under the default 30 days.
	out, errOut, code := tine(t, db, "gc", "--json")
	require.Equal(t, 0, code, errOut)
	var res gcJSON
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	assert.Empty(t, res.Tapes)
	assert.Equal(t, []string{clean}, res.Worktrees)
	assert.Equal(t, []string{dirty}, res.Kept)
	assert.Equal(t, []string{recent}, res.Recent)
	_, err = os.Stat(clean)
	assert.True(t, os.IsNotExist(err), "the clean orphan is gone")
	for _, d := range []string{held, dirty, recent} {
		_, err = os.Stat(d)
		assert.NoError(t, err, "%s stays", d)
	}

	// With a cut of zero the tape goes; a dry run only says so.
	out, errOut, code = tine(t, db, "gc", "--tapes-older-than", "0d", "--dry-run", "--json")
	require.Equal(t, 0, code, errOut)
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	assert.Equal(t, []string{id}, res.Tapes)
	assert.Equal(t, 3, res.TapeSteps)
	st, err = store.Open(db)
	require.NoError(t, err)
	tape, err := st.Tape(ctx, id)
	require.NoError(t, err)
	assert.Len(t, tape, 3, "a dry run removes nothing")
	require.NoError(t, st.Close())

	out, errOut, code = tine(t, db, "gc", "--tapes-older-than", "0d")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "removed the tapes of 1 run that")
	assert.Contains(t, out, "kept "+recent+": no run holds it yet, but it was made under 1h ago (a fork may be being given it)")
	st, err = store.Open(db)
	require.NoError(t, err)
	defer st.Close()
	tape, err = st.Tape(ctx, id)
	require.NoError(t, err)
	assert.Empty(t, tape)

	_, errOut, code = tine(t, db, "gc", "--tapes-older-than", "soon")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "no age")
}

// TestGCLeavesAForkBeingMadeAlone (issue 27, item 4): gc and worktree
// prune, run over and over beside tines making forks' worktrees (as a
// fork's first turn does: the worktree, then its row records it), never
// remove one, nor fail one being made: a worktree whose run is not
// recorded yet is not one "of a run that is gone", and git's prune waits
// for git's add.
func TestGCLeavesAForkBeingMadeAlone(t *testing.T) {
	t.Parallel()
	db, project, _ := agentForks(t)
	ctx := context.Background()
	st, err := store.Open(db)
	require.NoError(t, err)
	defer st.Close()
	runs, err := st.Runs(ctx)
	require.NoError(t, err)
	root := runs[0]
	const makers, each = 3, 4
	var forks []*model.Run
	for range makers * each {
		forks = append(forks, &model.Run{ParentID: root.ID, ForkAt: 1, Harness: "claude", Cwd: project})
	}
	require.NoError(t, st.CreateForks(ctx, forks))

	done := make(chan struct{})
	gcs := make(chan []string, 1)
	go func() {
		var failed []string
		for i := 0; ; i++ {
			select {
			case <-done:
				gcs <- failed
				return
			default:
			}
			args := []string{"gc"}
			if i%2 == 1 {
				args = []string{"worktree", "prune"}
			}
			if _, errOut, code := tine(t, db, args...); code != 0 {
				failed = append(failed, errOut)
			}
		}
	}()
	var wg sync.WaitGroup
	for m := range makers {
		wg.Go(func() {
			for _, f := range forks[m*each : (m+1)*each] {
				wt, err := worktree.Create(ctx, worktree.Spec{Source: project, Root: filepath.Join(filepath.Dir(db), "worktrees")})
				if !assert.NoError(t, err) {
					continue
				}
				assert.NoError(t, st.SetWorktree(ctx, f.ID, wt.Path, wt.Branch, wt.Base, wt.Start))
			}
		})
	}
	wg.Wait()
	close(done)
	assert.Empty(t, <-gcs, "every gc and prune ran")
	for _, f := range forks {
		r, err := st.Run(ctx, f.ID)
		require.NoError(t, err)
		if assert.NotEmpty(t, r.Worktree) {
			assert.DirExists(t, r.Worktree, "fork %s's worktree", r.Label())
			_, err := worktree.Unsaved(ctx, worktree.Worktree{Path: r.Worktree, Branch: r.Branch, Base: r.BaseCommit, Start: r.StartTree})
			assert.NoError(t, err, "fork %s's worktree is whole", r.Label())
		}
	}
}
