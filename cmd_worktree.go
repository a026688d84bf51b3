package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"tine/harness/worktree"
	"tine/model"
)

func cmdWorktree(ctx context.Context, e *env, args []string) error {
	sub := ""
	if len(args) > 0 && (args[0] == "rm" || args[0] == "prune") {
		sub, args = args[0], args[1:]
	}
	f := newFlags(e, "worktree", "rm RUN... [--force] | prune [--all] [--force]",
		"Remove forks' git worktrees. rm removes the named forks' worktrees; prune removes\n"+
			"those of every finished fork but the ones marked best (--all: those too) and lets git\n"+
			"forget worktrees whose folders are gone. A fork's branch is deleted with its worktree\n"+
			"only when it has no commits of its own; --force deletes it anyway.")
	force := f.Bool("force", false, "delete a fork's branch even when it has commits of its own")
	all := f.Bool("all", false, "prune: the best forks' worktrees too")
	minPos, maxPos := 1, -1
	if sub == "prune" {
		minPos, maxPos = 0, 0
	}
	pos, err := f.parse(args, minPos, maxPos)
	if err != nil {
		return err
	}
	if sub == "" {
		return usagef("worktree: say rm RUN... or prune (see tine worktree --help)")
	}
	st, err := e.open()
	if err != nil {
		return err
	}
	defer st.Close()
	var runs []model.Run
	if sub == "rm" {
		for _, ref := range pos {
			r, err := st.Resolve(ctx, ref)
			if err != nil {
				return err
			}
			if r.Worktree == "" {
				return fmt.Errorf("%s has no worktree", r.Label())
			}
			runs = append(runs, r)
		}
	} else {
		every, err := st.Runs(ctx)
		if err != nil {
			return err
		}
		for _, r := range every {
			if r.Worktree != "" && r.Status != model.Running && r.Status != model.Pending && (*all || !r.Best) {
				runs = append(runs, r)
			}
		}
	}
	var failed error
	for _, r := range runs {
		if r.Status == model.Running {
			return fmt.Errorf("%s is running in its worktree; cancel it first (tine cancel %s)", r.Label(), model.ShortID(r.ID))
		}
		err := worktree.Remove(ctx, r.Worktree, r.Branch, r.BaseCommit, *force)
		kept := errors.Is(err, worktree.ErrHasCommits)
		if err != nil && !kept && !errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(e.stderr, "tine: %s: %s\n", model.SafeText(r.Label()), model.OneLine(err.Error(), 0))
			failed = fmt.Errorf("some worktrees were not removed")
			continue
		}
		if err := st.SetWorktree(ctx, r.ID, "", r.Branch, r.BaseCommit, r.StartTree); err != nil {
			return err
		}
		if kept {
			fmt.Fprintf(e.stdout, "%s: removed %s; kept branch %s, which has commits of its own (--force deletes it)\n",
				model.SafeText(r.Label()), model.SafeText(r.Worktree), model.SafeText(r.Branch))
		} else {
			fmt.Fprintf(e.stdout, "%s: removed %s and branch %s\n", model.SafeText(r.Label()), model.SafeText(r.Worktree), model.SafeText(r.Branch))
		}
	}
	if sub == "prune" {
		every, err := st.Runs(ctx)
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, r := range every {
			if r.Cwd != "" && !seen[r.Cwd] && (r.Worktree != "" || r.BaseCommit != "") {
				seen[r.Cwd] = true
				_ = worktree.Prune(ctx, r.Cwd)
			}
		}
		if len(runs) == 0 {
			fmt.Fprintln(e.stdout, "No finished fork has a worktree to remove.")
		}
	}
	return failed
}
