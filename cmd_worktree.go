package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"tine/harness"
	"tine/harness/place"
	"tine/harness/place/docker"
	"tine/harness/worktree"
	"tine/model"
	"tine/store"
)

func cmdWorktree(ctx context.Context, e *env, args []string) error {
	sub := ""
	if len(args) > 0 && (args[0] == "rm" || args[0] == "prune") {
		sub, args = args[0], args[1:]
	}
	f := newFlags(e, "worktree", "rm RUN... [--force] | prune [--all] [--force]",
		"Remove forks' git worktrees, and the containers of forks that ran in one (--on docker).\n"+
			"rm removes the named forks' worktrees; prune removes\n"+
			"those of every finished fork but the ones marked best (--all: those too) and lets git\n"+
			"forget worktrees whose folders are gone. Nothing uncommitted is deleted without\n"+
			"--force: rm keeps a worktree that holds work in no commit, and prune first commits\n"+
			"that work to the fork's branch (a commit by tine), which it then keeps. A fork's\n"+
			"branch is deleted with its worktree only when it has no commits of its own. tine run\n"+
			"on a fork whose worktree is gone makes it again from its branch.")
	force := f.Bool("force", false, "delete what a fork's worktree holds uncommitted, and its branch even when it has commits of its own")
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
	st, err := e.openToWrite()
	if err != nil {
		return err
	}
	defer st.Close()
	// Another prune, rm or gc waits (and this one for it), and the runs
	// are read once it may go on: two never remove one worktree.
	unlock, err := worktree.LockRoot(ctx, worktreesOf(st))
	if err != nil {
		return err
	}
	defer unlock()
	var runs, boxed []model.Run
	if sub == "rm" {
		for _, ref := range pos {
			r, err := st.Resolve(ctx, ref)
			if err != nil {
				return err
			}
			switch {
			case r.Worktree != "":
				runs = append(runs, r)
			case r.Container != "":
				boxed = append(boxed, r)
			default:
				return fmt.Errorf("%s has no worktree", r.Label())
			}
		}
	} else {
		every, err := st.Runs(ctx)
		if err != nil {
			return err
		}
		for _, r := range every {
			done := r.Status != model.Running && r.Status != model.Pending && r.Status != model.Queued && (*all || !r.Best)
			switch {
			case done && r.Worktree != "":
				runs = append(runs, r)
			case done && r.Container != "":
				boxed = append(boxed, r)
			}
		}
	}
	failed := removeContainers(ctx, e, st, boxed, *force)
	for _, r := range runs {
		if r.Status == model.Running {
			return fmt.Errorf("%s is running in its worktree; cancel it first (tine cancel %s)", r.Label(), model.ShortID(r.ID))
		}
		label, path, branch := model.SafeText(r.Label()), model.SafeText(r.Worktree), model.SafeText(r.Branch)
		wt := worktree.Worktree{Path: r.Worktree, Branch: r.Branch, Base: r.BaseCommit, Start: r.StartTree}
		// prune keeps what a fork's worktree holds uncommitted in a commit
		// on its branch: agents rarely commit, and the work is the fork's
		// output.
		saved := ""
		if sub == "prune" && !*force {
			if n, err := worktree.Unsaved(ctx, wt); err == nil && n > 0 {
				sha, err := worktree.Save(ctx, wt, saveMessage(r))
				if err != nil {
					fmt.Fprintf(e.stderr, "tine: %s: kept %s: its uncommitted work could not be committed: %s\n", label, path, model.OneLine(err.Error(), 0))
					failed = errors.New("some worktrees were not removed")
					continue
				}
				saved = fmt.Sprintf("committed its uncommitted work (%s) to branch %s as %s", fileCount(n), branch, model.ShortID(sha))
			}
		}
		err := worktree.Remove(ctx, wt, *force)
		var unsaved *worktree.UnsavedError
		kept := errors.Is(err, worktree.ErrHasCommits)
		switch {
		case errors.As(err, &unsaved):
			fmt.Fprintf(e.stderr, "tine: %s: kept %s: its work in %s is in no commit; commit it there, or --force deletes it\n",
				label, path, fileCount(unsaved.Files))
			failed = errors.New("some worktrees were not removed")
			continue
		case err != nil && !kept && !errors.Is(err, os.ErrNotExist):
			fmt.Fprintf(e.stderr, "tine: %s: %s\n", label, model.OneLine(err.Error(), 0))
			failed = errors.New("some worktrees were not removed")
			continue
		}
		if err := st.SetWorktree(ctx, r.ID, "", r.Branch, r.BaseCommit, r.StartTree); err != nil {
			return err
		}
		switch {
		case saved != "":
			fmt.Fprintf(e.stdout, "%s: %s; removed %s; kept branch %s (tine run %s makes the worktree again from it)\n",
				label, saved, path, branch, label)
		case kept:
			fmt.Fprintf(e.stdout, "%s: removed %s; kept branch %s, which has commits of its own (--force deletes it)\n", label, path, branch)
		default:
			fmt.Fprintf(e.stdout, "%s: removed %s and branch %s\n", label, path, branch)
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
				_ = worktree.Prune(ctx, r.Cwd, worktreesOf(st))
			}
		}
		if len(runs) == 0 && len(boxed) == 0 {
			fmt.Fprintln(e.stdout, "No finished fork has a worktree or a container to remove.")
		}
	}
	return failed
}

// removeContainers removes the containers of forks that ran elsewhere
// (place.Remover), once their work is back as their branches; one whose
// work cannot be brought back is kept, unless force. They go at once: a
// daemon takes seconds to remove each.
func removeContainers(ctx context.Context, e *env, st *store.Store, runs []model.Run, force bool) error {
	if len(runs) == 0 {
		return nil
	}
	ps := places(st, backends(harness.Setup{}, true), worktreesOf(st))
	errs := make([]error, len(runs))
	var wg sync.WaitGroup
	for i, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pl, err := ps.Get(r.Place, nil)
			if err == nil {
				if rm, ok := pl.(place.Remover); ok {
					err = rm.Remove(ctx, r, force)
				}
			}
			if err == nil {
				err = st.SetContainer(context.WithoutCancel(ctx), r.ID, "")
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	var failed error
	for i, r := range runs {
		label := model.SafeText(r.Label())
		if errs[i] != nil {
			fmt.Fprintf(e.stderr, "tine: %s: %s\n", label, model.OneLine(errs[i].Error(), 0))
			failed = errors.New("some containers were not removed")
			continue
		}
		fmt.Fprintf(e.stdout, "%s: removed its container %s on %s; its work is on branch %s (tine run %s makes the container again from it)\n",
			label, docker.ShortID(r.Container), model.SafeText(r.Place), model.SafeText(r.Branch), label)
	}
	return failed
}

// saveMessage is the message of the commit by which prune keeps what fork
// r's worktree held uncommitted.
func saveMessage(r model.Run) string {
	return fmt.Sprintf("tine: the uncommitted work of fork %s\n\n"+
		"tine worktree prune committed what the worktree of fork %s (run %s) held,\n"+
		"so that removing the worktree lost nothing; tine run %s makes the\n"+
		"worktree again from this branch.\n", r.Label(), r.Label(), r.ID, r.Label())
}

// fileCount is "1 file" or "n files".
func fileCount(n int) string {
	if n == 1 {
		return "1 file"
	}
	return fmt.Sprintf("%d files", n)
}
