package fork

import (
	"context"
	"errors"
	"fmt"
	"os"

	"tine/harness/worktree"
	"tine/model"
)

// Applied is what Apply brought into a checkout.
type Applied struct {
	Fork     string              `json:"fork"`
	Name     string              `json:"name"`
	Checkout string              `json:"checkout"`
	Files    []worktree.FileStat `json:"files"`
	Added    int                 `json:"added"`
	Deleted  int                 `json:"deleted"`
	// Commit is the commit made with commit set, "" for uncommitted
	// changes.
	Commit string `json:"commit"`
}

// Apply brings fork run's work (its commits since the fork and its
// uncommitted changes, as its worktree's diff shows them) into the
// checkout it was made from: as uncommitted changes, or as one commit
// naming the fork and its check. worktree.Apply says when it refuses,
// changing nothing.
func Apply(ctx context.Context, run model.Run, commit bool) (Applied, error) {
	label := model.SafeText(run.Label())
	switch {
	case run.ParentID == "":
		return Applied{}, fmt.Errorf("%s is no fork: there is no other checkout to bring its work into", label)
	case run.Status == model.Running:
		return Applied{}, fmt.Errorf("%s is running: apply it when its turn has ended", label)
	case !run.OnThisMachine() && run.Branch != "" && run.Cwd != "":
		// Its files were elsewhere; its work came back as its branch.
		return applyBranch(ctx, run, commit)
	case run.Worktree == "" && run.InPlace:
		return Applied{}, fmt.Errorf("%s ran in place, in %s: its work is there already", label, model.SafeText(run.Cwd))
	case run.Worktree == "" && run.BaseCommit != "":
		return Applied{}, fmt.Errorf("%s's worktree was removed (tine worktree rm or prune), and its uncommitted work with it; its branch %s stays if it has commits of its own", label, model.SafeText(run.Branch))
	case run.Worktree == "":
		return Applied{}, fmt.Errorf("%s has no worktree: it never ran an agent turn, so it has no work to apply", label)
	case run.Cwd == "":
		return Applied{}, fmt.Errorf("%s has no checkout recorded to apply it to", label)
	}
	if _, err := os.Stat(run.Worktree); err != nil {
		return Applied{}, fmt.Errorf("%s's worktree %s is gone: its uncommitted work went with it", label, model.SafeText(run.Worktree))
	}
	patch, files, err := worktree.Patch(ctx, run.Worktree, run.DiffBase())
	if err != nil {
		return Applied{}, err
	}
	return applyPatch(ctx, run, patch, files, commit)
}

// applyBranch applies the work of a fork that ran elsewhere (a
// container): its branch, since the files it started with.
func applyBranch(ctx context.Context, run model.Run, commit bool) (Applied, error) {
	patch, files, err := worktree.BetweenPatch(ctx, run.Cwd, run.DiffBase(), "refs/heads/"+run.Branch)
	if err != nil {
		return Applied{}, fmt.Errorf("%s's branch %s: %w", model.SafeText(run.Label()), model.SafeText(run.Branch), err)
	}
	return applyPatch(ctx, run, patch, files, commit)
}

// applyPatch brings patch, a fork's work touching files, into the
// checkout it was made from.
func applyPatch(ctx context.Context, run model.Run, patch []byte, files []worktree.FileStat, commit bool) (Applied, error) {
	label := model.SafeText(run.Label())
	msg := ""
	if commit {
		msg = "Apply tine fork " + run.Label()
		if run.Branch != "" {
			msg += " (" + run.Branch + ")"
		}
		if c := run.Check; c != nil && c.Ran {
			msg += "\n\nCheck: " + c.Cmd + ": " + CheckResult(c)
		}
	}
	sha, err := worktree.Apply(ctx, run.Cwd, run.DiffBase(), patch, files, msg)
	if err != nil {
		if errors.Is(err, worktree.ErrApply) {
			return Applied{}, fmt.Errorf("%s: %w", label, err)
		}
		return Applied{}, err
	}
	out := Applied{Fork: run.ID, Name: run.Name, Checkout: run.Cwd, Files: files, Commit: sha}
	for _, fs := range files {
		out.Added += fs.Added
		out.Deleted += fs.Deleted
	}
	return out, nil
}

// Summary says what was applied, in one line: files and lines, and the
// commit.
func (a Applied) Summary() string {
	files := fmt.Sprintf("%d files", len(a.Files))
	if len(a.Files) == 1 {
		files = "1 file"
	}
	s := fmt.Sprintf("applied %s into %s: %s +%d −%d", model.SafeText(a.Name), model.SafeText(a.Checkout), files, a.Added, a.Deleted)
	for i, f := range a.Files {
		if i == 0 {
			s += " ("
		} else {
			s += ", "
		}
		s += model.SafeText(f.Path)
		if i == len(a.Files)-1 {
			s += ")"
		}
	}
	if a.Commit != "" {
		return s + ", committed as " + model.ShortID(a.Commit)
	}
	return s + ", as uncommitted changes"
}

// CheckResult says how a check went, in a few words.
func CheckResult(c *model.Check) string {
	switch {
	case !c.Ran:
		return "not run"
	case c.Error != "":
		return "error: " + c.Error
	case c.Score != nil && c.Number:
		return fmt.Sprintf("scored %g", *c.Score)
	case c.Exit == 0:
		return "passed"
	}
	return fmt.Sprintf("failed: exit %d", c.Exit)
}
