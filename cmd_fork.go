package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"tine/harness/fork"
	"tine/model"
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
	if *regenerate {
		if len(msgs) > 0 {
			return usagef("fork: --regenerate lets the model answer again; it takes no -m")
		}
		*at = "last_user"
	} else if *replace {
		return usagef("fork: --replace-original goes with --regenerate")
	}
	// Said before anything is made. -n 0 is not "the default": the
	// default is -n left out.
	nGiven := false
	f.Visit(func(fl *flag.Flag) { nGiven = nGiven || fl.Name == "n" })
	if nGiven && (*n < 1 || *n > fork.MaxForks) {
		return usagef("fork: -n is how many forks: 1 to %d, not %d", fork.MaxForks, *n)
	}
	if err := fork.CheckNames(names); err != nil {
		return usagef("fork: %s", err)
	}
	if *applyBestFork && (*check == "" || !tf.wait) {
		return usagef("fork: --apply-best needs --check (to pick the best) and --wait (to apply it when they finish)")
	}
	if _, err := model.ParseContinueFrom(*at); err != nil {
		return usagef("fork: %s", err)
	}
	if *parallel < 1 {
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
	st, parent, d, err := tf.open(ctx, e, pos[0])
	if err != nil {
		return err
	}
	defer st.Close()
	d.Parallel = *parallel
	parallelGiven := false
	f.Visit(func(fl *flag.Flag) { parallelGiven = parallelGiven || fl.Name == "parallel" })
	if on != "" && !parallelGiven {
		// A daemon's --jobs bounds its containers; the rest wait queued.
		d.Parallel = fork.MaxForks
	}
	if len(msgs) > 0 || *regenerate {
		h := *hname
		if h == "" {
			h = parent.Harness
		}
		if on == "" {
			if err := cliMissing(d.Harnesses, h, os.Getenv); err != nil {
				return err
			}
		}
	}
	forks, cut, err := d.Fork(ctx, fork.ForkSpec{Parent: parent.ID, At: model.ContinueFrom(*at), N: *n,
		Names: names, Messages: msgs, Harness: *hname, Model: *modelName, ReplaceOriginal: *replace,
		Handoff: *handoff, InPlace: *inPlace, Check: *check, CheckNumber: *score == "number", Budget: budget,
		On: on, PlaceOpts: popts})
	if err != nil {
		return err
	}
	if cut.Reason != "" && !tf.asJSON {
		fmt.Fprintf(e.stderr, "tine: %s\n", cut.Describe())
	}
	var turns []fork.Turn
	if len(msgs) > 0 || *regenerate {
		for i, fk := range forks {
			input := ""
			if len(msgs) == 1 {
				input = msgs[0]
			} else if len(msgs) > 1 {
				input = msgs[i]
			}
			turns = append(turns, fork.Turn{RunID: fk.ID, Input: input})
		}
	}
	err = tf.run(ctx, e, st, d, turns, forks)
	if *applyBestFork && ctx.Err() == nil {
		w := e.stdout
		if tf.asJSON {
			w = e.stderr // stdout holds the forks' JSON
		}
		if aerr := applyBest(ctx, st, forks, w); aerr != nil {
			return errors.Join(err, aerr)
		}
	}
	return err
}
