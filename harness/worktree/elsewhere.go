package worktree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// A fork whose files live elsewhere (a container, possibly on another
// machine) has no worktree here: its branch is made here, pointing at the
// commit it starts from, its starting files go there as a git archive
// with a shallow pack of the objects they need, and its work comes back
// as a bundle whose tip becomes its branch. This file is that half of
// the package.

// Start is what a fork made from a directory starts with, read without
// touching it (Snapshot).
type Start struct {
	// Top is the directory's work tree's top; Rel where the directory is
	// below it ("." for the top).
	Top, Rel string
	// Base is its HEAD commit; Branch its branch ("" when detached).
	Base, Branch string
	// Staged is the tree of its index ("" when it cannot be written: a
	// merge in progress); Work the tree of its files (staged, unstaged
	// and untracked, not ignored): what the fork starts with.
	Staged, Work string
	// Carried counts the paths Work has that Base does not.
	Carried int
}

// Snapshot reads what a fork of dir starts with, as Create carries it,
// leaving dir's files, index and stash as they are.
func Snapshot(ctx context.Context, dir string) (Start, error) {
	src, err := inspect(ctx, dir)
	if err != nil {
		return Start{}, err
	}
	staged, work, err := snapshot(ctx, src)
	if err != nil {
		return Start{}, err
	}
	s := Start{Top: src.top, Base: src.head, Branch: src.branch, Staged: staged, Work: work, Rel: "."}
	if abs, err := filepath.Abs(dir); err == nil {
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			abs = real
		}
		if rel, err := filepath.Rel(src.top, abs); err == nil && !strings.HasPrefix(rel, "..") {
			s.Rel = rel
		}
	}
	if work != src.tree {
		if s.Carried, err = countChanged(ctx, src.top, src.tree, work); err != nil {
			return Start{}, err
		}
	}
	return s, nil
}

// Reserve gives a fork of the repository at s.Source a branch
// "<Branch>-fork-<i>" at base, named as Create names its branches (the
// lowest i never given out for the repository under s.Root), without a
// worktree: its files are elsewhere.
func Reserve(ctx context.Context, s Spec, base string) (string, error) {
	if s.Root == "" {
		return "", errors.New("worktree: Spec.Root is empty")
	}
	src, err := inspect(ctx, s.Source)
	if err != nil {
		return "", err
	}
	parent := s.Branch
	if parent == "" {
		parent = src.branch
	}
	if parent == "" {
		parent = src.head[:min(7, len(src.head))]
	}
	home, err := makeHome(src, s.Root)
	if err != nil {
		return "", err
	}
	prefix := parent + "-fork-"
	unlock, err := lockHome(ctx, home)
	if err != nil {
		return "", err
	}
	defer unlock()
	taken, err := takenNames(ctx, src, home, prefix)
	if err != nil {
		return "", err
	}
	for i := 1; ; i++ {
		name := prefix + strconv.Itoa(i)
		if taken[name] {
			continue
		}
		if _, err := os.Lstat(filepath.Join(home, strings.ReplaceAll(name, "/", "-"))); err == nil {
			continue
		}
		// An empty old value: made only if no such branch exists.
		if _, err := git(ctx, src.top, "update-ref", "-m", "tine: a fork's branch", "refs/heads/"+name, base, ""); err != nil {
			if ctx.Err() == nil && stderrHas(err, "already exists", "reference already exists", "unable to lock") {
				taken[name] = true
				continue
			}
			return "", fmt.Errorf("worktree: %w", err)
		}
		return name, appendLedger(home, name)
	}
}

// Archive writes tree of the repository at dir as a tar stream to w, its
// paths under prefix (ending in "/"): the files a fork starts with.
func Archive(ctx context.Context, dir, tree, prefix string, w io.Writer) error {
	return pipeGit(ctx, dir, nil, w, "archive", "--format=tar", "--prefix="+prefix, tree)
}

// Pack writes into dir/objects/pack a pack of what a shallow clone at base
// needs, and of trees (the fork's staged and working files): every object
// of base's commit and tree, none of its history.
func Pack(ctx context.Context, repo, gitDir, base string, trees ...string) error {
	packDir := filepath.Join(gitDir, "objects", "pack")
	if err := os.MkdirAll(packDir, 0o755); err != nil {
		return fmt.Errorf("worktree: %w", err)
	}
	pr, pw := io.Pipe()
	listed := make(chan error, 1)
	go func() {
		err := pipeGit(ctx, repo, nil, pw, append([]string{"rev-list", "--objects", "--no-walk", base}, trees...)...)
		pw.CloseWithError(err)
		listed <- err
	}()
	err := pipeGit(ctx, repo, pr, io.Discard, "pack-objects", "-q", filepath.Join(packDir, "pack"))
	pr.CloseWithError(err)
	if lerr := <-listed; err == nil {
		err = lerr
	}
	return err
}

// Capture is the commit that holds what the work tree at dir holds now
// (tracked and untracked, not ignored): its HEAD when the files are
// HEAD's, else a commit by tine (Saver) on top of HEAD with message. It
// leaves HEAD, the index and the files as they are, and runs no hooks.
func Capture(ctx context.Context, dir, message string) (string, error) {
	out, err := git(ctx, dir, "rev-parse", "HEAD", "HEAD^{tree}")
	if err != nil {
		return "", fmt.Errorf("worktree: %w", err)
	}
	f := strings.Split(out, "\n")
	if len(f) != 2 {
		return "", fmt.Errorf("worktree: unexpected rev-parse output %q", out)
	}
	head, headTree := f[0], f[1]
	now, err := Tree(ctx, dir)
	if err != nil {
		return "", err
	}
	if now == headTree {
		return head, nil
	}
	name, email, _ := strings.Cut(strings.TrimSuffix(Saver, ">"), " <")
	as := cmd{dir: dir, env: []string{"GIT_AUTHOR_NAME=" + name, "GIT_AUTHOR_EMAIL=" + email,
		"GIT_COMMITTER_NAME=" + name, "GIT_COMMITTER_EMAIL=" + email}}
	commit, err := as.line(ctx, "commit-tree", "--no-gpg-sign", now, "-p", head, "-m", message)
	if err != nil {
		return "", fmt.Errorf("worktree: %w", err)
	}
	return commit, nil
}

// Bundle writes the commits from base to commit (under ref) as a git
// bundle to file.
func Bundle(ctx context.Context, dir, ref, commit, base, file string) error {
	if _, err := git(ctx, dir, "update-ref", ref, commit); err != nil {
		return fmt.Errorf("worktree: %w", err)
	}
	if _, err := git(ctx, dir, "bundle", "create", "-q", file, ref, "^"+base); err != nil {
		return fmt.Errorf("worktree: %w", err)
	}
	return nil
}

// Unbundle stores the objects of the bundle file in the repository at dir
// and points branch at the bundle's tip (ref), unless the branch is
// checked out in a worktree, whose files would then not match it. It
// returns the tip.
func Unbundle(ctx context.Context, dir, file, ref, branch string) (string, error) {
	out, err := git(ctx, dir, "bundle", "unbundle", file)
	if err != nil {
		return "", fmt.Errorf("worktree: %w", err)
	}
	tip := ""
	for _, l := range strings.Split(out, "\n") {
		if sha, name, ok := strings.Cut(l, " "); ok && name == ref {
			tip = sha
		}
	}
	if tip == "" {
		return "", fmt.Errorf("worktree: the bundle has no %s", ref)
	}
	return tip, SetBranch(ctx, dir, branch, tip)
}

// SetBranch points branch of the repository at dir at commit, unless the
// branch is checked out in a worktree (then it says so, changing
// nothing).
func SetBranch(ctx context.Context, dir, branch, commit string) error {
	common, err := git(ctx, dir, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return repoErr(dir, err)
	}
	if wt := checkedOut(ctx, common, "refs/heads/"+branch); wt != "" {
		return fmt.Errorf("worktree: branch %s is checked out in %s, so it was left as it is (its work is at %s)", branch, wt, short(commit))
	}
	if _, err := git(ctx, dir, "update-ref", "-m", "tine: a fork's work, from where it ran", "refs/heads/"+branch, commit); err != nil {
		return fmt.Errorf("worktree: %w", err)
	}
	return nil
}

// pipeGit runs git args in dir with stdin and stdout as given.
func pipeGit(ctx context.Context, dir string, stdin io.Reader, stdout io.Writer, args ...string) error {
	x := exec.CommandContext(ctx, "git", args...)
	x.Dir = dir
	x.Env = baseEnv()
	x.Stdin = stdin
	x.Stdout = stdout
	var stderr bytes.Buffer
	x.Stderr = &stderr
	x.Cancel = func() error { return x.Process.Signal(syscall.SIGTERM) }
	if err := x.Run(); err != nil {
		code := -1
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		return &gitError{Args: args, Dir: dir, Code: code, Stderr: stderr.String(), Err: err, stopped: ctx.Err() != nil}
	}
	return nil
}

// Resolve is the object name rev stands for in the repository at dir.
func Resolve(ctx context.Context, dir, rev string) (string, error) {
	out, err := git(ctx, dir, "rev-parse", "--verify", "--quiet", rev)
	if err != nil {
		return "", fmt.Errorf("worktree: %s is not in %s", rev, dir)
	}
	return out, nil
}

// StartCheckout sets up a checkout made from a Start's files (a fork's,
// in its container): HEAD on branch at base, the index as staged (base's
// tree when ""), the files as they are.
func StartCheckout(ctx context.Context, top, branch, base, staged string) error {
	if staged == "" {
		staged = base
	}
	for _, args := range [][]string{
		{"update-ref", "refs/heads/" + branch, base},
		{"symbolic-ref", "HEAD", "refs/heads/" + branch},
		{"update-ref", "-d", "refs/heads/tine-start"},
		{"read-tree", staged},
	} {
		if _, err := git(ctx, top, args...); err != nil {
			return fmt.Errorf("worktree: %w", err)
		}
	}
	return nil
}

// BetweenStat is what changed from a to b (commits or trees of the
// repository at dir), as DiffStat says it of a worktree: the work of a
// fork whose files are elsewhere, from its start to its branch.
func BetweenStat(ctx context.Context, dir, a, b string) ([]FileStat, error) {
	out, err := cmd{dir: dir}.run(ctx, "diff", "--no-ext-diff", "--no-color", "-M", "--numstat", "-z", a, b, "--")
	if err != nil {
		return nil, fmt.Errorf("worktree: %w", err)
	}
	return parseNumstat(out)
}

// Between is the unified diff from a to b, as Diff gives a worktree's.
func Between(ctx context.Context, dir, a, b string) (string, error) {
	out, err := cmd{dir: dir}.run(ctx, "diff", "--no-ext-diff", "--no-color", "-M", "--src-prefix=a/", "--dst-prefix=b/", a, b, "--")
	if err != nil {
		return "", fmt.Errorf("worktree: %w", err)
	}
	return string(out), nil
}

// BetweenPatch is the change from a to b as a patch git apply takes,
// binary files included, with the files it touches (as Patch).
func BetweenPatch(ctx context.Context, dir, a, b string) ([]byte, []FileStat, error) {
	files, err := BetweenStat(ctx, dir, a, b)
	if err != nil {
		return nil, nil, err
	}
	out, err := cmd{dir: dir}.run(ctx, "diff", "--no-ext-diff", "--no-color", "-M", "--binary", "--full-index",
		"--src-prefix=a/", "--dst-prefix=b/", a, b, "--")
	if err != nil {
		return nil, nil, fmt.Errorf("worktree: %w", err)
	}
	return out, files, nil
}
