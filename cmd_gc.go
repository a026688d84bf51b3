package main

import (
	"context"
	"fmt"
	"strings"

	"tine/harness"
	"tine/harness/fork"
	"tine/harness/worktree"
	"tine/internal/service"
	"tine/model"
)

type gcJSON = service.GC

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
	age, err := service.ParseAge(*older)
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
	// The places forks ran in (a Docker daemon) are asked too.
	d := &fork.Driver{Store: st, WorktreeRoot: worktreesOf(st)}
	d.Places = places(st, backends(harness.Setup{}, true), d.WorktreeRoot)
	out, err := (&service.Service{Store: st, Driver: d}).GC(ctx, service.GCRequest{TapesOlderThan: age, DryRun: *dry})
	if err != nil {
		return err
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

func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }
