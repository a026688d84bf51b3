package worktree

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// CreateAt makes a replay's sandbox (rule 9 in ARCHITECTURE.md): a worktree
// of Source's repository on a new branch "<Branch>-replay-<i>" at commit
// base, holding exactly the files of tree start ("" for base's own files):
// the world a recorded run started in, whatever Source holds now. Its HEAD
// is base and nothing is staged, so its diff against start is what the
// replay changed. Names are never reused, as with Create.
func CreateAt(ctx context.Context, s Spec, base, start string) (Worktree, error) {
	return createAt(ctx, s, base, start, "replay")
}

// ForkAt makes a fork's worktree as Create does, but at commit base with
// the files of tree start ("" for base's own), whatever Source holds now:
// a fork of a fork whose files were elsewhere starts from that fork's
// branch, not from the checkout.
func ForkAt(ctx context.Context, s Spec, base, start string) (Worktree, error) {
	return createAt(ctx, s, base, start, "fork")
}

func createAt(ctx context.Context, s Spec, base, start, kind string) (Worktree, error) {
	if s.Root == "" {
		return Worktree{}, errors.New("worktree: Spec.Root is empty")
	}
	src, err := inspect(ctx, s.Source)
	if err != nil {
		return Worktree{}, err
	}
	head, tree, start, err := resolveBase(ctx, src.top, base, start)
	if err != nil {
		return Worktree{}, err
	}
	parent := s.Branch
	if parent == "" {
		parent = src.branch
	}
	if parent == "" {
		parent = head[:min(7, len(head))]
	}
	src.head, src.tree = head, tree
	wt, err := add(ctx, src, s.Root, parent, kind)
	if err == nil {
		err = populate(ctx, wt.Path, tree, "", start)
	}
	if err != nil {
		if wt.Path != "" {
			undo(src, wt)
		}
		return Worktree{}, err
	}
	wt.Start = start
	if start != tree {
		wt.Carried, _ = countChanged(ctx, src.top, tree, start)
	}
	return wt, nil
}

// ErrNoCommit: a revision names no commit of the repository (a
// *NoCommitError says which).
var ErrNoCommit = errors.New("no such commit")

// NoCommitError is a revision Rev that names no commit of the repository
// at Top. It is ErrNoCommit.
type NoCommitError struct{ Rev, Top string }

func (e *NoCommitError) Error() string {
	return fmt.Sprintf("worktree: %s is not a commit of %s", e.Rev, e.Top)
}

// Is makes errors.Is(err, ErrNoCommit) hold.
func (e *NoCommitError) Is(target error) bool { return target == ErrNoCommit }

// BaseCommit checks what CreateAt needs of dir's repository before
// anything is made: that base names a commit (else a *NoCommitError) and
// start ("" for base's own files) a tree of it. It returns base's commit.
func BaseCommit(ctx context.Context, dir, base, start string) (string, error) {
	top, _, err := Repo(ctx, dir)
	if err != nil {
		return "", err
	}
	head, _, _, err := resolveBase(ctx, top, base, start)
	return head, err
}

// resolveBase is base's commit and tree in the repository at top, and
// the tree a worktree at base starts with: start, or base's own tree.
func resolveBase(ctx context.Context, top, base, start string) (head, tree, starts string, err error) {
	head, err = git(ctx, top, "rev-parse", "--verify", "--quiet", "--end-of-options", base+"^{commit}")
	if err != nil {
		return "", "", "", &NoCommitError{Rev: base, Top: top}
	}
	tree, err = git(ctx, top, "rev-parse", "--verify", "--quiet", head+"^{tree}")
	if err != nil {
		return "", "", "", fmt.Errorf("worktree: %w", err)
	}
	if start == "" {
		return head, tree, tree, nil
	}
	if _, err := git(ctx, top, "cat-file", "-e", start+"^{tree}"); err != nil {
		return "", "", "", fmt.Errorf("worktree: the tree the run started with (%s) is not in %s any more", short(start), top)
	}
	return head, tree, start, nil
}

// Tree is the git tree of the files in dir's work tree now (tracked and
// untracked, not ignored), written to the repository's object store without
// touching dir's index: what a replay compares after each step. It reads
// only files whose stat data changed since the index was written.
func Tree(ctx context.Context, dir string) (string, error) {
	f, err := Trees(ctx, dir)
	if err != nil {
		return "", err
	}
	return f(ctx)
}

// Trees is Tree for repeated use on one directory: it finds the work
// tree's top, index and git directory once, which it names to git: what
// the agent working there does to its .git file from then on is not
// followed (GitDir). The first call runs git (a copy of the index, `git
// add -A`, `git write-tree`); the next ones walk the work tree in Go from
// what the one before saw, hashing only what changed, and run git only
// for what they cannot reproduce exactly (snapshots, trees.go).
func Trees(ctx context.Context, dir string) (func(context.Context) (string, error), error) {
	s, err := openSnapshots(ctx, dir)
	if err != nil {
		return nil, err
	}
	return s.tree, nil
}

// gitTrees is Trees taking every snapshot with git: what Trees did
// before, kept for the benchmarks and the tests that compare the two.
func gitTrees(ctx context.Context, dir string) (func(context.Context) (string, error), error) {
	s, err := openSnapshots(ctx, dir)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (string, error) {
		return gitSnapshot(ctx, s.top, s.index, s.gitDir, nil)
	}, nil
}

func openSnapshots(ctx context.Context, dir string) (*snapshots, error) {
	if err := checkDir(dir); err != nil {
		return nil, err
	}
	top, index, err := topAndIndex(ctx, dir)
	if err != nil {
		return nil, err
	}
	gitDir, err := GitDir(ctx, dir)
	if err != nil {
		return nil, err
	}
	return newSnapshots(ctx, top, index, gitDir)
}

// gitSnapshot is the tree of top's files with git: a copy of its index
// (never touched itself), `git add -A` on it, `git write-tree`. seen, when
// set, reads the index git wrote before it is removed.
func gitSnapshot(ctx context.Context, top, index, gitDir string, seen func(index string)) (string, error) {
	tmp, err := os.MkdirTemp("", "tine-tree-")
	if err != nil {
		return "", fmt.Errorf("worktree: %w", err)
	}
	defer os.RemoveAll(tmp)
	idx := filepath.Join(tmp, "index")
	c := cmd{dir: top, env: []string{"GIT_INDEX_FILE=" + idx, "GIT_DIR=" + gitDir, "GIT_WORK_TREE=" + top}}
	switch err := copyIndex(index, idx); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return "", fmt.Errorf("worktree: %w", err)
	}
	if _, err := c.run(ctx, "add", "-A"); err != nil {
		return "", fmt.Errorf("worktree: the tree of %s: %w", top, err)
	}
	t, err := c.line(ctx, "write-tree")
	if err != nil {
		return "", fmt.Errorf("worktree: the tree of %s: %w", top, err)
	}
	if seen != nil {
		seen(idx)
	}
	return t, nil
}

// GitDir is the git directory of dir's work tree (absolute): for a linked
// worktree, its folder under the repository's .git/worktrees. TreeDiff and
// Changes take it for dir, and Trees pins it, so that tine's own git on a
// tree an agent works in (a replay's, in its sandbox) keeps to the
// repository it found before the agent ran: the agent may rewrite the
// worktree's .git file to point at a repository, and a config that runs
// commands, of its own.
func GitDir(ctx context.Context, dir string) (string, error) {
	if err := checkDir(dir); err != nil {
		return "", err
	}
	gd, err := git(ctx, dir, "rev-parse", "--absolute-git-dir")
	if err != nil {
		return "", repoErr(dir, err)
	}
	return gd, nil
}

// RestoreGitFile makes dir's .git the file git wrote there, pointing at
// gitDir (GitDir's, found before an agent ran in dir), whatever the agent
// made of it: tine's later git on dir (a diff, a compare) then reads the
// worktree's own repository, not one of the agent's.
func RestoreGitFile(dir, gitDir string) error {
	p := filepath.Join(dir, ".git")
	want := "gitdir: " + gitDir + "\n"
	if b, err := os.ReadFile(p); err == nil && string(b) == want {
		return nil
	}
	if err := os.RemoveAll(p); err != nil {
		return fmt.Errorf("worktree: %w", err)
	}
	if err := os.WriteFile(p, []byte(want), 0o644); err != nil {
		return fmt.Errorf("worktree: %w", err)
	}
	return nil
}

// TreeDiff is the unified diff between two trees of dir's repository (dir
// a work tree, or its GitDir), limited to paths when given, at most
// maxLines lines (a last line says how many were left out).
func TreeDiff(ctx context.Context, dir, a, b string, paths []string, maxLines int) (string, error) {
	args := append([]string{"diff-tree", "-r", "-p", "--no-color", "--src-prefix=a/", "--dst-prefix=b/", a, b, "--"}, paths...)
	out, err := git(ctx, dir, args...)
	if err != nil {
		return "", fmt.Errorf("worktree: %w", err)
	}
	lines := strings.Split(out, "\n")
	if maxLines > 0 && len(lines) > maxLines {
		n := len(lines) - maxLines
		lines = append(lines[:maxLines], fmt.Sprintf("… %d more lines", n))
	}
	return strings.Join(lines, "\n"), nil
}

// Changes maps each path that differs between trees a and b of dir's
// repository (dir a work tree, or its GitDir) to its blob in b ("" when b
// deletes it).
func Changes(ctx context.Context, dir, a, b string) (map[string]string, error) {
	out, err := cmd{dir: dir}.run(ctx, "diff-tree", "-r", "-z", "--no-renames", a, b)
	if err != nil {
		return nil, fmt.Errorf("worktree: %w", err)
	}
	m := map[string]string{}
	f := strings.Split(string(out), "\x00")
	for i := 0; i+1 < len(f); i += 2 {
		// ":100644 100644 <old> <new> M" then the path.
		meta := strings.Fields(f[i])
		if len(meta) < 5 {
			continue
		}
		blob := meta[3]
		if strings.Trim(blob, "0") == "" {
			blob = ""
		}
		m[f[i+1]] = meta[1] + " " + blob
	}
	return m, nil
}
