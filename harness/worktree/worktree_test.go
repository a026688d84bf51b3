package worktree

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain isolates every git this test binary runs (ours and the package's)
// from the machine's git configuration and gives it an identity, without
// touching the user's global config.
func TestMain(m *testing.M) {
	for k, v := range map[string]string{
		"GIT_CONFIG_NOSYSTEM": "1",
		"GIT_CONFIG_GLOBAL":   os.DevNull,
		"GIT_AUTHOR_NAME":     "tine test", "GIT_AUTHOR_EMAIL": "test@tine.invalid",
		"GIT_COMMITTER_NAME": "tine test", "GIT_COMMITTER_EMAIL": "test@tine.invalid",
		// Never find a repository above the temp dir the tests work in.
		"GIT_CEILING_DIRECTORIES": filepath.Dir(os.TempDir()),
	} {
		os.Setenv(k, v)
	}
	code := m.Run()
	if bigDir != "" {
		os.RemoveAll(bigDir)
	}
	os.Exit(code)
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// tempDir is t.TempDir with symlinks resolved (git reports real paths).
func tempDir(t testing.TB) string {
	d, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	return d
}

// gitT runs git in dir for a test, failing the test on error.
func gitT(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := gitOut(dir, args...)
	require.NoError(t, err, "git %v: %s", args, out)
	return strings.TrimRight(out, "\n")
}

func gitOut(dir string, args ...string) (string, error) {
	args = append([]string{"-c", "user.name=tine test", "-c", "user.email=test@tine.invalid",
		"-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main", "-c", "core.autocrlf=false",
		"-c", "gc.auto=0"}, args...)
	c := exec.Command("git", args...)
	c.Dir = dir
	c.Env = append(os.Environ(), "LC_ALL=C")
	out, err := c.CombinedOutput()
	return string(out), err
}

func write(t testing.TB, path, content string, mode fs.FileMode) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), mode))
	require.NoError(t, os.Chmod(path, mode)) // WriteFile keeps an existing file's mode
}

// newRepo makes a repository with one commit: a.txt, b.txt, dir/c.txt,
// run.sh (executable), img.bin (binary), .gitignore (*.log, build/).
func newRepo(t testing.TB) string {
	dir := filepath.Join(tempDir(t), "proj")
	require.NoError(t, os.Mkdir(dir, 0o755))
	gitT(t, dir, "init", "-q")
	write(t, filepath.Join(dir, "a.txt"), "alpha\nbeta\ngamma\n", 0o644)
	write(t, filepath.Join(dir, "b.txt"), "one\ntwo\n", 0o644)
	write(t, filepath.Join(dir, "dir", "c.txt"), "see\n", 0o644)
	write(t, filepath.Join(dir, "run.sh"), "#!/bin/sh\necho hi\n", 0o755)
	write(t, filepath.Join(dir, "img.bin"), "\x00\x01\x02binary\x00", 0o644)
	write(t, filepath.Join(dir, ".gitignore"), "*.log\nbuild/\n", 0o644)
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", "initial")
	return dir
}

// entry is what a test compares about one file.
type entry struct {
	Kind    string // "file" or "link"
	Exec    bool
	Content string // file bytes or link target
}

// files lists the files under dir, .git excluded.
func files(t testing.TB, dir string) map[string]entry {
	t.Helper()
	m := map[string]entry{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.Name() == ".git" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			m[filepath.ToSlash(rel)] = entry{Kind: "link", Content: target}
			return err
		}
		b, err := os.ReadFile(p)
		m[filepath.ToSlash(rel)] = entry{Kind: "file", Exec: fi.Mode()&0o100 != 0, Content: string(b)}
		return err
	})
	require.NoError(t, err)
	return m
}

func fileHash(t testing.TB, p string) string {
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestRepoNotARepo(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	plain := tempDir(t)
	_, _, err := Repo(ctx, plain)
	require.ErrorIs(t, err, ErrNotRepo)
	assert.NotErrorIs(t, err, os.ErrNotExist)

	// The .git directory itself and a bare repository have no work tree.
	repo := newRepo(t)
	_, _, err = Repo(ctx, filepath.Join(repo, ".git"))
	require.ErrorIs(t, err, ErrNotRepo)
	bare := filepath.Join(tempDir(t), "bare.git")
	gitT(t, filepath.Dir(bare), "init", "-q", "--bare", bare)
	_, _, err = Repo(ctx, bare)
	require.ErrorIs(t, err, ErrNotRepo)

	_, err = Create(ctx, Spec{Source: plain, Root: tempDir(t), Branch: "main"})
	require.ErrorIs(t, err, ErrNotRepo)
	require.ErrorIs(t, Prune(ctx, plain, tempDir(t)), ErrNotRepo)
	_, err = DiffStat(ctx, plain, "HEAD")
	require.ErrorIs(t, err, ErrNotRepo)
}

func TestRepoMissingDir(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	gone := filepath.Join(tempDir(t), "gone")
	_, _, err := Repo(ctx, gone)
	require.ErrorIs(t, err, ErrMissing)
	require.ErrorIs(t, err, os.ErrNotExist)
	assert.NotErrorIs(t, err, ErrNotRepo)
	_, err = Create(ctx, Spec{Source: gone, Root: tempDir(t)})
	require.ErrorIs(t, err, ErrMissing)
	require.ErrorIs(t, Prune(ctx, gone, tempDir(t)), ErrMissing)
	_, err = Diff(ctx, gone, "HEAD")
	require.ErrorIs(t, err, ErrMissing)
}

func TestRepo(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	repo := newRepo(t)
	top, branch, err := Repo(ctx, filepath.Join(repo, "dir"))
	require.NoError(t, err)
	assert.Equal(t, repo, top)
	assert.Equal(t, "main", branch)

	gitT(t, repo, "checkout", "-q", "-b", "feature/x")
	_, branch, err = Repo(ctx, repo)
	require.NoError(t, err)
	assert.Equal(t, "feature/x", branch)

	gitT(t, repo, "checkout", "-q", "--detach")
	top, branch, err = Repo(ctx, repo)
	require.NoError(t, err)
	assert.Equal(t, repo, top)
	assert.Equal(t, "", branch)

	// An unborn branch is still a branch.
	empty := tempDir(t)
	gitT(t, empty, "init", "-q", "-b", "trunk")
	_, branch, err = Repo(ctx, empty)
	require.NoError(t, err)
	assert.Equal(t, "trunk", branch)
	_, err = Create(ctx, Spec{Source: empty, Root: tempDir(t)})
	require.ErrorContains(t, err, "no commit")
}

func TestCreateClean(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	repo := newRepo(t)
	root := filepath.Join(tempDir(t), "worktrees")
	head := gitT(t, repo, "rev-parse", "HEAD")

	wt, err := Create(ctx, Spec{Source: filepath.Join(repo, "dir"), Root: root, Branch: "main"})
	require.NoError(t, err)
	sum := sha256.Sum256([]byte(repo))
	assert.Equal(t, filepath.Join(root, "proj-"+hex.EncodeToString(sum[:4]), "main-fork-1"), wt.Path)
	assert.Equal(t, "main-fork-1", wt.Branch)
	assert.Equal(t, head, wt.Base)
	assert.Equal(t, 0, wt.Carried)

	assert.Equal(t, files(t, repo), files(t, wt.Path))
	assert.Equal(t, "", gitT(t, wt.Path, "status", "--porcelain"))
	assert.Equal(t, "main-fork-1", gitT(t, wt.Path, "symbolic-ref", "--short", "HEAD"))
	assert.Equal(t, head, gitT(t, wt.Path, "rev-parse", "HEAD"))
	// The source stays on its branch.
	assert.Equal(t, "main", gitT(t, repo, "symbolic-ref", "--short", "HEAD"))
}

// dirty puts every kind of uncommitted change into repo and returns the
// number of paths that differ from HEAD on disk (what Create should carry).
func dirty(t testing.TB, repo string) int {
	// A stash entry, to see that the stash list is left alone.
	write(t, filepath.Join(repo, "b.txt"), "stashed\n", 0o644)
	gitT(t, repo, "stash", "-q")

	write(t, filepath.Join(repo, "a.txt"), "alpha\nBETA\ngamma\n", 0o644) // staged ...
	gitT(t, repo, "add", "a.txt")
	write(t, filepath.Join(repo, "a.txt"), "alpha\nBETA\ngamma\ndelta\n", 0o644) // ... and unstaged on top
	write(t, filepath.Join(repo, "b.txt"), "one\ntwo\nthree\n", 0o644)           // unstaged
	require.NoError(t, os.Remove(filepath.Join(repo, "dir", "c.txt")))           // unstaged deletion
	require.NoError(t, os.Mkdir(filepath.Join(repo, "pics"), 0o755))
	gitT(t, repo, "mv", "img.bin", "pics/img2.bin") // staged rename, binary
	write(t, filepath.Join(repo, "pics", "img2.bin"), "\x00\xffchanged\x00", 0o644)
	require.NoError(t, os.Chmod(filepath.Join(repo, "run.sh"), 0o644))            // exec bit dropped
	write(t, filepath.Join(repo, "new", "tool.sh"), "#!/bin/sh\nexit 0\n", 0o755) // untracked, executable
	write(t, filepath.Join(repo, "new", "blob.dat"), "\x00\x00untracked binary", 0o644)
	write(t, filepath.Join(repo, "staged-new.txt"), "added\n", 0o644)
	gitT(t, repo, "add", "staged-new.txt")
	require.NoError(t, os.Symlink("a.txt", filepath.Join(repo, "link")))     // untracked symlink
	write(t, filepath.Join(repo, "weird name *.txt"), "glob chars\n", 0o644) // untracked, odd name
	write(t, filepath.Join(repo, "debug.log"), "ignored\n", 0o644)           // ignored
	write(t, filepath.Join(repo, "build", "out.o"), "ignored too\n", 0o644)  // ignored dir
	// a.txt b.txt dir/c.txt img.bin pics/img2.bin run.sh new/tool.sh
	// new/blob.dat staged-new.txt link "weird name *.txt"
	return 11
}

func TestCreateCarriesUncommittedWork(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	repo := newRepo(t)
	want := dirty(t, repo)
	head := gitT(t, repo, "rev-parse", "HEAD")

	index := fileHash(t, filepath.Join(repo, ".git", "index"))
	before := files(t, repo)
	status := gitT(t, repo, "status", "--porcelain")
	stash := gitT(t, repo, "stash", "list")
	require.NotEmpty(t, stash)

	wt, err := Create(ctx, Spec{Source: repo, Root: tempDir(t), Branch: "main"})
	require.NoError(t, err)

	// Source untouched: files, index file, status, stash list.
	assert.Equal(t, index, fileHash(t, filepath.Join(repo, ".git", "index")), "source index file changed")
	assert.Equal(t, before, files(t, repo))
	assert.Equal(t, status, gitT(t, repo, "status", "--porcelain"))
	assert.Equal(t, stash, gitT(t, repo, "stash", "list"))

	// The fork has exactly the source's files, ignored ones excepted, with
	// their executable bits and symlinks.
	expect := files(t, repo)
	delete(expect, "debug.log")
	delete(expect, "build/out.o")
	got := files(t, wt.Path)
	assert.Equal(t, expect, got)
	assert.True(t, got["new/tool.sh"].Exec)
	assert.False(t, got["run.sh"].Exec)
	assert.Equal(t, entry{Kind: "link", Content: "a.txt"}, got["link"])
	assert.NoFileExists(t, filepath.Join(wt.Path, "debug.log"))

	// Nothing committed, and staged stays staged, unstaged unstaged,
	// untracked untracked: status reads exactly as in the source.
	assert.Equal(t, head, wt.Base)
	assert.Equal(t, head, gitT(t, wt.Path, "rev-parse", "HEAD"))
	assert.Equal(t, status, gitT(t, wt.Path, "status", "--porcelain"))
	assert.Equal(t, gitT(t, repo, "diff", "--cached", "--stat"), gitT(t, wt.Path, "diff", "--cached", "--stat"))
	// The stash is shared by all worktrees of a repository; Create added
	// nothing to it.
	assert.Equal(t, stash, gitT(t, wt.Path, "stash", "list"))
	assert.Equal(t, want, wt.Carried)
}

func TestCreateNames(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	repo := newRepo(t)
	root := tempDir(t)
	spec := Spec{Source: repo, Root: root, Branch: "main"}

	w1, err := Create(ctx, spec)
	require.NoError(t, err)
	w2, err := Create(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, "main-fork-1", w1.Branch)
	assert.Equal(t, "main-fork-2", w2.Branch)
	assert.NotEqual(t, w1.Path, w2.Path)

	// A branch that already has the next name is skipped, and so is a
	// directory in the way.
	gitT(t, repo, "branch", "main-fork-3")
	require.NoError(t, os.MkdirAll(filepath.Join(filepath.Dir(w1.Path), "main-fork-4"), 0o755))
	w5, err := Create(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, "main-fork-5", w5.Branch)

	// After Remove deleted fork 1 and its branch, the name is still not
	// handed out again.
	require.NoError(t, Remove(ctx, w1, false))
	assert.Equal(t, "", gitT(t, repo, "branch", "--list", "main-fork-1"))
	w6, err := Create(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, "main-fork-6", w6.Branch)

	// A branch with a slash gets a flat directory name.
	gitT(t, repo, "checkout", "-q", "-b", "feature/x")
	wf, err := Create(ctx, Spec{Source: repo, Root: root})
	require.NoError(t, err)
	assert.Equal(t, "feature/x-fork-1", wf.Branch)
	assert.Equal(t, "feature-x-fork-1", filepath.Base(wf.Path))
	assert.Equal(t, filepath.Dir(w1.Path), filepath.Dir(wf.Path))
}

func TestCreateConcurrent(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	repo := newRepo(t)
	dirty(t, repo)
	root := tempDir(t)
	const n = 6
	var wg sync.WaitGroup
	wts := make([]Worktree, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { wts[i], errs[i] = Create(ctx, Spec{Source: repo, Root: root, Branch: "main"}) })
	}
	wg.Wait()
	seen := map[string]bool{}
	for i := range n {
		require.NoError(t, errs[i])
		assert.False(t, seen[wts[i].Branch], "branch %s given twice", wts[i].Branch)
		seen[wts[i].Branch] = true
		assert.Equal(t, 11, wts[i].Carried)
	}
	for i := 1; i <= n; i++ {
		assert.True(t, seen[fmt.Sprintf("main-fork-%d", i)], "main-fork-%d missing", i)
	}
}

func TestCreateDetachedSource(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	repo := newRepo(t)
	gitT(t, repo, "commit", "-q", "--allow-empty", "-m", "second")
	gitT(t, repo, "checkout", "-q", "--detach", "HEAD~1")
	head := gitT(t, repo, "rev-parse", "HEAD")
	write(t, filepath.Join(repo, "b.txt"), "changed\n", 0o644)

	wt, err := Create(ctx, Spec{Source: repo, Root: tempDir(t)})
	require.NoError(t, err)
	assert.Equal(t, head[:7]+"-fork-1", wt.Branch)
	assert.Equal(t, head, wt.Base)
	assert.Equal(t, head, gitT(t, wt.Path, "rev-parse", "HEAD"))
	assert.Equal(t, "changed\n", files(t, wt.Path)["b.txt"].Content)
	assert.Equal(t, 1, wt.Carried)
	// The source is still detached where it was.
	_, err = gitOut(repo, "symbolic-ref", "-q", "HEAD")
	assert.Error(t, err)
	assert.Equal(t, head, gitT(t, repo, "rev-parse", "HEAD"))
}

func TestCreateDuringMergeConflict(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	repo := newRepo(t)
	gitT(t, repo, "checkout", "-q", "-b", "other")
	write(t, filepath.Join(repo, "a.txt"), "theirs\n", 0o644)
	write(t, filepath.Join(repo, "b.txt"), "one\ntwo\nmerged cleanly\n", 0o644)
	gitT(t, repo, "commit", "-q", "-am", "other")
	gitT(t, repo, "checkout", "-q", "main")
	write(t, filepath.Join(repo, "a.txt"), "ours\n", 0o644)
	gitT(t, repo, "commit", "-q", "-am", "ours")
	_, err := gitOut(repo, "merge", "-q", "other")
	require.Error(t, err, "the merge should conflict")
	status := gitT(t, repo, "status", "--porcelain")
	require.Contains(t, status, "UU a.txt")

	// The index cannot be written as a tree, so the fork gets the files
	// with their conflict markers, all unstaged.
	wt, err := Create(ctx, Spec{Source: repo, Root: tempDir(t), Branch: "main"})
	require.NoError(t, err)
	assert.Equal(t, files(t, repo), files(t, wt.Path))
	assert.Contains(t, files(t, wt.Path)["a.txt"].Content, "<<<<<<<")
	assert.Equal(t, " M a.txt\n M b.txt", gitT(t, wt.Path, "status", "--porcelain"))
	assert.Equal(t, status, gitT(t, repo, "status", "--porcelain"))
}

func TestForksDoNotInterfere(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	repo := newRepo(t)
	write(t, filepath.Join(repo, "notes.txt"), "shared start\n", 0o644)
	root := tempDir(t)
	f1, err := Create(ctx, Spec{Source: repo, Root: root, Branch: "main"})
	require.NoError(t, err)
	f2, err := Create(ctx, Spec{Source: repo, Root: root, Branch: "main"})
	require.NoError(t, err)
	src := files(t, repo)
	second := files(t, f2.Path)

	write(t, filepath.Join(f1.Path, "notes.txt"), "fork one was here\n", 0o644)
	write(t, filepath.Join(f1.Path, "only1.txt"), "1\n", 0o644)
	require.NoError(t, os.Remove(filepath.Join(f1.Path, "a.txt")))
	gitT(t, f1.Path, "add", "-A")
	gitT(t, f1.Path, "commit", "-q", "-m", "fork one")

	assert.Equal(t, src, files(t, repo))
	assert.Equal(t, second, files(t, f2.Path))
	assert.Equal(t, "?? notes.txt", gitT(t, f2.Path, "status", "--porcelain"))
	assert.Equal(t, f2.Base, gitT(t, f2.Path, "rev-parse", "HEAD"))
	assert.Equal(t, "main", gitT(t, repo, "symbolic-ref", "--short", "HEAD"))

	// A fork of a fork starts from the fork's files and sits with its siblings.
	write(t, filepath.Join(f1.Path, "dirty.txt"), "uncommitted in fork one\n", 0o644)
	ff, err := Create(ctx, Spec{Source: f1.Path, Root: root, Branch: f1.Branch})
	require.NoError(t, err)
	assert.Equal(t, "main-fork-1-fork-1", ff.Branch)
	assert.Equal(t, filepath.Dir(f1.Path), filepath.Dir(ff.Path))
	assert.Equal(t, gitT(t, f1.Path, "rev-parse", "HEAD"), ff.Base)
	assert.Equal(t, files(t, f1.Path), files(t, ff.Path))
	assert.Equal(t, 1, ff.Carried)
}

func TestRemove(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	repo := newRepo(t)
	root := tempDir(t)
	spec := Spec{Source: repo, Root: root, Branch: "main"}

	// No commits of its own, uncommitted changes, force: worktree and
	// branch go.
	plain, err := Create(ctx, spec)
	require.NoError(t, err)
	write(t, filepath.Join(plain.Path, "output.txt"), "the fork's work\n", 0o644)
	require.NoError(t, Remove(ctx, plain, true))
	assert.NoDirExists(t, plain.Path)
	assert.Equal(t, "", gitT(t, repo, "branch", "--list", plain.Branch))
	assert.NotContains(t, gitT(t, repo, "worktree", "list"), plain.Path)

	// A commit of its own: the directory goes, the branch is kept and the
	// error says so.
	committed, err := Create(ctx, spec)
	require.NoError(t, err)
	write(t, filepath.Join(committed.Path, "feature.go"), "package x\n", 0o644)
	gitT(t, committed.Path, "add", "feature.go")
	gitT(t, committed.Path, "commit", "-q", "-m", "fork work")
	tip := gitT(t, committed.Path, "rev-parse", "HEAD")
	err = Remove(ctx, committed, false)
	require.ErrorIs(t, err, ErrHasCommits)
	assert.Contains(t, err.Error(), "kept branch \""+committed.Branch+"\"")
	assert.Contains(t, err.Error(), "1 commit")
	assert.NoDirExists(t, committed.Path)
	assert.Equal(t, tip, gitT(t, repo, "rev-parse", "refs/heads/"+committed.Branch))
	assert.NotContains(t, gitT(t, repo, "worktree", "list"), committed.Path)

	// With force the branch goes too (the directory is already gone).
	require.NoError(t, Remove(ctx, committed, true))
	assert.Equal(t, "", gitT(t, repo, "branch", "--list", committed.Branch))

	// A worktree deleted by hand: Remove still finds the repository,
	// prunes it and deletes the branch.
	gone, err := Create(ctx, spec)
	require.NoError(t, err)
	require.NoError(t, os.RemoveAll(gone.Path))
	require.NoError(t, Remove(ctx, gone, false))
	assert.Equal(t, "", gitT(t, repo, "branch", "--list", gone.Branch))
	assert.NotContains(t, gitT(t, repo, "worktree", "list", "--porcelain"), gone.Path)

	// A path that is gone, with no record of its repository.
	require.ErrorIs(t, Remove(ctx, Worktree{Path: filepath.Join(tempDir(t), "nowhere"), Branch: "x", Base: gone.Base}, false), ErrMissing)

	// Remove never removes the main work tree.
	require.Error(t, Remove(ctx, Worktree{Path: repo, Branch: "main"}, true))
	assert.FileExists(t, filepath.Join(repo, "a.txt"))
	assert.Equal(t, "main", gitT(t, repo, "symbolic-ref", "--short", "HEAD"))
}

func TestPrune(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	repo := newRepo(t)
	root := tempDir(t)
	wt, err := Create(ctx, Spec{Source: repo, Root: root, Branch: "main"})
	require.NoError(t, err)
	require.Contains(t, gitT(t, repo, "worktree", "list", "--porcelain"), wt.Path)
	require.NoError(t, os.RemoveAll(wt.Path))
	require.NoError(t, Prune(ctx, filepath.Join(repo, "dir"), root))
	assert.NotContains(t, gitT(t, repo, "worktree", "list", "--porcelain"), wt.Path)
	// The branch stays: Prune only forgets directories.
	assert.Equal(t, wt.Base, gitT(t, repo, "rev-parse", "--verify", "refs/heads/"+wt.Branch))
}

func TestCreateCancelledLeavesNothing(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	dirty(t, repo)
	root := tempDir(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Create(ctx, Spec{Source: repo, Root: root, Branch: "main"})
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, "", gitT(t, repo, "branch", "--list", "main-fork-*"))
	assert.Equal(t, 1, len(strings.Split(gitT(t, repo, "worktree", "list"), "\n")))

	// Stopped part way: whatever happened, no half fork is left behind.
	for _, d := range []time.Duration{time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond} {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		wt, err := Create(ctx, Spec{Source: repo, Root: root, Branch: "main"})
		cancel()
		if err == nil {
			require.NoError(t, Remove(context.Background(), wt, true))
		}
	}
	assert.Equal(t, "", gitT(t, repo, "branch", "--list", "main-fork-*"))
	assert.Equal(t, 1, len(strings.Split(gitT(t, repo, "worktree", "list"), "\n")))
}

func TestCreateFailureLeavesNothing(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	repo := newRepo(t)
	dirty(t, repo)
	// git makes the branch and the worktree, then the hook fails.
	write(t, filepath.Join(repo, ".git", "hooks", "post-checkout"), "#!/bin/sh\necho hook says no >&2\nexit 1\n", 0o755)
	root := tempDir(t)
	_, err := Create(ctx, Spec{Source: repo, Root: root, Branch: "main"})
	require.ErrorContains(t, err, "hook says no")
	assert.Equal(t, "", gitT(t, repo, "branch", "--list", "main-fork-*"))
	assert.Equal(t, 1, len(strings.Split(gitT(t, repo, "worktree", "list"), "\n")))
	matches, _ := filepath.Glob(filepath.Join(root, "*", "main-fork-*"))
	assert.Empty(t, matches)
}

func TestDiffStatAndDiff(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	repo := newRepo(t)
	write(t, filepath.Join(repo, "b.txt"), "one\ntwo\nthree\n", 0o644) // carried, unstaged
	wt, err := Create(ctx, Spec{Source: repo, Root: tempDir(t), Branch: "main"})
	require.NoError(t, err)

	// The fork commits one change, stages another, leaves one unstaged and
	// adds untracked text, binary and ignored files.
	write(t, filepath.Join(wt.Path, "a.txt"), "alpha\n", 0o644)
	gitT(t, wt.Path, "commit", "-q", "-am", "shorter a")
	require.NoError(t, os.Remove(filepath.Join(wt.Path, "dir", "c.txt")))
	gitT(t, wt.Path, "add", "-A", "dir")
	write(t, filepath.Join(wt.Path, "run.sh"), "#!/bin/sh\necho bye\n", 0o755)
	write(t, filepath.Join(wt.Path, "new", "n.txt"), "x\ny\nz\n", 0o644)
	write(t, filepath.Join(wt.Path, "new", "n.bin"), "\x00\x01", 0o644)
	write(t, filepath.Join(wt.Path, "skip.log"), "ignored\n", 0o644)
	index := fileHash(t, filepath.Join(repo, ".git", "worktrees", filepath.Base(wt.Path), "index"))
	status := gitT(t, wt.Path, "status", "--porcelain")

	_, err = DiffStat(ctx, filepath.Join(wt.Path, "dir-that-is-not") /* missing */, wt.Base)
	require.ErrorIs(t, err, ErrMissing)
	stats, err := DiffStat(ctx, filepath.Join(wt.Path, "new"), wt.Base) // from a subdirectory
	require.NoError(t, err)
	sort.Slice(stats, func(i, j int) bool { return stats[i].Path < stats[j].Path })
	assert.Equal(t, []FileStat{
		{Path: "a.txt", Deleted: 2},
		{Path: "b.txt", Added: 1},
		{Path: "dir/c.txt", Deleted: 1},
		{Path: "new/n.bin", Binary: true},
		{Path: "new/n.txt", Added: 3},
		{Path: "run.sh", Added: 1, Deleted: 1},
	}, stats)

	diff, err := Diff(ctx, wt.Path, wt.Base)
	require.NoError(t, err)
	assert.Contains(t, diff, "diff --git a/new/n.txt b/new/n.txt\nnew file mode 100644\n")
	assert.Contains(t, diff, "+x\n+y\n+z\n")
	assert.Contains(t, diff, "Binary files /dev/null and b/new/n.bin differ")
	assert.Contains(t, diff, "deleted file mode 100644")
	assert.Contains(t, diff, "-echo hi\n+echo bye\n")
	assert.Contains(t, diff, "-beta\n-gamma\n")
	assert.Contains(t, diff, "+three\n")
	assert.NotContains(t, diff, "skip.log")

	// Against HEAD (the default) the committed change is not there.
	stats, err = DiffStat(ctx, wt.Path, "")
	require.NoError(t, err)
	for _, s := range stats {
		assert.NotEqual(t, "a.txt", s.Path)
	}

	// Reading the diff did not touch the fork's index or status.
	assert.Equal(t, index, fileHash(t, filepath.Join(repo, ".git", "worktrees", filepath.Base(wt.Path), "index")))
	assert.Equal(t, status, gitT(t, wt.Path, "status", "--porcelain"))
}

func TestDiffStatRename(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	repo := newRepo(t)
	write(t, filepath.Join(repo, "long.txt"), strings.Repeat("a line of text\n", 20), 0o644)
	gitT(t, repo, "add", "long.txt")
	gitT(t, repo, "commit", "-q", "-m", "long")
	base := gitT(t, repo, "rev-parse", "HEAD")
	require.NoError(t, os.Mkdir(filepath.Join(repo, "moved"), 0o755))
	gitT(t, repo, "mv", "long.txt", "moved/long.txt")
	stats, err := DiffStat(ctx, repo, base)
	require.NoError(t, err)
	assert.Equal(t, []FileStat{{Path: "moved/long.txt", From: "long.txt"}}, stats)
}

func TestParseNumstat(t *testing.T) {
	t.Parallel()
	stats, err := parseNumstat([]byte("1\t2\ta b\x00-\t-\tbin\x000\t0\t\x00old\x00new\x00"))
	require.NoError(t, err)
	assert.Equal(t, []FileStat{{Path: "a b", Added: 1, Deleted: 2}, {Path: "bin", Binary: true}, {Path: "new", From: "old"}}, stats)
	_, err = parseNumstat([]byte("garbage\x00"))
	assert.Error(t, err)
}

func TestGitEnvironment(t *testing.T) {
	t.Parallel()
	env := strings.Join(baseEnv(), "\n")
	assert.Contains(t, env, "GIT_TERMINAL_PROMPT=0")
	assert.Contains(t, env, "LC_ALL=C")
	assert.NotRegexp(t, regexp.MustCompile(`(?m)^GIT_(DIR|INDEX_FILE|WORK_TREE)=`), env)
}

// The folder of worktrees sits beside the 0600 database and holds copies
// of the person's uncommitted files: it is theirs only (0700), whether
// Create makes it or finds it made by an older tine with 0755. The fork's
// own folder is as git makes it.
func TestRootIsPrivate(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	repo := newRepo(t)
	perm := func(p string) fs.FileMode {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		return fi.Mode().Perm()
	}
	fresh := filepath.Join(tempDir(t), "data", "worktrees")
	wt, err := Create(ctx, Spec{Source: repo, Root: fresh, Branch: "main"})
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o700), perm(fresh))
	assert.Equal(t, fs.FileMode(0o700), perm(filepath.Dir(wt.Path)), "the repository's folder inside it")
	assert.FileExists(t, filepath.Join(wt.Path, "a.txt"))

	old := filepath.Join(tempDir(t), "worktrees")
	require.NoError(t, os.Mkdir(old, 0o755))
	require.NoError(t, os.Chmod(old, 0o755))
	_, err = CreateAt(ctx, Spec{Source: repo, Root: old, Branch: "main"}, wt.Base, "")
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o700), perm(old), "an old 0755 folder is made private")
}

// Removing a fork's worktree loses nothing unless forced: Unsaved counts
// what would be lost (the files that differ from what Restore would bring
// back: its last commit when it has commits of its own, else the files it
// started with), and Remove keeps a worktree that has any.
func TestRemoveKeepsUncommittedWork(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	repo := newRepo(t)
	spec := Spec{Source: repo, Root: tempDir(t), Branch: "main"}
	unsaved := func(wt Worktree) int {
		t.Helper()
		n, err := Unsaved(ctx, wt)
		require.NoError(t, err)
		return n
	}

	// The agent's edits, never committed (they rarely commit).
	edited, err := Create(ctx, spec)
	require.NoError(t, err)
	assert.Zero(t, unsaved(edited))
	write(t, filepath.Join(edited.Path, "output.txt"), "the fork's work\n", 0o644)
	write(t, filepath.Join(edited.Path, "a.txt"), "changed\n", 0o644)
	write(t, filepath.Join(edited.Path, "debug.log"), "ignored: not work\n", 0o644)
	assert.Equal(t, 2, unsaved(edited))
	err = Remove(ctx, edited, false)
	require.ErrorIs(t, err, ErrUnsaved)
	assert.Contains(t, err.Error(), "its work in 2 files is in no commit")
	var ue *UnsavedError
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, 2, ue.Files)
	assert.FileExists(t, filepath.Join(edited.Path, "output.txt"), "kept, work and all")
	assert.Equal(t, edited.Base, gitT(t, repo, "rev-parse", "refs/heads/"+edited.Branch))

	// Committed as well, then more edits: those are unsaved.
	gitT(t, edited.Path, "add", "-A")
	gitT(t, edited.Path, "commit", "-q", "-m", "the agent's commit")
	assert.Zero(t, unsaved(edited))
	write(t, filepath.Join(edited.Path, "more.txt"), "after the commit\n", 0o644)
	assert.Equal(t, 1, unsaved(edited))
	require.ErrorIs(t, Remove(ctx, edited, false), ErrUnsaved)

	// A fork of a dirty checkout that changed nothing holds nothing of its
	// own: what it carried comes back with it. One that undid what it
	// carried holds work: its files are not what it started with.
	dirty(t, repo)
	untouched, err := Create(ctx, spec)
	require.NoError(t, err)
	assert.Zero(t, unsaved(untouched))
	require.NoError(t, Remove(ctx, untouched, false))
	assert.NoDirExists(t, untouched.Path)
	undone, err := Create(ctx, spec)
	require.NoError(t, err)
	gitT(t, undone.Path, "reset", "-q", "--hard")
	gitT(t, undone.Path, "clean", "-qfd")
	assert.Equal(t, untouched.Carried, unsaved(undone))

	// A worktree whose HEAD left its branch: what removing it loses cannot
	// be told, so it is kept.
	gitT(t, undone.Path, "checkout", "-q", "-b", "elsewhere")
	_, err = Unsaved(ctx, undone)
	assert.ErrorContains(t, err, `not on its branch "main-fork-3"`)
	require.Error(t, Remove(ctx, undone, false))
	assert.DirExists(t, undone.Path)
	require.NoError(t, Remove(ctx, undone, true))
}

// Save commits what a fork's worktree holds to its branch, as tine, with
// none of the repository's hooks: afterwards nothing is unsaved, the
// branch has a commit of its own (Remove keeps it), and the worktree reads
// clean.
func TestSaveCommitsTheWorkToTheBranch(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	repo := newRepo(t)
	dirty(t, repo)
	hooks := filepath.Join(repo, ".git", "hooks")
	write(t, filepath.Join(hooks, "pre-commit"), "#!/bin/sh\nexit 1\n", 0o755)
	write(t, filepath.Join(hooks, "post-commit"), "#!/bin/sh\ntouch \"$GIT_DIR/../hook-ran\"\n", 0o755)
	gitT(t, repo, "config", "commit.gpgSign", "true")
	wt, err := Create(ctx, Spec{Source: repo, Root: tempDir(t), Branch: "main"})
	require.NoError(t, err)

	write(t, filepath.Join(wt.Path, "output.txt"), "the fork's work\n", 0o644)
	sha, err := Save(ctx, wt, "tine: save fork x's work")
	require.NoError(t, err)
	require.NotEmpty(t, sha)
	assert.Equal(t, sha, gitT(t, repo, "rev-parse", "refs/heads/"+wt.Branch))
	assert.Equal(t, wt.Base, gitT(t, repo, "rev-parse", sha+"^"))
	assert.Equal(t, "tine <tine@localhost>|tine: save fork x's work", gitT(t, repo, "log", "-1", "--format=%an <%ae>|%s", sha))
	assert.Equal(t, "the fork's work", gitT(t, repo, "show", sha+":output.txt"))
	assert.Equal(t, "added", gitT(t, repo, "show", sha+":staged-new.txt"), "what it carried too")
	assert.Equal(t, "", gitT(t, wt.Path, "status", "--porcelain"))
	assert.NoFileExists(t, filepath.Join(repo, "hook-ran"))
	again, err := Save(ctx, wt, "tine: nothing new")
	require.NoError(t, err)
	assert.Empty(t, again, "nothing new to save")
	n, err := Unsaved(ctx, wt)
	require.NoError(t, err)
	assert.Zero(t, n)
	require.ErrorIs(t, Remove(ctx, wt, false), ErrHasCommits)
	assert.NoDirExists(t, wt.Path)
	assert.Equal(t, sha, gitT(t, repo, "rev-parse", "refs/heads/"+wt.Branch), "the branch keeps the work")
}

// Restore makes a fork's worktree again after it went (Remove, prune, or
// by hand), at the same place: from its branch when the branch has
// commits of its own (Save's included), else from its base commit holding
// the files it started with. It never takes another branch's checkout.
func TestRestore(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	repo := newRepo(t)
	dirty(t, repo)
	root := tempDir(t)
	spec := Spec{Source: repo, Root: root, Branch: "main"}

	// Saved and removed: back from the branch, work and all.
	saved, err := Create(ctx, spec)
	require.NoError(t, err)
	write(t, filepath.Join(saved.Path, "output.txt"), "the fork's work\n", 0o644)
	before := files(t, saved.Path)
	sha, err := Save(ctx, saved, "tine: save")
	require.NoError(t, err)
	require.ErrorIs(t, Remove(ctx, saved, false), ErrHasCommits)
	back, err := Restore(ctx, Spec{Source: repo, Root: root}, saved)
	require.NoError(t, err)
	assert.Equal(t, Worktree{Path: saved.Path, Branch: saved.Branch, Base: saved.Base, Start: saved.Start}, back,
		"the same place, branch, base and start")
	assert.Equal(t, before, files(t, back.Path))
	assert.Equal(t, sha, gitT(t, back.Path, "rev-parse", "HEAD"))
	assert.Equal(t, "refs/heads/"+saved.Branch, gitT(t, back.Path, "symbolic-ref", "HEAD"))
	n, err := Unsaved(ctx, back)
	require.NoError(t, err)
	assert.Zero(t, n)

	// Removed with its branch (it had nothing of its own): back at its
	// base, holding the files it started with.
	plain, err := Create(ctx, spec)
	require.NoError(t, err)
	started := files(t, plain.Path)
	require.NoError(t, Remove(ctx, plain, false))
	assert.Equal(t, "", gitT(t, repo, "branch", "--list", plain.Branch))
	back, err = Restore(ctx, Spec{Source: repo, Root: root}, plain)
	require.NoError(t, err)
	assert.Equal(t, plain.Path, back.Path)
	assert.Equal(t, started, files(t, back.Path))
	assert.Equal(t, plain.Base, gitT(t, back.Path, "rev-parse", "HEAD"))
	assert.Equal(t, "refs/heads/"+plain.Branch, gitT(t, back.Path, "symbolic-ref", "HEAD"))

	// Deleted by hand: git still lists it; it is forgotten and made again.
	require.NoError(t, os.RemoveAll(back.Path))
	back, err = Restore(ctx, Spec{Source: repo, Root: root}, plain)
	require.NoError(t, err)
	assert.Equal(t, started, files(t, back.Path))

	// Its branch checked out elsewhere (the person's own checkout): refused.
	require.NoError(t, Remove(ctx, back, true))
	gone, err := Create(ctx, spec)
	require.NoError(t, err)
	require.NoError(t, Remove(ctx, gone, true))
	other := filepath.Join(tempDir(t), "other")
	gitT(t, repo, "worktree", "add", "-q", "-b", gone.Branch, other, gone.Base)
	_, err = Restore(ctx, Spec{Source: repo, Root: root}, gone)
	assert.ErrorContains(t, err, gone.Branch)
	assert.NoDirExists(t, gone.Path)

	// Something in the way, or nothing to make it from: refused.
	keep, err := Create(ctx, spec)
	require.NoError(t, err)
	_, err = Restore(ctx, Spec{Source: repo, Root: root}, keep)
	assert.ErrorContains(t, err, "is in the way")
	_, err = Restore(ctx, Spec{Source: repo, Root: root}, Worktree{Branch: "main-fork-99"})
	assert.ErrorContains(t, err, "no branch main-fork-99 and no base commit")
}

// TestCreateWaitsForTheRepositorysLock: git fails an add that reads an
// entry another git is still writing, so a Create waits while anyone (here
// the test, as another tine process would) holds the repository's lock.
func TestCreateWaitsForTheRepositorysLock(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	repo := newRepo(t)
	root := tempDir(t)
	src, err := inspect(ctx, repo)
	require.NoError(t, err)
	home, err := makeHome(src, root)
	require.NoError(t, err)
	unlock, err := lockHome(ctx, home)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := Create(ctx, Spec{Source: repo, Root: root, Branch: "main"})
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("Create made a worktree while the repository's lock was held (err %v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	unlock()
	require.NoError(t, <-done)

	// A caller that gives up while waiting is told why.
	unlock, err = lockHome(ctx, home)
	require.NoError(t, err)
	defer unlock()
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = lockHome(short, home)
	require.ErrorContains(t, err, "waiting for another fork's worktree")
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// TestRemoveLeavesNoLockOutsideTinesFolders: Remove takes the repository's
// lock in the folder under the worktree root; a worktree elsewhere (made
// by hand) gets no lock file beside it.
func TestRemoveLeavesNoLockOutsideTinesFolders(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	repo := newRepo(t)
	outside := tempDir(t)
	path := filepath.Join(outside, "by-hand")
	gitT(t, repo, "worktree", "add", "-q", "-b", "by-hand", path, "HEAD")
	require.NoError(t, Remove(ctx, Worktree{Path: path, Branch: "by-hand", Base: gitT(t, repo, "rev-parse", "HEAD")}, false))
	_, err := os.Lstat(filepath.Join(outside, lockFile))
	assert.ErrorIs(t, err, fs.ErrNotExist, "a lock file was left beside a worktree tine did not make")
}
