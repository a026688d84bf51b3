package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"tine/harness"
	"tine/harness/place"
	"tine/harness/worktree"
	"tine/model"
	"tine/store"
)

// gcJSON is what `tine gc --json` prints.
type gcJSON struct {
	DryRun bool `json:"dry_run"`
	// Tapes are the runs whose tapes were (or would be) removed.
	Tapes     []string `json:"tapes"`
	TapeSteps int      `json:"tape_steps"`
	TapeBytes int64    `json:"tape_bytes"`
	Worktrees []string `json:"worktrees"`
	Kept      []string `json:"kept"` // worktrees of runs that are gone, kept for their uncommitted work
	// Recent are worktrees no run holds yet, made too lately to tell
	// from one a fork is being given (worktree.Settle): left alone.
	Recent     []string `json:"recent"`
	BytesFreed int64    `json:"bytes_freed"`
	Note       string   `json:"note,omitempty"`
	// Containers and Images are what forks that ran in containers left
	// on their daemons that nothing needs (place/docker: Collect), and
	// Stopped the containers running with no turn (its owner died).
	Containers []string `json:"containers"`
	Images     []string `json:"images"`
	Stopped    int      `json:"stopped"`
}

func cmdGC(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "gc", "[--tapes-older-than 30d] [--dry-run] [--json]",
		"Remove what tine no longer needs: the tapes of runs that ended longer ago than\n"+
			"--tapes-older-than (such a run can no longer be replayed from its tape), the\n"+
			"worktrees of runs that are gone (one with uncommitted work is kept, and listed), and\n"+
			"the database's free space. --dry-run says what it would remove, and removes nothing.")
	older := f.String("tapes-older-than", "30d", "remove the tapes of runs that ended longer ago than this (30d, 12h, 90m)")
	dry := f.Bool("dry-run", false, "say what would be removed; remove nothing")
	asJSON := f.Bool("json", false, "print JSON")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	age, err := parseAge(*older)
	if err != nil {
		return usagef("gc: --tapes-older-than: %v", err)
	}
	open := e.openToWrite
	if *dry {
		open = e.open
	}
	st, err := open()
	if err != nil {
		return err
	}
	defer st.Close()
	out := gcJSON{DryRun: *dry, Tapes: []string{}, Worktrees: []string{}, Kept: []string{}, Recent: []string{},
		Containers: []string{}, Images: []string{}}
	tapes, err := st.OldTapes(ctx, time.Now().Add(-age))
	if err != nil {
		return err
	}
	for _, t := range tapes {
		out.Tapes = append(out.Tapes, t.RunID)
		out.TapeSteps += t.Steps
		out.TapeBytes += t.Bytes
	}
	// Another gc, or a prune, removing worktrees waits (and this one for
	// it), so that two never remove one worktree.
	root := worktreesOf(st)
	unlock, err := worktree.LockRoot(ctx, root)
	if err != nil {
		return err
	}
	defer unlock()
	// A fork's worktree is made before its run records it: one made too
	// lately to tell from such a one is left alone, and which runs hold
	// one is read after the folders are, so a worktree recorded meanwhile
	// is held.
	var dirs []string
	found, _ := filepath.Glob(filepath.Join(root, "*", "*"))
	for _, d := range found {
		made, ok := worktree.Made(d)
		switch {
		case !ok:
			// Being added by git now, or no worktree of tine's.
		case time.Since(made) < worktree.Settle:
			out.Recent = append(out.Recent, d)
		default:
			dirs = append(dirs, d)
		}
	}
	held, err := st.Worktrees(ctx)
	if err != nil {
		return err
	}
	recent := out.Recent[:0]
	for _, d := range out.Recent {
		if !held[d] {
			recent = append(recent, d)
		}
	}
	out.Recent = recent
	for _, d := range dirs {
		if info, err := os.Stat(d); err != nil || !info.IsDir() || held[d] {
			continue
		}
		unsaved, err := worktree.Unsaved(ctx, worktree.Worktree{Path: d})
		switch {
		case err != nil:
			continue // not a worktree of tine's: left alone
		case unsaved > 0:
			out.Kept = append(out.Kept, d)
		default:
			out.Worktrees = append(out.Worktrees, d)
		}
	}
	before := dbSize(st.Path())
	if !*dry {
		if err := st.DeleteTapes(ctx, out.Tapes); err != nil {
			return err
		}
		for i, d := range out.Worktrees {
			// The branch stays: it may hold commits, and its run is gone.
			if err := worktree.Remove(ctx, worktree.Worktree{Path: d}, false); err != nil {
				out.Worktrees = out.Worktrees[:i]
				return fmt.Errorf("gc: %w", err)
			}
		}
		if err := st.Compact(ctx); err != nil {
			out.Note = model.OneLine(err.Error(), 200)
		}
	}
	if err := collectPlaces(ctx, st, *dry, &out); err != nil {
		out.Note = strings.TrimSpace(out.Note + " " + model.OneLine(err.Error(), 200))
	}
	if !*dry {
		out.BytesFreed = max(before-dbSize(st.Path()), 0)
	}
	if *asJSON {
		return writeJSON(e.stdout, out)
	}
	verb, tapesVerb := "removed", "removed"
	if *dry {
		verb, tapesVerb = "would remove", "would remove"
	}
	fmt.Fprintf(e.stdout, "%s the tapes of %s that ended over %s ago (%s, %s)\n", tapesVerb, plural(len(out.Tapes), "run"), *older, plural(out.TapeSteps, "step"), mb(out.TapeBytes))
	fmt.Fprintf(e.stdout, "%s %s of runs that are gone\n", verb, plural(len(out.Worktrees), "worktree"))
	for _, d := range out.Worktrees {
		fmt.Fprintf(e.stdout, "  %s\n", model.SafeText(d))
	}
	for _, d := range out.Kept {
		fmt.Fprintf(e.stdout, "kept %s: its run is gone, but it holds uncommitted work (remove it by hand when it is not needed)\n", model.SafeText(d))
	}
	for _, d := range out.Recent {
		fmt.Fprintf(e.stdout, "kept %s: no run holds it yet, but it was made under %s ago (a fork may be being given it)\n",
			model.SafeText(d), strings.TrimSuffix(strings.TrimSuffix(worktree.Settle.String(), "0s"), "0m"))
	}
	if len(out.Containers)+len(out.Images) > 0 {
		fmt.Fprintf(e.stdout, "%s %s and %s that forks in containers left and nothing needs\n", verb,
			plural(len(out.Containers), "container"), plural(len(out.Images), "batch image"))
		for _, c := range append(out.Containers, out.Images...) {
			fmt.Fprintf(e.stdout, "  %s\n", model.SafeText(c))
		}
	}
	if out.Stopped > 0 {
		fmt.Fprintf(e.stdout, "stopped %s running with no turn (their owner died)\n", plural(out.Stopped, "container"))
	}
	if !*dry {
		fmt.Fprintf(e.stdout, "freed %s of the database\n", mb(out.BytesFreed))
	}
	if out.Note != "" {
		fmt.Fprintln(e.stdout, out.Note)
	}
	return nil
}

// collectPlaces asks each place other than this machine that the store's
// forks ran in to stop what runs with no turn and remove what nothing
// needs (place/docker: Reap, Collect). A daemon that does not answer is
// said in the note, not an error: what is here was collected.
func collectPlaces(ctx context.Context, st *store.Store, dry bool, out *gcJSON) error {
	runs, err := st.Runs(ctx)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	ps := places(st, backends(harness.Setup{}, true), worktreesOf(st))
	var errs []error
	for _, r := range runs {
		if r.Place == "" || seen[r.Place] {
			continue
		}
		seen[r.Place] = true
		pl, err := ps.Get(r.Place, nil)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c, ok := pl.(place.Collector)
		if !ok {
			continue
		}
		if !dry {
			n, err := c.Reap(ctx)
			out.Stopped += n
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", r.Place, err))
				continue
			}
		}
		got, err := c.Collect(ctx, dry)
		out.Containers = append(out.Containers, got.Containers...)
		out.Images = append(out.Images, got.Images...)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.Place, err))
		}
	}
	return errors.Join(errs...)
}

// parseAge reads an age: a Go duration, or a number of days ("30d").
func parseAge(s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseFloat(d, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%q is no number of days", s)
		}
		return time.Duration(n * 24 * float64(time.Hour)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is no age (30d, 12h, 90m)", s)
	}
	return d, nil
}

// dbSize is the database's size on disk, its log included.
func dbSize(path string) int64 {
	var n int64
	for _, p := range []string{path, path + "-wal"} {
		if info, err := os.Stat(p); err == nil {
			n += info.Size()
		}
	}
	return n
}

func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }
