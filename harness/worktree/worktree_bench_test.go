package worktree

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A committed repository of 10,000 small files in 100 directories, built
// once per test binary (TestMain removes it) and shared by the benchmarks;
// each benchmark works on its own clone so their uncommitted changes and
// branches do not mix.
var (
	bigOnce sync.Once
	bigDir  string
	bigErr  error
)

func bigRepo(b *testing.B) string {
	b.Helper()
	bigOnce.Do(func() {
		bigDir, bigErr = os.MkdirTemp("", "tine-worktree-bench-")
		if bigErr != nil {
			return
		}
		bigDir, _ = filepath.EvalSymlinks(bigDir)
		src := filepath.Join(bigDir, "big")
		for d := range 100 {
			dir := filepath.Join(src, fmt.Sprintf("pkg%02d", d))
			if bigErr = os.MkdirAll(dir, 0o755); bigErr != nil {
				return
			}
			for f := range 100 {
				body := fmt.Sprintf("package pkg%02d\n\n// file %d\nvar V%d = %d\n", d, f, f, d*100+f)
				if bigErr = os.WriteFile(filepath.Join(dir, "f"+strconv.Itoa(f)+".go"), []byte(body), 0o644); bigErr != nil {
					return
				}
			}
		}
		// Packed, and with automatic gc off: otherwise the commit of 10,000
		// loose objects starts a background gc that repacks them while a
		// benchmark clones the repository.
		for _, args := range [][]string{{"init", "-q"}, {"config", "gc.auto", "0"}, {"add", "-A"},
			{"commit", "-q", "-m", "10k files"}, {"repack", "-adq"}} {
			if out, err := gitOut(src, args...); err != nil {
				bigErr = fmt.Errorf("git %v: %v: %s", args, err, out)
				return
			}
		}
	})
	if bigErr != nil {
		b.Fatal(bigErr)
	}
	// A fresh clone for this benchmark, with a few uncommitted changes:
	// staged, unstaged, deleted and untracked.
	dir := filepath.Join(b.TempDir(), "big")
	gitT(b, filepath.Dir(dir), "clone", "-q", "--no-hardlinks", filepath.Join(bigDir, "big"), dir)
	write(b, filepath.Join(dir, "pkg00", "f0.go"), "package pkg00\n\nvar Changed = 1\n", 0o644)
	gitT(b, dir, "add", "pkg00/f0.go")
	write(b, filepath.Join(dir, "pkg01", "f1.go"), "package pkg01\n\nvar Edited = 2\n", 0o644)
	if err := os.Remove(filepath.Join(dir, "pkg02", "f2.go")); err != nil {
		b.Fatal(err)
	}
	write(b, filepath.Join(dir, "pkg03", "new.go"), "package pkg03\n\nvar New = 3\n", 0o644)
	write(b, filepath.Join(dir, "notes", "todo.md"), "- untracked\n", 0o644)
	return dir
}

// childCPU is the user+system time of this process's finished children. On a
// busy machine wall time swings by a factor of two from run to run, while the
// CPU time git spends stays put, so the benchmarks report both.
func childCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkCreate10kFiles(b *testing.B) {
	ctx := context.Background()
	repo := bigRepo(b)
	root := b.TempDir()
	var cpu time.Duration
	b.ResetTimer()
	for range b.N {
		c0 := childCPU(b)
		wt, err := Create(ctx, Spec{Source: repo, Root: root, Branch: "main"})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cpu += childCPU(b) - c0
		if wt.Carried != 5 {
			b.Fatalf("carried %d files, want 5", wt.Carried)
		}
		if err := Remove(ctx, wt, true); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "git-cpu-ns/op")
}

// BenchmarkBareGitWorktreeAdd10k is the floor Create is measured against:
// git checking out the same commit into a new worktree, carrying nothing.
func BenchmarkBareGitWorktreeAdd10k(b *testing.B) {
	repo := bigRepo(b)
	root := b.TempDir()
	var cpu time.Duration
	b.ResetTimer()
	for i := range b.N {
		path := filepath.Join(root, "x"+strconv.Itoa(i))
		c0 := childCPU(b)
		gitT(b, repo, "worktree", "add", "-q", "-b", "x"+strconv.Itoa(i), path, "HEAD")
		b.StopTimer()
		cpu += childCPU(b) - c0
		gitT(b, repo, "worktree", "remove", "--force", path)
		gitT(b, repo, "branch", "-q", "-D", "x"+strconv.Itoa(i))
		b.StartTimer()
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "git-cpu-ns/op")
}

// BenchmarkTreeSmall is what a recorded or replayed step pays for the
// tree it arrived with (Trees), on a small repository (20 files, one
// changed since the index was written): when nothing changed since the
// last snapshot, when one file was edited, and when a file was added;
// go is Trees, git what it did before (gitTrees: a copy of the index,
// git add -A, git write-tree).
func BenchmarkTreeSmall(b *testing.B) {
	for _, how := range snapshotWays {
		for _, change := range treeChanges {
			b.Run(how.name+"/"+change.name, func(b *testing.B) {
				dir := b.TempDir()
				gitT(b, dir, "init", "-q", "-b", "main")
				for i := range 20 {
					write(b, filepath.Join(dir, fmt.Sprintf("f%d.txt", i)), strconv.Itoa(i)+"\n", 0o644)
				}
				gitT(b, dir, "add", ".")
				gitT(b, dir, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "init")
				write(b, filepath.Join(dir, "f1.txt"), "changed\n", 0o644)
				benchTree(b, dir, how.trees, change.do)
			})
		}
	}
}

// BenchmarkTree10kFiles: the same on 10,000 files (in 100 folders).
func BenchmarkTree10kFiles(b *testing.B) {
	for _, how := range snapshotWays {
		for _, change := range treeChanges {
			b.Run(how.name+"/"+change.name, func(b *testing.B) {
				benchTree(b, bigRepo(b), how.trees, change.do)
			})
		}
	}
}

var snapshotWays = []struct {
	name  string
	trees func(context.Context, string) (func(context.Context) (string, error), error)
}{{"go", Trees}, {"git", gitTrees}}

var treeChanges = []struct {
	name string
	do   func(b *testing.B, dir string, i int)
}{
	{"nothing", func(*testing.B, string, int) {}},
	{"edit", func(b *testing.B, dir string, i int) {
		write(b, filepath.Join(dir, "edited.txt"), fmt.Sprintf("edit %d\n", i), 0o644)
	}},
	{"new", func(b *testing.B, dir string, i int) {
		write(b, filepath.Join(dir, fmt.Sprintf("new%d.txt", i)), "new\n", 0o644)
	}},
}

// benchTree times change then a snapshot, after a first snapshot (the
// one a replay takes before its first step).
func benchTree(b *testing.B, dir string, trees func(context.Context, string) (func(context.Context) (string, error), error), change func(*testing.B, string, int)) {
	ctx := context.Background()
	change(b, dir, -1)
	tree, err := trees(ctx, dir)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := tree(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		change(b, dir, i)
		if _, err := tree(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
