// Package local is the place a fork's turns run on this machine: its
// files in a git worktree of its own (rule 10 in ARCHITECTURE.md), made
// from its parent's files before its first turn and made again from its
// branch when it is gone, its agent a process here, its check run there.
// A fork made in place runs in its parent's own directory instead.
package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"tine/harness"
	"tine/harness/place"
	"tine/harness/worktree"
	"tine/model"
)

// Local is this machine as a place (place.Place).
type Local struct {
	store place.Store
	root  string
}

var _ place.Place = (*Local)(nil)

// New is this machine as a place: forks' worktrees go under root (tine's
// data dir + "/worktrees"; "" is the default data dir's), recorded
// through st.
func New(st place.Store, root string) *Local { return &Local{store: st, root: root} }

// Name implements place.Place: this machine is "".
func (*Local) Name() string { return "" }

// Root is where forks' worktrees live.
func (p *Local) Root() string {
	if p.root != "" {
		return p.root
	}
	base := os.Getenv("XDG_DATA_HOME")
	if base == "" {
		home, _ := os.UserHomeDir()
		base = filepath.Join(home, ".local", "share")
	}
	return filepath.Join(base, "tine", "worktrees")
}

// Admit implements place.Place: the parent's directory must be a git
// repository, unless the forks run in place (WorkDir).
func (*Local) Admit(ctx context.Context, parent model.Run, _ string, _ model.PlaceOpts, inPlace bool) (string, error) {
	return WorkDir(ctx, parent, inPlace)
}

// Prepare implements place.Place: the forks' worktrees are made one after
// the other, in the order given, so fork i of a batch works on
// <branch>-fork-i.
func (p *Local) Prepare(ctx context.Context, runs []model.Run) {
	for _, run := range runs {
		_ = p.ensureWorktree(ctx, &run)
	}
}

// Ready implements place.Place: run's worktree, made (or made again) now
// when it has none (ensureWorktree); its agent works at the place in it
// its cwd has in its repository.
func (p *Local) Ready(ctx context.Context, run *model.Run) (place.Workspace, error) {
	if err := p.ensureWorktree(ctx, run); err != nil {
		return place.Workspace{}, err
	}
	dir := AgentDir(*run)
	return place.Workspace{Dir: dir, HostDir: dir}, nil
}

// Acquire implements place.Place: a turn here waits for nothing but the
// driver's own bound (Driver.Parallel).
func (*Local) Acquire(context.Context, model.Run, func()) (func(), error) { return func() {}, nil }

// Turn implements place.Place: the agent runs here, as a process of its
// own (internal/agentproc).
func (*Local) Turn(ctx context.Context, h harness.Harness, req harness.TurnRequest, emit func(harness.Event)) error {
	return h.Turn(ctx, req, emit)
}

// Check implements place.Place: in the agent's fork's worktree; in its
// directory when it ran in place. A fork without a worktree (removed, or
// never made) is not checked in the session's own checkout instead (rule
// 12 in ARCHITECTURE.md).
func (*Local) Check(ctx context.Context, run model.Run, c model.Check, timeout time.Duration) model.Check {
	dir, err := CheckDir(run)
	if err != nil {
		return model.Check{Cmd: c.Cmd, Number: c.Number, Ran: true, Exit: -1, Error: err.Error()}
	}
	return place.RunCheck(ctx, dir, c.Cmd, c.Number, timeout)
}

// CheckDir is where an agent's fork r is checked here: its worktree, or
// its directory when it ran in place; never the session's own checkout
// instead (rule 12 in ARCHITECTURE.md).
func CheckDir(r model.Run) (string, error) {
	switch {
	case r.Worktree != "":
		return r.Worktree, nil
	case r.InPlace:
		return r.Cwd, nil
	}
	return "", fmt.Errorf("fork %s has no worktree to check; it is not checked in %s instead", r.Label(), r.Cwd)
}

// ensureWorktree gives an agent's fork its own git worktree before its
// first turn (rule 10), from the directory the fork starts from, and
// records it on run. A turn of a fork runs only in that fork's worktree
// (rule 12 in ARCHITECTURE.md): one that is gone (tine worktree rm or
// prune, or deleted by hand) is made again, and when it cannot be, the
// turn is refused; it never falls back to the session's own checkout.
// Only a fork made in place runs there.
func (p *Local) ensureWorktree(ctx context.Context, run *model.Run) error {
	if run.ParentID == "" || run.InPlace {
		return nil
	}
	switch {
	case run.Worktree != "":
		if _, err := os.Stat(run.Worktree); err == nil {
			return nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("fork %s's worktree %s: %w", run.Label(), run.Worktree, err)
		}
		return p.restoreWorktree(ctx, run)
	case run.BaseCommit != "":
		return p.restoreWorktree(ctx, run)
	case run.NativeID != "" || run.OwnMessages > 0:
		return fmt.Errorf("fork %s has run before without a worktree recorded, so tine cannot tell where its files are; it never runs in %s instead: fork it again (tine fork %s)",
			run.Label(), run.Cwd, run.Label())
	}
	// The branch is named after the one checked out where the fork starts
	// (its HEAD is what the fork is made from), not the one the transcript
	// recorded, which the person may have left since.
	_, branch, err := worktree.Repo(ctx, run.Cwd)
	if err != nil {
		return fmt.Errorf("the fork's directory: %w", err)
	}
	var wt worktree.Worktree
	if from, ok := place.FromElsewhere(ctx, p.store, *run); ok {
		// Its parent's files were in a container: they are its branch.
		wt, err = worktree.ForkAt(ctx, worktree.Spec{Source: run.Cwd, Root: p.Root(), Branch: from}, "refs/heads/"+from, "")
	} else {
		wt, err = worktree.Create(ctx, worktree.Spec{Source: run.Cwd, Root: p.Root(), Branch: branch})
	}
	if err != nil {
		return fmt.Errorf("making the fork's worktree from %s: %w", run.Cwd, err)
	}
	if err := p.store.SetWorktree(context.WithoutCancel(ctx), run.ID, wt.Path, wt.Branch, wt.Base, wt.Start); err != nil {
		return err
	}
	run.Worktree, run.Branch, run.BaseCommit, run.StartTree = wt.Path, wt.Branch, wt.Base, wt.Start
	return nil
}

// restoreWorktree makes fork run's worktree again, now that it is gone:
// from its branch, or from its base commit and the files it started with
// (worktree.Restore), and notes that it did. It says why it cannot.
func (p *Local) restoreWorktree(ctx context.Context, run *model.Run) error {
	bg := context.WithoutCancel(ctx)
	gone := func(err error) error {
		return fmt.Errorf("fork %s's worktree is gone (removed by tine worktree rm or prune, or by hand) and could not be made again; it never runs in %s instead (fork %s again, or free its branch %s): %w",
			run.Label(), run.Cwd, run.Label(), run.Branch, err)
	}
	repo, err := p.repoOf(bg, *run)
	if err != nil {
		return gone(err)
	}
	had, err := worktree.BranchHasCommits(ctx, repo, run.Branch, run.BaseCommit)
	if err != nil {
		return gone(err)
	}
	wt, err := worktree.Restore(ctx, worktree.Spec{Source: repo, Root: p.Root()},
		worktree.Worktree{Branch: run.Branch, Base: run.BaseCommit, Start: run.StartTree})
	if err != nil {
		return gone(err)
	}
	if err := p.store.SetWorktree(bg, run.ID, wt.Path, wt.Branch, wt.Base, wt.Start); err != nil {
		return err
	}
	from := "its base commit, holding the files it started with"
	if had {
		from = "branch " + wt.Branch
	}
	_ = p.store.AddNote(bg, run.ID, "its worktree was gone; tine made it again from "+from)
	run.Worktree, run.Branch, run.BaseCommit, run.StartTree = wt.Path, wt.Branch, wt.Base, wt.Start
	return nil
}

// repoOf is a directory of the repository fork run's worktree belongs to:
// the directory it was made from, or, when that is gone (its parent's
// worktree, removed too), an ancestor's.
func (p *Local) repoOf(ctx context.Context, run model.Run) (string, error) {
	r := run
	for {
		for _, dir := range []string{r.Cwd, r.Worktree} {
			if dir == "" {
				continue
			}
			if _, _, err := worktree.Repo(ctx, dir); err == nil {
				return dir, nil
			}
		}
		if r.ParentID == "" {
			return "", fmt.Errorf("%s, the directory it was made from, is not a git work tree any more", run.Cwd)
		}
		parent, err := p.store.Run(ctx, r.ParentID)
		if err != nil {
			return "", err
		}
		r = parent
	}
}

// AgentDir is where an agent works on run: its worktree, at the place the
// run's cwd has in its repository, else its cwd.
func AgentDir(run model.Run) string {
	if run.Worktree == "" {
		return run.Cwd
	}
	top, _, err := worktree.Repo(context.Background(), run.Cwd)
	if err != nil {
		return run.Worktree
	}
	if rel, err := filepath.Rel(top, run.Cwd); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
		return filepath.Join(run.Worktree, rel)
	}
	return run.Worktree
}

// WorkDir is the directory an agent's forks of parent start from: the
// parent's worktree, else its cwd. Unless inPlace, it must be in a git
// repository, so that each fork gets a worktree of its own (rule 10); a
// directory that is not, or is gone, is said plainly before anything runs.
func WorkDir(ctx context.Context, parent model.Run, inPlace bool) (string, error) {
	dir := parent.Worktree
	if dir == "" {
		dir = parent.Cwd
	}
	if dir == "" {
		return "", fmt.Errorf("run %s has no working directory recorded, so its agent has nowhere to run", parent.Label())
	}
	_, _, err := worktree.Repo(ctx, dir)
	switch {
	case errors.Is(err, worktree.ErrMissing):
		return "", fmt.Errorf("run %s worked in %s, which no longer exists", parent.Label(), dir)
	case err != nil && inPlace:
		return dir, nil
	case errors.Is(err, worktree.ErrNotRepo):
		return "", fmt.Errorf("run %s worked in %s, which is not a git repository, so its forks cannot get worktrees of their own: pass --in-place to run them there, sharing it", parent.Label(), dir)
	case err != nil:
		return "", err
	}
	return dir, nil
}
