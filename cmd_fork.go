package main

import (
	"context"
	"flag"
	"fmt"

	"tine/harness/fork"
	"tine/internal/service"
)

func cmdFork(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "fork", "RUN [-n N] [--name NAME]... [-m MSG]... [--at end|last_user|K|step:N] [--harness NAME] [--check CMD] [--max-tokens N] [--max-cost USD] [--wait] [--json]",
		"Fork RUN at a boundary into N branches. The boundary snaps down to a pair-safe one\n"+
			"(never between a tool call and its result) and the snapping is reported. Forks cost\n"+
			"nothing until used: without -m they are only created. With -m each fork runs its first\n"+
			"turn, in the background, or in the foreground with --wait (Ctrl+C cancels cleanly).\n"+
			"A fork of an agent's session (claude, codex, pi, acp) continues it with that agent,\n"+
			"in a git worktree of its own; --check scores each finished fork and marks the best.\n"+
			"--max-tokens and --max-cost give each fork a budget: one that goes over is stopped and\n"+
			"recorded failed, saying what it spent; what it streamed is kept.")
	n := f.Int("n", 0, "how many forks (1-10; default: one per --name or -m, else 1)")
	var names, msgs stringList
	f.Var(&names, "name", "a fork's `name` (repeat once per fork; default <parent>-fork-<i>)")
	f.Var(&msgs, "m", "the `message` each fork continues with: once for all, or once per fork")
	at := f.String("at", "end", "where to fork: end, last_user, a boundary K, or step:N")
	f.hint("at", "end", "last_user")
	hname := f.String("harness", "", "the `harness` that runs the turns (default: the run's own)")
	f.oneOf("harness", harnessNames()...)
	modelName := f.String("model", "", "the `model` the harness asks for (openai: or OPENAI_MODEL; anthropic: or ANTHROPIC_MODEL)")
	var tf turnFlags
	tf.register(f)
	regenerate := f.Bool("regenerate", false, "fork at last_user and let the model answer again (no -m)")
	replace := f.Bool("replace-original", false, "with --regenerate: hide the source run in views (it stays stored)")
	parallel := f.Int("parallel", 4, "how many turns run at once")
	handoff := f.Bool("handoff", false, "continue with an agent that cannot branch this run's session (another agent, or a point it cannot fork at): a new session whose first message is the transcript so far")
	inPlace := f.Bool("in-place", false, "run agent forks in the run's own directory instead of a git worktree each (for a directory that is not a git repository)")
	check := f.String("check", "", "a shell `command` run in each finished fork's worktree to score it; the best is marked")
	score := f.String("score", "exit", "how --check scores: exit (exit status 0 passes) or number (the number on its output's last line; highest wins)")
	f.oneOf("score", "exit", "number")
	var bf budgetFlags
	bf.register(f)
	var pf placeFlags
	pf.register(f)
	applyBestFork := f.Bool("apply-best", false, "with --check and --wait: when every fork has finished, bring the best one's work into the checkout (as tine apply does)")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	// -n 0 and --parallel 0 are not "the default": the default is the
	// flag left out.
	if given(f, "n") && *n == 0 {
		return usagef("fork: -n is how many forks: 1 to %d, not %d", fork.MaxForks, *n)
	}
	if *parallel == 0 {
		return usagef("fork: --parallel is how many turns run at once: 1 or more, not %d", *parallel)
	}
	budget, err := bf.budget("fork")
	if err != nil {
		return err
	}
	on, popts, err := pf.opts("fork")
	if err != nil {
		return err
	}
	par := *parallel
	if on != "" && !given(f, "parallel") {
		par = 0 // a daemon's --jobs bounds its containers; the rest wait queued
	}
	req := service.ForkRequest{Run: pos[0], N: *n, Messages: msgs, Names: names, At: *at, Harness: *hname, Model: *modelName,
		Regenerate: *regenerate, ReplaceOriginal: *replace, Handoff: *handoff, InPlace: *inPlace, Check: *check,
		CheckNumber: *score == "number", Budget: budget, On: on, Place: popts, ApplyBest: *applyBestFork,
		How: service.How{Wait: tf.wait, Parallel: par}}
	// Said before anything is opened or made.
	if err := req.Valid(); err != nil {
		return cliError(err)
	}
	st, d, err := tf.open(e)
	if err != nil {
		return err
	}
	defer st.Close()
	req.Progress = tf.how(e, st).Progress
	out, err := tf.service(st, d).Fork(ctx, req)
	if err != nil && out.Runs == nil {
		return cliError(err)
	}
	if out.Cut.Reason != "" && !tf.asJSON {
		fmt.Fprintf(e.stderr, "tine: %s\n", out.Cut.Describe())
	}
	if perr := printTurns(ctx, e, out.Runs, out.Turns > 0 && !tf.wait, tf.asJSON); perr != nil || err == nil {
		err = perr
	}
	if out.Applied != nil {
		w := e.stdout
		if tf.asJSON {
			w = e.stderr // stdout holds the forks' JSON
		}
		fmt.Fprintln(w, out.Applied.Summary())
	}
	return err
}

// given says flag name was on the command line.
func given(f *flags, name string) bool {
	was := false
	f.Visit(func(fl *flag.Flag) { was = was || fl.Name == name })
	return was
}
