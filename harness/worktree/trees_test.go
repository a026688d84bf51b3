package worktree

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTreesMatchGit: after each of many random changes to a work tree
// (edits, same-size edits, appends, deletes, new files and folders,
// ignored ones, the executable bit, symlinks, a file become a folder and
// back, a changed .gitignore, a `git add`), the snapshot Trees takes in
// Go is the tree git's `add -A` and `write-tree` make, and most are taken
// in Go.
func TestTreesMatchGit(t *testing.T) {
	t.Parallel()
	seed := uint64(1)
	if v, err := strconv.ParseUint(os.Getenv("TINE_TREES_SEED"), 10, 64); err == nil {
		seed = v // to try others
	}
	ctx := context.Background()
	dir := filepath.Join(tempDir(t), "proj")
	require.NoError(t, os.Mkdir(dir, 0o755))
	gitT(t, dir, "init", "-q")
	write(t, filepath.Join(dir, ".gitignore"), "*.log\nbuild/\n!keep.log\n", 0o644)
	for i := range 30 {
		write(t, filepath.Join(dir, fmt.Sprintf("d%d/s%d/f%d.txt", i%3, i%2, i)), strings.Repeat("x", i)+"\n", 0o644)
	}
	write(t, filepath.Join(dir, "run.sh"), "#!/bin/sh\n", 0o755)
	require.NoError(t, os.Symlink("run.sh", filepath.Join(dir, "link")))
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", "init")
	write(t, filepath.Join(dir, "untracked.txt"), "u\n", 0o644)

	s, err := openSnapshots(ctx, dir)
	require.NoError(t, err)
	want, err := gitTrees(ctx, dir)
	require.NoError(t, err)
	check := func(what string) {
		t.Helper()
		got, err := s.tree(ctx)
		require.NoError(t, err, what)
		w, err := want(ctx)
		require.NoError(t, err, what)
		if w != got {
			out, _ := gitOut(dir, "diff-tree", "-r", w, got)
			t.Fatalf("after %s: git %s, Go %s:\n%s", what, w, got, out)
		}
	}
	check("nothing")
	require.Equal(t, 1, s.seeds)
	check("nothing again")
	require.Equal(t, 1, s.walks, "taken in Go")

	rng := rand.New(rand.NewPCG(seed, 2))
	var files []string
	list := func() {
		files = files[:0]
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if d != nil && d.IsDir() && d.Name() == ".git" {
				return filepath.SkipDir
			}
			if err == nil && !d.IsDir() {
				files = append(files, p)
			}
			return nil
		})
	}
	pick := func() string { return files[rng.IntN(len(files))] }
	newName := func() string {
		parts := []string{"d0", "d1", "d2", "n" + fmt.Sprint(rng.IntN(3)), "build", "d0/s1", "d1/deep/er"}
		base := []string{"new.txt", "x.log", "keep.log", "n.go", "f.md"}
		name := fmt.Sprintf("%d%s", rng.IntN(5), base[rng.IntN(len(base))])
		if rng.IntN(4) == 0 {
			name = "keep.log" // not ignored: !keep.log
		}
		return filepath.Join(dir, parts[rng.IntN(len(parts))], name)
	}
	for i := range 300 {
		list()
		var what string
		switch op := rng.IntN(14); op {
		case 0, 1:
			p := pick()
			what = "an edit of " + p
			os.WriteFile(p, []byte(fmt.Sprintf("edit %d\n", i)), 0o644)
		case 2:
			// The same size at once after a snapshot: only the racy
			// check tells it.
			p := pick()
			b, _ := os.ReadFile(p)
			what = "a same-size edit of " + p
			if len(b) > 0 {
				b[0] ^= 1
				os.WriteFile(p, b, 0o644)
			}
		case 3:
			p := pick()
			what = "an append to " + p
			f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
			if err == nil {
				f.WriteString("more\n")
				f.Close()
			}
		case 4:
			p := pick()
			what = "deleting " + p
			os.Remove(p)
		case 5, 6, 7:
			p := newName()
			what = "a new file " + p
			os.MkdirAll(filepath.Dir(p), 0o755)
			os.WriteFile(p, []byte(fmt.Sprintf("new %d\n", i)), 0o644)
		case 8:
			p := pick()
			what = "the executable bit of " + p
			if info, err := os.Lstat(p); err == nil && info.Mode().IsRegular() {
				os.Chmod(p, info.Mode().Perm()^0o111)
			}
		case 9:
			p := newName()
			what = "a symlink " + p
			os.MkdirAll(filepath.Dir(p), 0o755)
			os.Remove(p)
			os.Symlink(fmt.Sprintf("target%d", rng.IntN(3)), p)
		case 10:
			p := pick()
			what = "a file become a folder: " + p
			os.Remove(p)
			write(t, filepath.Join(p, "inside.txt"), "in\n", 0o644)
		case 11:
			d := filepath.Join(dir, []string{"d0", "d1/s0", "n1", "build"}[rng.IntN(4)])
			what = "deleting the folder " + d
			os.RemoveAll(d)
		case 12:
			what = "a changed .gitignore"
			pats := []string{"*.md", "n1/", "d2/s1/*.txt", "*.go"}
			os.RemoveAll(filepath.Join(dir, ".gitignore"))
			write(t, filepath.Join(dir, ".gitignore"), "*.log\nbuild/\n!keep.log\n"+pats[rng.IntN(len(pats))]+"\n", 0o644)
		case 13:
			switch rng.IntN(4) {
			case 0:
				what = "git add"
				gitT(t, dir, "add", "-A")
			case 1:
				// Tracked, it is in the tree though ignored.
				what = "git add -f of an ignored file"
				os.RemoveAll(filepath.Join(dir, "d0", "forced.log"))
				write(t, filepath.Join(dir, "d0", "forced.log"), fmt.Sprintf("log %d\n", i), 0o644)
				check("an ignored file")
				gitT(t, dir, "add", "-f", "d0/forced.log")
			case 2:
				what = "git rm --cached of an ignored file"
				gitOut(dir, "rm", "-q", "--cached", "--ignore-unmatch", "d0/forced.log")
			default:
				what = "nothing"
			}
		}
		check(what)
	}
	t.Logf("%d snapshots in Go, %d with git", s.walks, s.seeds)
	assert.Greater(t, s.walks, 2*s.seeds, "most snapshots are taken in Go")
}

// TestTreesRacyEdit: a file rewritten with as many bytes right after a
// snapshot read it can keep its stat data (time stamps tick coarsely): the
// next snapshot reads it again all the same.
func TestTreesRacyEdit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(tempDir(t), "proj")
	require.NoError(t, os.Mkdir(dir, 0o755))
	gitT(t, dir, "init", "-q")
	p := filepath.Join(dir, "a.txt")
	write(t, p, "aaaa\n", 0o644)
	gitT(t, dir, "add", "-A")
	s, err := openSnapshots(ctx, dir)
	require.NoError(t, err)
	_, err = s.tree(ctx)
	require.NoError(t, err)
	for i := range 50 {
		require.NoError(t, os.WriteFile(p, []byte(fmt.Sprintf("%04d\n", 2*i)), 0o644))
		first, err := s.tree(ctx)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(p, []byte(fmt.Sprintf("%04d\n", 2*i+1)), 0o644))
		second, err := s.tree(ctx)
		require.NoError(t, err)
		require.NotEqual(t, first, second, "round %d", i)
	}
	assert.Equal(t, 1, s.seeds)

	// As if the last write had kept the stat data the snapshot before it
	// saw (the same size, and times that ticked no further): read again
	// all the same, since that snapshot came too soon after the write
	// before to trust it.
	before, err := s.tree(ctx)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(p, []byte("zzzz\n"), 0o644))
	info, err := os.Lstat(p)
	require.NoError(t, err)
	s.root.files["a.txt"].st = statOf(info)
	after, err := s.tree(ctx)
	require.NoError(t, err)
	assert.NotEqual(t, before, after, "the racy file was read again")
	w, err := gitSnapshot(ctx, s.top, s.index, s.gitDir, nil)
	require.NoError(t, err)
	assert.Equal(t, w, after)
}

// TestTreesCheckerEnds: the git check-ignore a snapshot keeps for new
// paths ends once idle, and the next new path starts another.
func TestTreesCheckerEnds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(tempDir(t), "proj")
	require.NoError(t, os.Mkdir(dir, 0o755))
	gitT(t, dir, "init", "-q")
	write(t, filepath.Join(dir, "a.txt"), "a\n", 0o644)
	s, err := openSnapshots(ctx, dir)
	require.NoError(t, err)
	s.checkerIdle = 50 * time.Millisecond
	_, err = s.tree(ctx)
	require.NoError(t, err)
	for i := range 2 {
		write(t, filepath.Join(dir, fmt.Sprintf("new%d.txt", i)), "n\n", 0o644)
		got, err := s.tree(ctx)
		require.NoError(t, err)
		w, err := gitSnapshot(ctx, s.top, s.index, s.gitDir, nil)
		require.NoError(t, err)
		require.Equal(t, w, got)
		require.NotNil(t, s.checker)
		s.checker.mu.Lock()
		running := s.checker.cmd
		s.checker.mu.Unlock()
		if running == nil {
			continue // ended already (a slow machine: 50 ms went by)
		}
		proc := running.Process
		require.Eventually(t, func() bool {
			return proc.Signal(syscall.Signal(0)) != nil // waited for: gone
		}, time.Minute, 10*time.Millisecond, "git check-ignore ends once idle")
	}
	assert.Equal(t, 1, s.seeds)
}
