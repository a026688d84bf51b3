package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"tine/harness/worktree"
	"tine/model"
	"tine/store"
)

// applyJSON is what `tine apply --json` prints.
type applyJSON struct {
	Fork     string              `json:"fork"`
	Name     string              `json:"name"`
	Checkout string              `json:"checkout"`
	Files    []worktree.FileStat `json:"files"`
	Added    int                 `json:"added"`
	Deleted  int                 `json:"deleted"`
	// Commit is the commit --commit made, "" for uncommitted changes.
	Commit string `json:"commit"`
}

func cmdApply(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "apply", "FORK [--commit] [--json]",
		"Bring FORK's work (its commits since the fork and its uncommitted changes, as\n"+
			"tine compare --diff shows them) into the checkout it was made from: as uncommitted\n"+
			"changes, or as one commit with --commit. Nothing changes when the checkout has its own\n"+
			"uncommitted changes to a file the fork changed, or when the fork's changes do not apply\n"+
			"cleanly; the reason names the files.")
	commit := f.Bool("commit", false, "apply as one commit naming the fork (and its check)")
	asJSON := f.Bool("json", false, "print JSON")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	st, err := e.open()
	if err != nil {
		return err
	}
	defer st.Close()
	run, err := st.Resolve(ctx, pos[0])
	if err != nil {
		return err
	}
	out, err := applyFork(ctx, run, *commit)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(e.stdout, out)
	}
	printApplied(e.stdout, out)
	return nil
}

// applyFork brings run's work into the checkout it was made from
// (worktree.Apply says when it refuses, changing nothing).
func applyFork(ctx context.Context, run model.Run, commit bool) (applyJSON, error) {
	label := model.SafeText(run.Label())
	switch {
	case run.ParentID == "":
		return applyJSON{}, fmt.Errorf("%s is no fork: there is no other checkout to bring its work into", label)
	case run.Status == model.Running:
		return applyJSON{}, fmt.Errorf("%s is running: apply it when its turn has ended", label)
	case run.Worktree == "" && run.InPlace:
		return applyJSON{}, fmt.Errorf("%s ran in place, in %s: its work is there already", label, model.SafeText(run.Cwd))
	case run.Worktree == "":
		return applyJSON{}, fmt.Errorf("%s has no worktree: it never ran an agent turn, so it has no work to apply", label)
	case run.Cwd == "":
		return applyJSON{}, fmt.Errorf("%s has no checkout recorded to apply it to", label)
	}
	if _, err := os.Stat(run.Worktree); err != nil {
		return applyJSON{}, fmt.Errorf("%s's worktree %s is gone: its uncommitted work went with it", label, model.SafeText(run.Worktree))
	}
	patch, files, err := worktree.Patch(ctx, run.Worktree, run.DiffBase())
	if err != nil {
		return applyJSON{}, err
	}
	msg := ""
	if commit {
		msg = "Apply tine fork " + run.Label()
		if run.Branch != "" {
			msg += " (" + run.Branch + ")"
		}
		if c := run.Check; c != nil && c.Ran {
			msg += "\n\nCheck: " + c.Cmd + ": " + checkText(run)
		}
	}
	sha, err := worktree.Apply(ctx, run.Cwd, run.DiffBase(), patch, files, msg)
	if err != nil {
		if errors.Is(err, worktree.ErrApply) {
			return applyJSON{}, fmt.Errorf("%s: %w", label, err)
		}
		return applyJSON{}, err
	}
	out := applyJSON{Fork: run.ID, Name: run.Name, Checkout: run.Cwd, Files: files, Commit: sha}
	for _, fs := range files {
		out.Added += fs.Added
		out.Deleted += fs.Deleted
	}
	return out, nil
}

// printApplied says what was applied: files and lines, and the commit.
func printApplied(w io.Writer, a applyJSON) {
	var names []string
	for _, f := range a.Files {
		names = append(names, model.SafeText(f.Path))
	}
	files := fmt.Sprintf("%d files", len(a.Files))
	if len(a.Files) == 1 {
		files = "1 file"
	}
	fmt.Fprintf(w, "applied %s into %s: %s +%d −%d (%s)", model.SafeText(a.Name), model.SafeText(a.Checkout),
		files, a.Added, a.Deleted, strings.Join(names, ", "))
	if a.Commit != "" {
		fmt.Fprintf(w, ", committed as %s", model.ShortID(a.Commit))
	} else {
		fmt.Fprint(w, ", as uncommitted changes")
	}
	fmt.Fprintln(w)
}

// applyBest applies the best of runs (marked by their check) into its
// checkout, saying what it applied on w; an error when none is best.
func applyBest(ctx context.Context, st *store.Store, runs []model.Run, w io.Writer) error {
	for _, r := range runs {
		now, err := st.Run(ctx, r.ID)
		if err != nil {
			return err
		}
		if now.Best {
			a, err := applyFork(ctx, now, false)
			if err != nil {
				return fmt.Errorf("--apply-best: %w", err)
			}
			printApplied(w, a)
			return nil
		}
	}
	return errors.New("--apply-best: no fork is marked best (did every check fail?); nothing was applied")
}
