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

// Restore makes fork wt's worktree again after it went (Remove, or deleted
// by hand), in Source's repository under Root, at the place Create gave
// it, on its branch: checked out from the branch when that has commits
// beyond wt.Base (Save's included), so the files are the fork's last
// commit; else at wt.Base holding the files the fork started with
// (wt.Start), the branch made again when Remove deleted it. Those are what
// Unsaved measures against, so a worktree Remove took without force comes
// back as it was. It refuses, saying why, when the place is taken, the
// branch is checked out elsewhere, or there is nothing to make it from; it
// never falls back to another checkout.
func Restore(ctx context.Context, s Spec, wt Worktree) (Worktree, error) {
	if s.Root == "" {
		return Worktree{}, errors.New("worktree: Spec.Root is empty")
	}
	if wt.Branch == "" {
		return Worktree{}, errors.New("worktree: the fork has no branch to make its worktree from")
	}
	src, err := inspect(ctx, s.Source)
	if err != nil {
		return Worktree{}, err
	}
	home, err := makeHome(src, s.Root)
	if err != nil {
		return Worktree{}, err
	}
	// A folder deleted by hand is still registered, holding its branch.
	if err := underLock(ctx, home, func() error {
		_, err := git(ctx, src.top, "worktree", "prune")
		return err
	}); err != nil {
		return Worktree{}, fmt.Errorf("worktree: %w", err)
	}
	path := filepath.Join(home, strings.ReplaceAll(wt.Branch, "/", "-"))
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		return Worktree{}, fmt.Errorf("worktree: %s is in the way of the fork's worktree", path)
	}
	ref := "refs/heads/" + wt.Branch
	tip, err := git(ctx, src.top, "rev-parse", "-q", "--verify", ref+"^{commit}")
	hasBranch := err == nil
	if err != nil && exitCode(err) != 1 {
		return Worktree{}, fmt.Errorf("worktree: %w", err)
	}
	if !hasBranch && wt.Base == "" {
		return Worktree{}, fmt.Errorf("worktree: there is no branch %s and no base commit to make the fork's worktree from", wt.Branch)
	}
	out := Worktree{Path: path, Branch: wt.Branch, Base: wt.Base, Start: wt.Start}
	if hasBranch && tip != wt.Base {
		if err := underLock(ctx, home, func() error {
			_, err := git(ctx, src.top, "worktree", "add", "--quiet", path, wt.Branch)
			return err
		}); err != nil {
			return Worktree{}, fmt.Errorf("worktree: making the fork's worktree again from branch %s: %w", wt.Branch, err)
		}
		return out, nil
	}
	baseTree, err := git(ctx, src.top, "rev-parse", "--verify", "--quiet", "--end-of-options", wt.Base+"^{tree}")
	if err != nil {
		return Worktree{}, fmt.Errorf("worktree: the fork's base commit %s is not in %s any more", short(wt.Base), src.top)
	}
	start := wt.Start
	if start == "" {
		start = baseTree
	} else if _, err := git(ctx, src.top, "cat-file", "-e", start+"^{tree}"); err != nil {
		return Worktree{}, fmt.Errorf("worktree: the files the fork started with (tree %s) are not in %s any more", short(start), src.top)
	}
	args := []string{"worktree", "add", "--quiet", path, wt.Branch}
	if !hasBranch {
		args = []string{"worktree", "add", "--quiet", "-b", wt.Branch, path, wt.Base}
	}
	if err := underLock(ctx, home, func() error {
		_, err := git(ctx, src.top, args...)
		return err
	}); err != nil {
		return Worktree{}, fmt.Errorf("worktree: making the fork's worktree again on branch %s: %w", wt.Branch, err)
	}
	if err := populate(ctx, path, baseTree, "", start); err != nil {
		if hasBranch {
			// Keep the branch: it was there before.
			bg := context.WithoutCancel(ctx)
			underLock(bg, home, func() error {
				_, err := git(bg, src.top, "worktree", "remove", "--force", "--force", path)
				return err
			})
		} else {
			undo(src, Worktree{Path: path, Branch: wt.Branch, Base: wt.Base})
		}
		return Worktree{}, err
	}
	return out, nil
}

// BranchHasCommits reports whether branch, in the repository of dir, has
// commits beyond base: what Restore makes a fork's worktree again from.
// A branch that is gone has none.
func BranchHasCommits(ctx context.Context, dir, branch, base string) (bool, error) {
	if err := checkDir(dir); err != nil {
		return false, err
	}
	tip, err := git(ctx, dir, "rev-parse", "-q", "--verify", "refs/heads/"+branch+"^{commit}")
	if err != nil {
		if exitCode(err) == 1 {
			return false, nil
		}
		return false, fmt.Errorf("worktree: %w", err)
	}
	return tip != base, nil
}
