// Package worktree gives each fork of a coding agent its own git worktree
// (rule 10 in ARCHITECTURE.md), so N forks of one run never write into one
// checkout and comparing forks can include what each changed on disk. It
// serves every harness alike, through the fork driver: it knows git, not
// agents. Apply brings a fork's work back into the checkout it came from.
//
// A fork starts from exactly the files its parent had: Create checks out the
// parent's HEAD on a new branch "<parent branch>-fork-<i>" and carries over
// the parent's uncommitted work (staged, unstaged and untracked, not ignored)
// without committing it, so the fork's diff against its Base shows both the
// carried and its own work. The parent's work tree, index and stash are never
// touched. Diff and DiffStat report a fork's changes including untracked
// files; Remove and Prune clean up, and Remove loses no uncommitted work
// unless forced (Unsaved says what it would lose, Save commits it to the
// fork's branch); Restore makes a removed fork's worktree again.
//
// Git runs as a subprocess (git 2.31 or newer), never through a shell.
package worktree

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

var (
	// ErrNotRepo: the directory is not inside a git work tree.
	ErrNotRepo = errors.New("not inside a git work tree")
	// ErrMissing: the directory does not exist; it wraps os.ErrNotExist.
	ErrMissing = fmt.Errorf("directory is missing: %w", os.ErrNotExist)
	// ErrHasCommits: Remove kept a branch because it has commits of its own.
	ErrHasCommits = errors.New("branch has commits of its own")
	// ErrUnsaved: Remove kept a worktree because it holds work that is in
	// no commit (an *UnsavedError says how much).
	ErrUnsaved = errors.New("uncommitted work")
)

// UnsavedError is why Remove kept a worktree: Files paths in it hold work
// that is in no commit. It is ErrUnsaved.
type UnsavedError struct {
	Path  string
	Files int
}

func (e *UnsavedError) Error() string {
	return fmt.Sprintf("worktree: kept %s: its work in %s is in no commit (commit it, or delete it with force)", e.Path, plural(e.Files, "file"))
}

// Is makes errors.Is(err, ErrUnsaved) hold.
func (e *UnsavedError) Is(target error) bool { return target == ErrUnsaved }

// Files tine keeps in Root/<repo key>/ next to the worktrees.
const (
	// ledgerFile lists every branch name ever given out for the repo, one a
	// line, so a name is not handed out again after its fork was removed:
	// runs in tine's store keep their branch name, and a reused name would
	// make an old run point at a new fork's work.
	ledgerFile = ".tine-forks"
	// repoFile holds the repository's git directory, so Remove can still
	// delete the branch when the worktree directory was deleted by hand.
	repoFile = ".tine-repo"
	// lockFile is what tine's worktree adds and removes for the repo lock
	// (lockHome).
	lockFile = ".tine-lock"
)

// Repo reports whether dir is inside a git work tree: its top-level directory
// and current branch ("" when HEAD is detached; Create then names forks after
// the short HEAD sha). The error wraps ErrNotRepo when dir is not in a work
// tree (a bare repository or a .git directory included) and ErrMissing when
// dir does not exist.
func Repo(ctx context.Context, dir string) (top, branch string, err error) {
	if err := checkDir(dir); err != nil {
		return "", "", err
	}
	top, err = git(ctx, dir, "rev-parse", "--show-toplevel")
	if err != nil {
		return "", "", repoErr(dir, err)
	}
	// symbolic-ref also works on an unborn branch, where rev-parse HEAD fails.
	branch, err = git(ctx, dir, "symbolic-ref", "-q", "--short", "HEAD")
	if err != nil && exitCode(err) == 1 { // detached
		return top, "", nil
	}
	return top, branch, err
}

func checkDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("worktree: %s: %w", dir, ErrMissing)
	case err != nil:
		return fmt.Errorf("worktree: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("worktree: %s is not a directory: %w", dir, ErrNotRepo)
	}
	return nil
}

// repoErr classifies a failed rev-parse.
func repoErr(dir string, err error) error {
	if stderrHas(err, "not a git repository", "must be run in a work tree") {
		return fmt.Errorf("worktree: %s: %w", dir, ErrNotRepo)
	}
	return fmt.Errorf("worktree: %w", err)
}

// source is what Create needs to know about the directory a fork starts from,
// read with one rev-parse.
type source struct {
	top    string // top of Source's work tree (the parent's own worktree, maybe)
	common string // the repository's git directory, shared by all its worktrees
	index  string // Source's index file
	head   string // HEAD commit
	tree   string // HEAD's tree
	branch string // "" when detached
}

func inspect(ctx context.Context, dir string) (source, error) {
	if err := checkDir(dir); err != nil {
		return source{}, err
	}
	out, err := git(ctx, dir, "rev-parse", "--path-format=absolute",
		"--show-toplevel", "--git-common-dir", "--git-path", "index",
		"HEAD", "HEAD^{tree}", "--symbolic-full-name", "HEAD")
	if err != nil {
		if stderrHas(err, "ambiguous argument 'HEAD'", "unknown revision") {
			return source{}, fmt.Errorf("worktree: %s: the repository has no commit yet to fork from", dir)
		}
		return source{}, repoErr(dir, err)
	}
	f := strings.Split(out, "\n")
	if len(f) != 6 {
		return source{}, fmt.Errorf("worktree: unexpected rev-parse output %q", out)
	}
	s := source{top: f[0], common: f[1], index: f[2], head: f[3], tree: f[4]}
	s.branch, _ = strings.CutPrefix(f[5], "refs/heads/")
	if f[5] == "HEAD" {
		s.branch = ""
	}
	return s, nil
}

// home is Root/<repo dir name>-<8 hex of the repo's path>, where all forks of
// one repository live. The key is the main work tree (the git directory's
// parent), not Source's top, so forks of forks sit with their siblings.
func (s source) home(root string) string {
	top := s.common
	if filepath.Base(top) == ".git" {
		top = filepath.Dir(top)
	}
	sum := sha256.Sum256([]byte(top))
	name := strings.TrimSuffix(filepath.Base(top), ".git")
	return filepath.Join(root, name+"-"+hex.EncodeToString(sum[:4]))
}

// Spec says where a fork starts and where it goes.
type Spec struct {
	// Source is the directory the fork starts from: the parent's cwd or the
	// parent's own worktree (any directory inside a work tree).
	Source string
	// Root is where worktrees live: tine's data dir + "/worktrees".
	Root string
	// Branch is the parent's branch; the new branch is "<Branch>-fork-<i>".
	// Empty means Source's current branch, or its short HEAD sha when
	// detached.
	Branch string
}

// Worktree is a fork's checkout.
type Worktree struct {
	Path   string // the worktree's directory
	Branch string // its new branch
	Base   string // the commit it was created from (the parent's HEAD)
	// Carried is how many files differ between Base and the files the fork
	// starts with: the parent's uncommitted changes and untracked files.
	Carried int
	// Start is the git tree of the files the fork starts with (Base plus
	// what was carried): what the fork changed is its diff against Start.
	Start string
}

// Create makes a worktree on a new branch from Source's HEAD and carries over
// Source's uncommitted changes (staged and unstaged, deletions, renames,
// binary files, symlinks, executable bits) and untracked files that are not
// ignored, so the fork starts from exactly the files the parent had. Nothing
// is committed on the new branch: the fork's HEAD is Base, its index holds
// what Source had staged, its files what Source had on disk, so `git status`
// in the fork reads like it did in Source and the fork's diff against Base
// shows carried and new work together. Source's work tree, index and stash
// list are left as they were. Git does not track empty directories or mode
// bits other than the executable bit, so those are not carried; submodules
// are carried as commits, not checked out.
//
// The branch is "<Branch>-fork-<i>" with the lowest i >= 1 that has no
// branch, no directory and was never given out before for this repository
// under Root (Remove keeps the record), so no name is ever reused. The
// directory is Root/<repo dir name>-<8 hex>/<branch with "/" replaced by "-">.
func Create(ctx context.Context, s Spec) (Worktree, error) {
	if s.Root == "" {
		return Worktree{}, errors.New("worktree: Spec.Root is empty")
	}
	src, err := inspect(ctx, s.Source)
	if err != nil {
		return Worktree{}, err
	}
	parent := s.Branch
	if parent == "" {
		parent = src.branch
	}
	if parent == "" {
		parent = src.head[:min(7, len(src.head))]
	}

	// Snapshot Source while git checks out Base in the new worktree: the two
	// touch different files, and the checkout is the slow part.
	type snap struct {
		staged, work string
		carried      int
		err          error
	}
	snapc := make(chan snap, 1)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		var r snap
		r.staged, r.work, r.err = snapshot(sctx, src)
		if r.err == nil && r.work != src.tree {
			r.carried, r.err = countChanged(sctx, src.top, src.tree, r.work)
		}
		snapc <- r
	}()

	wt, err := add(ctx, src, s.Root, parent, "fork")
	if err != nil {
		cancel() // the snapshot is of no use now
	}
	r := <-snapc
	if err == nil && r.err != nil {
		err = r.err
	}
	if err == nil {
		err = populate(ctx, wt.Path, src.tree, r.staged, r.work)
	}
	if err != nil {
		if wt.Path != "" {
			undo(src, wt)
		}
		return Worktree{}, err
	}
	wt.Carried, wt.Start = r.carried, r.work
	return wt, nil
}

// snapshot returns the trees of Source's index (what is staged) and of its
// files (staged, unstaged and untracked, not ignored) by running `git add -A`
// against a copy of its index: Source's own index, files and stash list stay
// untouched, and the copy's stat data spares git re-reading unchanged files.
// staged is "" when the index cannot be written as a tree (a merge in
// progress); the fork then gets everything unstaged.
func snapshot(ctx context.Context, src source) (staged, work string, err error) {
	tmp, err := os.MkdirTemp("", "tine-worktree-")
	if err != nil {
		return "", "", fmt.Errorf("worktree: %w", err)
	}
	defer os.RemoveAll(tmp)
	idx := filepath.Join(tmp, "index")
	c := cmd{dir: src.top, env: []string{"GIT_INDEX_FILE=" + idx}}
	switch err := copyIndex(src.index, idx); {
	case errors.Is(err, fs.ErrNotExist): // no index yet: start from HEAD
		if _, err := c.run(ctx, "read-tree", src.tree); err != nil {
			return "", "", fmt.Errorf("worktree: snapshot of %s: %w", src.top, err)
		}
	case err != nil:
		return "", "", fmt.Errorf("worktree: snapshot of %s: %w", src.top, err)
	}
	staged, err = c.line(ctx, "write-tree")
	if err != nil {
		if ctx.Err() != nil {
			return "", "", fmt.Errorf("worktree: snapshot of %s: %w", src.top, err)
		}
		staged = ""
	}
	if _, err := c.run(ctx, "add", "-A"); err != nil {
		return "", "", fmt.Errorf("worktree: snapshot of %s: %w", src.top, err)
	}
	work, err = c.line(ctx, "write-tree")
	if err != nil {
		return "", "", fmt.Errorf("worktree: snapshot of %s: %w", src.top, err)
	}
	return staged, work, nil
}

// copyIndex copies an index file keeping its modification time: git trusts
// an entry's cached stat data only when the file is older than the index, so
// a copy with a fresh mtime would hide an edit made in the same instant as
// the index was written ("racy git").
func copyIndex(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chtimes(to, fi.ModTime(), fi.ModTime())
}

// countChanged counts the paths that differ between two trees.
func countChanged(ctx context.Context, dir, a, b string) (int, error) {
	out, err := cmd{dir: dir}.run(ctx, "diff-tree", "-r", "-z", "--no-renames", "--name-only", a, b)
	if err != nil {
		return 0, fmt.Errorf("worktree: %w", err)
	}
	return strings.Count(string(out), "\x00"), nil
}

// add picks the fork's name and runs `git worktree add` under root. Two
// Creates racing for one name are told apart by git itself: the loser's add
// fails with "already exists" and it moves on to the next number.
func add(ctx context.Context, src source, root, parent, kind string) (Worktree, error) {
	home, err := makeHome(src, root)
	if err != nil {
		return Worktree{}, err
	}
	prefix := parent + "-" + kind + "-"
	taken, err := takenNames(ctx, src, home, prefix)
	if err != nil {
		return Worktree{}, err
	}
	for i := 1; ; i++ {
		if err := ctx.Err(); err != nil {
			return Worktree{}, fmt.Errorf("worktree: %w", err)
		}
		name := prefix + strconv.Itoa(i)
		path := filepath.Join(home, strings.ReplaceAll(name, "/", "-"))
		if taken[name] {
			continue
		}
		if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		unlock, err := lockHome(ctx, home)
		if err != nil {
			return Worktree{}, err
		}
		_, err = git(ctx, src.top, "worktree", "add", "--quiet", "-b", name, path, src.head)
		unlock()
		if err == nil {
			// Record the name before anything else can fail, so it is
			// never handed out again.
			if err := appendLedger(home, name); err != nil {
				return Worktree{Path: path, Branch: name, Base: src.head}, err
			}
			return Worktree{Path: path, Branch: name, Base: src.head}, nil
		}
		// Lost a race for the name (someone else's branch or directory,
		// which must not be cleaned up as ours): try the next number.
		if stderrHas(err, "already exists", "already registered", "already checked out", "already used by worktree") {
			if ctx.Err() != nil {
				return Worktree{}, fmt.Errorf("worktree: %w", err)
			}
			taken[name] = true
			continue
		}
		// The branch may have been made before git failed or was stopped.
		undo(src, Worktree{Path: path, Branch: name, Base: src.head})
		return Worktree{}, fmt.Errorf("worktree: %w", err)
	}
}

// makeHome makes root and src's folder in it (home), both private (0700):
// the worktrees hold copies of the person's uncommitted files, beside a
// database of mode 0600. A root made by an older tine with 0755 is made
// private too. The forks' own folders inside are as git makes them.
func makeHome(src source, root string) (string, error) {
	home := src.home(root)
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", fmt.Errorf("worktree: %w", err)
	}
	for _, dir := range []string{root, home} {
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("worktree: %w", err)
		}
		fi, err := os.Stat(dir)
		if err != nil {
			return "", fmt.Errorf("worktree: %w", err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(dir, fi.Mode().Perm()&0o700); err != nil {
				return "", fmt.Errorf("worktree: %w", err)
			}
		}
	}
	if err := writeRepoFile(home, src.common); err != nil {
		return "", err
	}
	return home, nil
}

// takenNames are the names that may not be given out: existing branches with
// the prefix and every name in the ledger.
func takenNames(ctx context.Context, src source, home, prefix string) (map[string]bool, error) {
	taken := map[string]bool{}
	// Branch names cannot contain glob characters, so prefix is literal.
	out, err := git(ctx, src.top, "for-each-ref", "--format=%(refname)", "refs/heads/"+prefix+"*")
	if err != nil {
		return nil, fmt.Errorf("worktree: %w", err)
	}
	for _, ref := range strings.Split(out, "\n") {
		if name, ok := strings.CutPrefix(ref, "refs/heads/"); ok {
			taken[name] = true
		}
	}
	f, err := os.Open(filepath.Join(home, ledgerFile))
	if errors.Is(err, fs.ErrNotExist) {
		return taken, nil
	}
	if err != nil {
		return nil, fmt.Errorf("worktree: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		taken[sc.Text()] = true
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("worktree: %w", err)
	}
	return taken, nil
}

// appendLedger records name; one short O_APPEND write, so concurrent
// Creates do not interleave within a line.
func appendLedger(home, name string) error {
	f, err := os.OpenFile(filepath.Join(home, ledgerFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("worktree: %w", err)
	}
	_, err = f.WriteString(name + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("worktree: %w", err)
	}
	return nil
}

func writeRepoFile(home, common string) error {
	p := filepath.Join(home, repoFile)
	if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) == common {
		return nil
	}
	// Write and rename so a concurrent reader never sees half a path.
	tmp, err := os.CreateTemp(home, repoFile+".*")
	if err != nil {
		return fmt.Errorf("worktree: %w", err)
	}
	_, err = tmp.WriteString(common + "\n")
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), p)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("worktree: %w", err)
	}
	return nil
}

// populate turns a fresh checkout of base into Source's state: files as in
// work, index as in staged ("" for base), HEAD still base.
func populate(ctx context.Context, path, base, staged, work string) error {
	if staged == "" {
		staged = base
	}
	c := cmd{dir: path}
	if work != base {
		// A two-way merge from base updates only the files that differ.
		if _, err := c.run(ctx, "read-tree", "-m", "-u", base, work); err != nil {
			return fmt.Errorf("worktree: carrying changes into %s: %w", path, err)
		}
	}
	if staged != work {
		// A one-way merge without -u sets the index and leaves the files;
		// entries whose content matches keep their stat data.
		if _, err := c.run(ctx, "read-tree", "-m", staged); err != nil {
			return fmt.Errorf("worktree: carrying changes into %s: %w", path, err)
		}
	}
	return nil
}

// undo removes a half-made fork, best effort, even when ctx is done.
func undo(src source, wt Worktree) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	underLock(ctx, filepath.Dir(wt.Path), func() error {
		_, err := git(ctx, src.top, "worktree", "remove", "--force", "--force", wt.Path)
		return err
	})
	// Delete the branch only if it still is the untouched fork of Base.
	git(ctx, src.top, "update-ref", "-d", "refs/heads/"+wt.Branch, wt.Base)
}

// Remove removes a fork's worktree wt.Path and its branch wt.Branch. Unless
// force, it loses nothing: a worktree holding work that is in no commit
// (Unsaved) is kept, with an *UnsavedError, and the branch is
// deleted only when it has no commits beyond wt.Base, otherwise kept with
// an error wrapping ErrHasCommits that says so. With force both go. A path
// that is already gone is pruned. An empty branch removes only the
// worktree.
func Remove(ctx context.Context, wt Worktree, force bool) error {
	path, branch, base := wt.Path, wt.Branch, wt.Base
	common, err := repoOf(ctx, path)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(path); err == nil {
		if !force {
			n, err := Unsaved(ctx, wt)
			if err != nil {
				return fmt.Errorf("worktree: kept %s: cannot tell whether it holds work that is in no commit: %w", path, err)
			}
			if n > 0 {
				return &UnsavedError{Path: path, Files: n}
			}
		}
		args := []string{"worktree", "remove", "--force", path}
		if force { // also when the worktree is locked
			args = []string{"worktree", "remove", "--force", "--force", path}
		}
		if err := underLock(ctx, filepath.Dir(path), func() error {
			_, err := git(ctx, common, args...)
			return err
		}); err != nil {
			return fmt.Errorf("worktree: removing %s (kept it and branch %q): %w", path, branch, err)
		}
	} else if err := underLock(ctx, filepath.Dir(path), func() error {
		_, err := git(ctx, common, "worktree", "prune")
		return err
	}); err != nil {
		return fmt.Errorf("worktree: %w", err)
	}
	if branch == "" {
		return nil
	}
	ref := "refs/heads/" + branch
	tip, err := git(ctx, common, "rev-parse", "-q", "--verify", ref+"^{commit}")
	if err != nil {
		if exitCode(err) == 1 { // no such branch: nothing to delete
			return nil
		}
		return fmt.Errorf("worktree: removed %s; kept branch %q: %w", path, branch, err)
	}
	if !force {
		if base == "" {
			return fmt.Errorf("worktree: removed %s; kept branch %q: no base given to tell whether it has commits of its own", path, branch)
		}
		n, err := git(ctx, common, "rev-list", "--count", base+".."+tip)
		if err != nil {
			return fmt.Errorf("worktree: removed %s; kept branch %q: %w", path, branch, err)
		}
		if n != "0" {
			return fmt.Errorf("worktree: removed %s; kept branch %q: %s commit(s) beyond %s, delete with force: %w",
				path, branch, n, short(base), ErrHasCommits)
		}
	}
	// Delete only the tip we looked at, so a commit made meanwhile survives;
	// refuse when another worktree has the branch checked out, as git branch -D does.
	if wt := checkedOut(ctx, common, ref); wt != "" {
		return fmt.Errorf("worktree: removed %s; kept branch %q: it is checked out in %s", path, branch, wt)
	}
	if _, err := git(ctx, common, "update-ref", "-d", ref, tip); err != nil {
		return fmt.Errorf("worktree: removed %s; kept branch %q: %w", path, branch, err)
	}
	return nil
}

// Unsaved counts the paths of fork wt's worktree (tracked and untracked,
// not ignored) that removing it would lose: those whose files differ from
// what Restore brings back, its branch's last commit when the branch has
// commits beyond wt.Base, else the files the fork started with (wt.Start;
// what it carried from its parent comes back with it). An error says why
// that cannot be told: the worktree's HEAD is not on its branch, say.
func Unsaved(ctx context.Context, wt Worktree) (int, error) {
	if err := checkDir(wt.Path); err != nil {
		return 0, err
	}
	head, headTree, err := onBranch(ctx, wt)
	if err != nil {
		return 0, err
	}
	kept := headTree
	if head == wt.Base && wt.Start != "" {
		kept = wt.Start
	}
	now, err := Tree(ctx, wt.Path)
	if err != nil {
		return 0, err
	}
	if now == kept {
		return 0, nil
	}
	return countChanged(ctx, wt.Path, kept, now)
}

// onBranch returns the commit and tree of wt's HEAD, which must be its
// branch (when it has one).
func onBranch(ctx context.Context, wt Worktree) (head, tree string, err error) {
	if wt.Branch != "" {
		ref, err := git(ctx, wt.Path, "symbolic-ref", "-q", "HEAD")
		if err != nil || ref != "refs/heads/"+wt.Branch {
			return "", "", fmt.Errorf("worktree: %s is not on its branch %q", wt.Path, wt.Branch)
		}
	}
	out, err := git(ctx, wt.Path, "rev-parse", "HEAD", "HEAD^{tree}")
	if err != nil {
		return "", "", fmt.Errorf("worktree: %w", err)
	}
	f := strings.Split(out, "\n")
	if len(f) != 2 {
		return "", "", fmt.Errorf("worktree: unexpected rev-parse output %q", out)
	}
	return f[0], f[1], nil
}

// Saver is who Save's commits are by.
const Saver = "tine <tine@localhost>"

// Save commits the files fork wt's worktree holds (tracked and untracked,
// not ignored) to its branch, on top of its HEAD, with message, as tine
// (Saver), and returns the commit ("" when the files are its HEAD's
// already). It uses git's plumbing, so none of the repository's hooks run
// and nothing asks to sign; the worktree's index is then set to the
// commit, so it reads clean. Removing the worktree afterwards loses
// nothing: the branch holds the work, and Restore brings it back.
func Save(ctx context.Context, wt Worktree, message string) (string, error) {
	if err := checkDir(wt.Path); err != nil {
		return "", err
	}
	if wt.Branch == "" {
		return "", fmt.Errorf("worktree: %s has no branch to save its work to", wt.Path)
	}
	head, headTree, err := onBranch(ctx, wt)
	if err != nil {
		return "", err
	}
	now, err := Tree(ctx, wt.Path)
	if err != nil {
		return "", err
	}
	if now == headTree {
		return "", nil
	}
	name, email, _ := strings.Cut(strings.TrimSuffix(Saver, ">"), " <")
	as := cmd{dir: wt.Path, env: []string{"GIT_AUTHOR_NAME=" + name, "GIT_AUTHOR_EMAIL=" + email,
		"GIT_COMMITTER_NAME=" + name, "GIT_COMMITTER_EMAIL=" + email}}
	commit, err := as.line(ctx, "commit-tree", "--no-gpg-sign", now, "-p", head, "-m", message)
	if err != nil {
		return "", fmt.Errorf("worktree: saving %s: %w", wt.Path, err)
	}
	// Only from the HEAD we read: a commit made meanwhile is not lost.
	if _, err := git(ctx, wt.Path, "update-ref", "-m", "tine: saved the worktree's work", "refs/heads/"+wt.Branch, commit, head); err != nil {
		return "", fmt.Errorf("worktree: saving %s: %w", wt.Path, err)
	}
	if _, err := git(ctx, wt.Path, "reset", "-q"); err != nil {
		return commit, fmt.Errorf("worktree: saved %s as %s, but its index is behind: %w", wt.Path, short(commit), err)
	}
	return commit, nil
}

// plural is n what, with an s when n is not 1: "1 file", "2 files".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// checkedOut returns a worktree that has ref checked out, or "".
func checkedOut(ctx context.Context, common, ref string) string {
	out, err := git(ctx, common, "worktree", "list", "--porcelain")
	if err != nil {
		return ""
	}
	var wt string
	for _, l := range strings.Split(out, "\n") {
		if p, ok := strings.CutPrefix(l, "worktree "); ok {
			wt = p
		} else if l == "branch "+ref {
			return wt
		}
	}
	return ""
}

// repoOf finds the git directory of the repository a fork belongs to: from
// the worktree itself, or, when it is gone or broken, from the record Create
// left next to it.
func repoOf(ctx context.Context, path string) (string, error) {
	var revErr error
	if _, err := os.Stat(path); err == nil {
		common, err := git(ctx, path, "rev-parse", "--path-format=absolute", "--git-common-dir")
		if err == nil {
			return common, nil
		}
		revErr = repoErr(path, err)
	}
	b, err := os.ReadFile(filepath.Join(filepath.Dir(path), repoFile))
	if err == nil {
		common := strings.TrimSpace(string(b))
		if err := checkDir(common); err == nil {
			return common, nil
		}
	}
	if revErr != nil {
		return "", revErr
	}
	return "", fmt.Errorf("worktree: %s is gone and its repository is unknown: %w", path, ErrMissing)
}

func short(sha string) string { return sha[:min(len(sha), 12)] }

// Prune runs `git worktree prune` for the repository at dir, forgetting
// worktrees whose directories are gone, holding the lock of its forks'
// folder under root (git's prune deletes entries another git's add of a
// fork reads).
func Prune(ctx context.Context, dir, root string) error {
	if err := checkDir(dir); err != nil {
		return err
	}
	common, err := git(ctx, dir, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return repoErr(dir, err)
	}
	if err := underLock(ctx, source{common: common}.home(root), func() error {
		_, err := git(ctx, dir, "worktree", "prune")
		return err
	}); err != nil {
		return repoErr(dir, err)
	}
	return nil
}

// Settle is how long after it was made a worktree no fork holds is left
// alone, as one a fork may still be being given: a fork records its
// worktree once it is made, and making one (checking out a large
// repository, carrying its parent's work) can take minutes. gc removes
// only older ones.
const Settle = time.Hour

// Made says when the worktree at path was made (the time of its .git
// file, which git writes as it adds it); ok is false when it has none
// (git is adding it now, or it is no worktree).
func Made(path string) (made time.Time, ok bool) {
	info, err := os.Lstat(filepath.Join(path, ".git"))
	if err != nil {
		return time.Time{}, false
	}
	return info.ModTime(), true
}
