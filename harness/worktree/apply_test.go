package worktree

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// forkWith makes a fork of repo (carrying its uncommitted work) and lets
// edit change the fork's files, as an agent would; it returns the fork.
func forkWith(t *testing.T, repo string, edit func(dir string)) Worktree {
	t.Helper()
	wt, err := Create(ctxT(t), Spec{Source: repo, Root: filepath.Join(tempDir(t), "worktrees")})
	require.NoError(t, err)
	edit(wt.Path)
	return wt
}

func apply(t *testing.T, repo string, wt Worktree, msg string) (string, error) {
	t.Helper()
	patch, fs, err := Patch(ctxT(t), wt.Path, wt.Start)
	require.NoError(t, err)
	return Apply(ctxT(t), repo, wt.Start, patch, fs, msg)
}

// TestApplyBringsTheForksWork: edits, a new file, a deleted one, a binary
// one and an executable bit arrive in the checkout as uncommitted changes,
// and the fork's commits too.
func TestApplyBringsTheForksWork(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	wt := forkWith(t, repo, func(dir string) {
		write(t, filepath.Join(dir, "a.txt"), "alpha\nBETA\ngamma\n", 0o644)
		write(t, filepath.Join(dir, "new.txt"), "fresh\n", 0o644)
		require.NoError(t, os.Remove(filepath.Join(dir, "b.txt")))
		write(t, filepath.Join(dir, "img.bin"), "\x00\x09binary2\x00", 0o644)
		write(t, filepath.Join(dir, "dir", "c.txt"), "see\nmore\n", 0o644)
		gitT(t, dir, "commit", "-q", "-am", "the agent's own commit")
	})
	head := gitT(t, repo, "rev-parse", "HEAD")
	sha, err := apply(t, repo, wt, "")
	require.NoError(t, err)
	assert.Empty(t, sha)
	assert.Equal(t, head, gitT(t, repo, "rev-parse", "HEAD"), "nothing committed")
	got := files(t, repo)
	want := files(t, wt.Path)
	delete(got, ".gitignore")
	delete(want, ".gitignore")
	assert.Equal(t, want, got, "the checkout holds the fork's files")
	assert.NotContains(t, got, "b.txt")
}

// TestApplyCommits: --commit makes one commit with the message, holding
// exactly the fork's changes.
func TestApplyCommits(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	wt := forkWith(t, repo, func(dir string) { write(t, filepath.Join(dir, "new.txt"), "fresh\n", 0o644) })
	sha, err := apply(t, repo, wt, "Apply tine fork x")
	require.NoError(t, err)
	require.NotEmpty(t, sha)
	assert.Equal(t, sha, gitT(t, repo, "rev-parse", "HEAD"))
	assert.Equal(t, "Apply tine fork x", gitT(t, repo, "log", "-1", "--format=%s"))
	assert.Equal(t, "new.txt", gitT(t, repo, "show", "--name-only", "--format=", "HEAD"))
	assert.Empty(t, gitT(t, repo, "status", "--porcelain"), "clean after the commit")
}

// TestApplyTwiceSaysItIsApplied: applying a fork a second time, after it
// was applied as uncommitted changes or as a commit, says it is applied
// already (not that the checkout clashes with it) and changes nothing.
func TestApplyTwiceSaysItIsApplied(t *testing.T) {
	t.Parallel()
	for _, msg := range []string{"", "Apply tine fork x"} {
		repo := newRepo(t)
		wt := forkWith(t, repo, func(dir string) {
			write(t, filepath.Join(dir, "a.txt"), "alpha\nBETA\ngamma\n", 0o644)
			write(t, filepath.Join(dir, "new.txt"), "fresh\n", 0o644)
			require.NoError(t, os.Remove(filepath.Join(dir, "b.txt")))
		})
		_, err := apply(t, repo, wt, msg)
		require.NoError(t, err)
		before, head := files(t, repo), gitT(t, repo, "rev-parse", "HEAD")
		_, err = apply(t, repo, wt, msg)
		require.ErrorIs(t, err, ErrApply, "commit %q", msg)
		assert.Equal(t, "not applied: it is applied already: the checkout "+repo+" holds its changes (3 files)", err.Error(), "commit %q", msg)
		assert.Equal(t, before, files(t, repo))
		assert.Equal(t, head, gitT(t, repo, "rev-parse", "HEAD"))
	}
}

// TestApplyCarriedWorkIsNoClash: the checkout's uncommitted change the fork
// carried and built on is no clash: it is what the fork started from.
func TestApplyCarriedWorkIsNoClash(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	write(t, filepath.Join(repo, "a.txt"), "alpha\nbeta (mine)\ngamma\n", 0o644)
	wt := forkWith(t, repo, func(dir string) {
		write(t, filepath.Join(dir, "a.txt"), "alpha\nbeta (mine)\ngamma\ndelta\n", 0o644)
	})
	_, err := apply(t, repo, wt, "")
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(repo, "a.txt"))
	require.NoError(t, err)
	assert.Equal(t, "alpha\nbeta (mine)\ngamma\ndelta\n", string(b))
}

// TestApplyRefusesAndChangesNothing: a file the person changed since the
// fork, a change that does not apply, staged work under --commit, and a
// fork with nothing to apply are each refused, the checkout left exactly
// as it was.
func TestApplyRefusesAndChangesNothing(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		edit   func(dir string)
		after  func(repo string) // what the person does in the checkout after forking
		commit bool
		why    string
	}{
		{name: "the person's own edit to the same file",
			edit:  func(dir string) { write(t, filepath.Join(dir, "a.txt"), "alpha\nBETA\ngamma\n", 0o644) },
			after: func(repo string) { write(t, filepath.Join(repo, "a.txt"), "alpha\nbeta\ngamma\nmine\n", 0o644) },
			why:   "uncommitted changes to a.txt"},
		{name: "a commit since that clashes",
			edit: func(dir string) { write(t, filepath.Join(dir, "b.txt"), "one\nTWO\n", 0o644) },
			after: func(repo string) {
				write(t, filepath.Join(repo, "b.txt"), "one\n2\n", 0o644)
				gitT(t, repo, "commit", "-q", "-am", "meanwhile")
			},
			why: "do not apply cleanly"},
		{name: "a new file that exists now",
			edit:  func(dir string) { write(t, filepath.Join(dir, "new.txt"), "fork's\n", 0o644) },
			after: func(repo string) { write(t, filepath.Join(repo, "new.txt"), "mine\n", 0o644) },
			why:   "new.txt"},
		{name: "staged work under --commit",
			edit: func(dir string) { write(t, filepath.Join(dir, "new.txt"), "fork's\n", 0o644) },
			after: func(repo string) {
				write(t, filepath.Join(repo, "other.txt"), "staged\n", 0o644)
				gitT(t, repo, "add", "other.txt")
			},
			commit: true, why: "staged changes"},
		{name: "nothing to apply", edit: func(string) {}, after: func(string) {}, why: "changed no file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			repo := newRepo(t)
			wt := forkWith(t, repo, c.edit)
			c.after(repo)
			before := files(t, repo)
			status := gitT(t, repo, "status", "--porcelain")
			head := gitT(t, repo, "rev-parse", "HEAD")
			msg := ""
			if c.commit {
				msg = "Apply"
			}
			_, err := apply(t, repo, wt, msg)
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrApply)
			assert.Contains(t, err.Error(), c.why)
			assert.Equal(t, before, files(t, repo), "no file changed")
			assert.Equal(t, status, gitT(t, repo, "status", "--porcelain"), "nor the index")
			assert.Equal(t, head, gitT(t, repo, "rev-parse", "HEAD"))
			assert.False(t, strings.Contains(err.Error(), "\n"), "one line: %q", err)
		})
	}
}
