package main

import (
	"context"
	"fmt"

	"tine/internal/service"
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
	st, d, err := tf.open(e)
	if err != nil {
		return err
	}
	defer st.Close()
	out, err := tf.service(st, d).Continue(ctx, service.ContinueRequest{Run: pos[0], Message: *msg, Harness: *hname,
		Budget: budget, On: on, Place: popts, How: tf.how(e, st)})
	if err != nil {
		return cliError(err)
	}
	if out.NewFork && !tf.asJSON {
		fmt.Fprintf(e.stderr, "tine: %s is not written to; its next turn goes to a new fork, %s\n", model.SafeText(out.Asked.Label()), model.SafeText(out.Runs[0].Label()))
	}
	return printTurns(ctx, e, out.Runs, !tf.wait, tf.asJSON)
}
