package main

import (
	"context"
	"fmt"
	"os"

	"tine/harness/fork"
	"tine/model"
)

// cmdRun gives a run its next turn: a pending fork its first, a fork tine
// made its next (resuming its own session), any other run a fork at its end.
func cmdRun(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "run", "RUN -m MSG [--harness NAME] [--max-tokens N] [--max-cost USD] [--on docker] [--wait] [--json]",
		"Give RUN its next turn. A pending fork gets its first; a fork tine made and ran gets\n"+
			"its next one, in the agent's own session; any other run (an agent's session on this\n"+
			"machine) is never written to: it is forked at its end and the fork gets the turn.\n"+
			"--harness with another agent hands the conversation over (a new session that gets the\n"+
			"transcript as its first message).\n"+
			"A fork keeps the budget it was given (--max-tokens, --max-cost: a bound on all it spends\n"+
			"of its own) for its later turns; given here, it replaces it.\n"+
			"A fork keeps where its turns run (its worktree here, or its container: --on docker); --on\n"+
			"says where a new fork made for the turn runs (default: where RUN ran, or TINE_ON).")
	msg := f.String("m", "", "the `message`")
	hname := f.String("harness", "", "the `harness` (default: the run's own)")
	f.oneOf("harness", harnessNames()...)
	var tf turnFlags
	tf.register(f)
	var bf budgetFlags
	bf.register(f)
	var pf placeFlags
	pf.register(f)
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	budget, err := bf.budget("run")
	if err != nil {
		return err
	}
	on, popts, err := pf.opts("run")
	if err != nil {
		return err
	}
	st, run, d, err := tf.open(ctx, e, pos[0])
	if err != nil {
		return err
	}
	defer st.Close()
	// Refused before NextTurnRun, which may make a fork for the turn.
	h := *hname
	if h == "" {
		h = run.Harness
	}
	// An agent that runs in a container needs its program there, not here.
	if run.OnThisMachine() && on == "" {
		if err := cliMissing(d.Harnesses, h, os.Getenv); err != nil {
			return err
		}
	}
	if *msg == "" {
		if err := nothingToAnswer(ctx, st, run); err != nil {
			return err
		}
	}
	if !budget.IsZero() {
		// Refused before NextTurnRun makes a fork it could not keep.
		// The turn goes to run itself or to a fork at its end, with its
		// model when the agent is the same.
		modelName := ""
		if h == run.Harness {
			modelName = run.Model
		}
		hh, err := d.Harnesses.Get(h)
		if err != nil {
			return err
		}
		if err := fork.CheckBudget(budget, hh, modelName); err != nil {
			return err
		}
	}
	target, err := d.NextTurnRun(ctx, run.ID, *hname, fork.Where{On: on, Opts: popts})
	if err != nil {
		return err
	}
	if !budget.IsZero() {
		if err := d.SetBudget(ctx, target.ID, budget); err != nil {
			return err
		}
		target.Budget = budget
	}
	// A fork that has spent its budget starts no other turn.
	if err := d.Spent(ctx, target); err != nil {
		return fmt.Errorf("%s: %w", model.SafeText(target.Label()), err)
	}
	if target.ID != run.ID && !tf.asJSON {
		fmt.Fprintf(e.stderr, "tine: %s is not written to; its next turn goes to a new fork, %s\n", model.SafeText(run.Label()), model.SafeText(target.Label()))
	}
	return tf.run(ctx, e, st, d, []fork.Turn{{RunID: target.ID, Input: *msg}}, []model.Run{target})
}
