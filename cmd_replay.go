package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"tine/harness/fork"
	"tine/harness/turns"
	"tine/internal/service"
	"tine/model"
	"tine/replay"
	"tine/store"
)

type replayJSON = service.Replay

func cmdReplay(ctx context.Context, e *env, args []string) (err error) {
	f := newFlags(e, "replay", "RUN --at-step N [--continuations K] [--on-divergence stop|live] [--base REV] [--check CMD] [--max-tokens N] [--max-cost USD] [--wait] [--json]",
		"Rebuild the world of a recorded run at step N and fork it there. In a fresh worktree at the\n"+
			"run's base commit, the run's own agent is started as it was and answered from the run's\n"+
			"tape for steps 1..N, so it runs every tool call again for real; each request is checked\n"+
			"against the tape, and the first difference is reported as a divergence of kind model,\n"+
			"tool, network or tree. Then each of K continuations goes live from step N (K = 0 only\n"+
			"verifies). Runs are recorded with `tine fork|run --record`. --max-tokens and --max-cost\n"+
			"give each continuation a budget: one that goes over is stopped and recorded failed. Where\n"+
			"bubblewrap is installed (Linux) the agent runs in a sandbox: no network but tine's gateway, no\n"+
			"writes but its worktree and its own state, no credential in its environment; elsewhere, or with\n"+
			"TINE_REPLAY_SANDBOX=off, each replay says what holds it instead (README: Isolation).")
	at := f.Int("at-step", 0, "the step `N` to rebuild (1..the tape's length)")
	k := f.Int("continuations", 1, "how many live continuations (`K`, 0-10); 0 only verifies that the run reproduces to step N")
	onDiv := f.String("on-divergence", "stop", "at the first divergence: stop, or go live from there")
	f.oneOf("on-divergence", string(replay.Stop), string(replay.Live))
	base := f.String("base", "", "the commit (`REV`) the sandbox starts at (default: the run's recorded base; needed for a run tine did not start)")
	check := f.String("check", "", "a shell `command` run in each finished continuation's worktree; A/A then compares its result with the original's")
	score := f.String("score", "exit", "how --check scores: exit or number")
	f.oneOf("score", "exit", "number")
	// The TUI's replay (tuiBackground): its events go back on a pipe, and
	// how it ended: why it could not run, or Execute's error; not a
	// divergence, which is its result.
	events := eventsFlag(f)
	defer func() { events.End(err) }()
	var tf turnFlags
	tf.register(f)
	var bf budgetFlags
	bf.register(f)
	trials := f.String("trials", "", "")
	ackFD := ackFlag(f)
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	// The background half tells the command that started it once the
	// trials are its own (handOver), or why they cannot be.
	ack := turns.OpenAck(*ackFD)
	defer func() { ack.Done(err) }()
	budget, err := bf.budget("replay")
	if err != nil {
		return err
	}
	req := service.ReplayRequest{Run: pos[0], AtStep: *at, Continuations: *k, OnDivergence: *onDiv, Base: *base,
		Check: *check, CheckNumber: *score == "number", Budget: budget, How: service.How{Wait: tf.wait, Progress: events.Put}}
	if err := req.Valid(); err != nil {
		return cliError(err)
	}
	st, d, err := tf.open(e)
	if err != nil {
		return err
	}
	defer st.Close()
	rp := newReplayer(st, d, tf.ag)
	svc := tf.service(st, d)
	svc.Replayer = rp
	var out service.Replay
	if *trials != "" { // the background half: the trials exist
		run, err := st.Resolve(ctx, pos[0])
		if err != nil {
			return err
		}
		plan := &replay.Plan{Spec: req.Spec(), Trials: strings.Split(*trials, ",")}
		plan.Spec.Run = run.ID
		if err := st.ClaimTurns(ctx, plan.Trials); err != nil {
			return err
		}
		ack.Done(nil)
		if _, err := rp.Execute(ctx, plan, events.Put); err != nil {
			return err
		}
		if out, err = svc.ReplayReport(ctx, plan.Trials); err != nil {
			return err
		}
	} else {
		if err := rp.Isolation(); err != nil {
			// Said on every replay (README: Isolation).
			fmt.Fprintln(e.stderr, isolationWarning(err))
		}
		done, err := svc.Replay(ctx, req)
		if err != nil {
			return cliError(err)
		}
		out = done.Replay
		if done.Plan == nil { // unreplayed: nothing was made
			if tf.asJSON {
				_ = writeJSON(e.stdout, out)
			}
			return &replay.Unreplayable{Why: out.Reason}
		}
		if !tf.wait {
			if tf.asJSON {
				return writeJSON(e.stdout, out)
			}
			printReplay(e.stdout, out)
			fmt.Fprintln(e.stdout, "The replay runs in the background; watch it with: tine ls (or in the TUI)")
			return nil
		}
	}
	events.End(nil) // what follows reports it
	if tf.asJSON {
		if err := writeJSON(e.stdout, out); err != nil {
			return err
		}
	} else {
		printReplay(e.stdout, out)
	}
	switch {
	case ctx.Err() != nil:
		return errors.New("cancelled: the replay's forks keep what they did")
	case out.Status == string(model.ReplayDiverged):
		return fmt.Errorf("diverged at %s", out.Divergence.Detail)
	case out.Status == string(model.ReplayUnreplayed):
		return fmt.Errorf("the replay could not run: %s", out.Trials[0].Error)
	}
	return nil
}

// newReplayer wires a Replayer to this process's gateway and to the
// model APIs' keys in the environment; TINE_REPLAY_SANDBOX=off runs its
// agents without the sandbox.
func newReplayer(st *store.Store, d *fork.Driver, ag agentFlags) *replay.Replayer {
	gw, err := processGateway.get()
	if err != nil {
		gw = nil
	}
	return &replay.Replayer{Store: st, Driver: d, Gateway: gw, CheckTimeout: ag.checkTimeout,
		Unsandboxed: os.Getenv("TINE_REPLAY_SANDBOX") == "off"}
}

// isolationWarning is the line a replay without a sandbox starts with:
// why there is none, and what then holds the agent.
func isolationWarning(why error) string {
	return "tine replay: warning: " + replay.Unsandboxed(why)
}

func printReplay(w io.Writer, out replayJSON) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FORK\tNAME\tREPLAY\tREPLAYED\tRUN\tA/A\tBRANCH")
	for _, t := range out.Trials {
		aa := "-"
		if t.AA != nil {
			aa = map[bool]string{true: "same", false: "differs"}[*t.AA]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", t.ID[:min(len(t.ID), 8)], model.SafeText(t.Name), t.Status, t.Replayed, t.RunStatus, aa, model.SafeText(t.Branch))
	}
	tw.Flush()
	for _, t := range out.Trials {
		if d := t.Divergence; d != nil {
			fmt.Fprintf(w, "\n%s diverged at %s\n", model.SafeText(t.Name), model.SafeText(d.Detail))
			if d.Diff != "" {
				for _, l := range strings.Split(strings.TrimRight(d.Diff, "\n"), "\n") {
					fmt.Fprintln(w, "    "+model.SafeText(l))
				}
			}
		}
		if t.AAReason != "" {
			fmt.Fprintf(w, "%s: %s\n", model.SafeText(t.Name), model.SafeText(t.AAReason))
		}
	}
}
