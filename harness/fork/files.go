package fork

import (
	"context"

	"tine/harness/worktree"
	"tine/model"
)

// Where a fork's files are, to say what it changed: its worktree here,
// or, for a fork whose files were elsewhere (a container), its branch,
// which holds its work as it came back after each turn.

// HasFiles reports whether fork r has files of its own to compare: a
// worktree, or a branch its work came back to.
func HasFiles(r model.Run) bool {
	return r.Worktree != "" || (!r.OnThisMachine() && r.Branch != "" && r.BaseCommit != "")
}

// Files is what fork r changed against the files it started with
// (worktree.DiffStat of its worktree, or worktree.BetweenStat of its
// branch).
func Files(ctx context.Context, r model.Run) ([]worktree.FileStat, error) {
	if r.Worktree != "" {
		return worktree.DiffStat(ctx, r.Worktree, r.DiffBase())
	}
	return worktree.BetweenStat(ctx, r.Cwd, r.DiffBase(), "refs/heads/"+r.Branch)
}

// Diff is the whole diff of what fork r changed, and whether it started
// with other files than its base commit's (carried uncommitted work).
func Diff(ctx context.Context, r model.Run) (text string, carried bool, err error) {
	if r.Worktree != "" {
		if text, err = worktree.Diff(ctx, r.Worktree, r.DiffBase()); err != nil {
			return "", false, err
		}
		carried, err = worktree.Carried(ctx, r.Worktree, r.BaseCommit, r.StartTree)
		return text, carried, err
	}
	if text, err = worktree.Between(ctx, r.Cwd, r.DiffBase(), "refs/heads/"+r.Branch); err != nil {
		return "", false, err
	}
	carried, err = worktree.Carried(ctx, r.Cwd, r.BaseCommit, r.StartTree)
	return text, carried, err
}
