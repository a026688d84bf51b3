package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"text/tabwriter"

	"tine/harness/fork"
	"tine/harness/turns"
	"tine/model"
	"tine/replay"
	"tine/store"
)

// replayJSON is `tine replay --json`.
type replayJSON struct {
	Fork       *string          `json:"fork"`
	Status     string           `json:"status"`
	Divergence *divergenceJSON  `json:"divergence"`
	Reason     string           `json:"reason,omitempty"`
	Trials     []replayTrialRow `json:"trials"`
}

type divergenceJSON struct {
	Step    int      `json:"step"`
	Kind    string   `json:"kind"`
	Detail  string   `json:"detail"`
	Path    string   `json:"path,omitempty"`
	Fields  []string `json:"fields,omitempty"`
	Taped   string   `json:"taped,omitempty"`
	Actual  string   `json:"actual,omitempty"`
	Diff    string   `json:"diff,omitempty"`
	Closest int      `json:"closest_step,omitempty"`
}

type replayTrialRow struct {
	ID         string          `json:"id"`
	Name       string          `json:"name"`
	Status     string          `json:"status"`
	RunStatus  string          `json:"run_status"`
	Error      string          `json:"error,omitempty"`
	Replayed   int             `json:"replayed"`
	AA         *bool           `json:"aa"`
	AAReason   string          `json:"aa_reason,omitempty"`
	Divergence *divergenceJSON `json:"divergence"`
	Worktree   string          `json:"worktree"`
	Branch     string          `json:"branch"`
	Messages   int             `json:"messages"`
	Check      *checkJSON      `json:"check"`
}

func toDivergenceJSON(d *replay.Divergence) *divergenceJSON {
	if d == nil || d.Mismatch == nil {
		return nil
	}
	return &divergenceJSON{Step: d.Step, Kind: string(d.Kind), Detail: d.Detail(), Path: d.Path, Fields: d.Fields,
		Taped: d.Taped, Actual: d.Actual, Diff: d.Diff, Closest: d.Closest}
}

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
	if *at < 1 {
		return usagef("replay: --at-step N is required (N >= 1)")
	}
	budget, err := bf.budget("replay")
	if err != nil {
		return err
	}
	spec := replay.Spec{AtStep: *at, Continuations: *k, OnDivergence: replay.OnDivergence(*onDiv),
		Base: *base, Check: *check, CheckNumber: *score == "number", Budget: budget}
	if err := spec.Valid(); err != nil {
		return usagef("replay: %s", err)
	}
	st, run, d, err := tf.open(ctx, e, pos[0])
	if err != nil {
		return err
	}
	defer st.Close()
	spec.Run = run.ID
	rp := newReplayer(st, d, tf.ag)
	if err := rp.Isolation(); err != nil && *trials == "" {
		// Said on every replay (README: Isolation).
		fmt.Fprintln(e.stderr, isolationWarning(err))
	}
	var plan *replay.Plan
	if *trials != "" { // the background half: the trials exist
		plan = &replay.Plan{Spec: spec, Trials: strings.Split(*trials, ",")}
		if err := st.ClaimTurns(ctx, plan.Trials); err != nil {
			return err
		}
		ack.Done(nil)
	} else {
		plan, err = rp.Prepare(ctx, spec)
		var un *replay.Unreplayable
		if errors.As(err, &un) {
			if tf.asJSON {
				_ = writeJSON(e.stdout, replayJSON{Status: string(model.ReplayUnreplayed), Reason: un.Why, Trials: []replayTrialRow{}})
			}
			return err
		}
		if err != nil {
			return err
		}
	}
	if !tf.wait {
		if err := startBackgroundReplay(st.Path(), plan.Trials, args); err != nil {
			for _, id := range turns.FailHandOver(ctx, st, plan.Trials, err) {
				_ = st.UpdateReplay(context.WithoutCancel(ctx), id, model.ReplayUnreplayed, 0, "", nil, "its background process never started it")
			}
			return fmt.Errorf("the replay's forks were made, but it could not start (they are marked failed): %w", err)
		}
		out, err := replayReport(ctx, st, plan.Trials)
		if err != nil {
			return err
		}
		if tf.asJSON {
			return writeJSON(e.stdout, out)
		}
		printReplay(e.stdout, out)
		fmt.Fprintln(e.stdout, "The replay runs in the background; watch it with: tine ls (or in the TUI)")
		return nil
	}
	if _, err := rp.Execute(ctx, plan, events.Put); err != nil {
		return err
	}
	events.End(nil) // what follows reports it
	out, err := replayReport(ctx, st, plan.Trials)
	if err != nil {
		return err
	}
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

// replayReport reads the trials as stored.
func replayReport(ctx context.Context, st *store.Store, ids []string) (replayJSON, error) {
	trials, err := replay.Trials(ctx, st, ids)
	if err != nil {
		return replayJSON{}, err
	}
	out := replayJSON{Trials: []replayTrialRow{}}
	for _, t := range trials {
		run, r := t.Run, t.Replay
		out.Trials = append(out.Trials, replayTrialRow{ID: run.ID, Name: run.Name, Status: string(r.Status), RunStatus: string(run.Status),
			Error: run.Error, Replayed: r.Replayed, AA: r.AA, AAReason: r.AAReason, Worktree: run.Worktree, Branch: run.Branch,
			Messages: run.Len(), Check: toCheckJSON(run.Check), Divergence: toDivergenceJSON(t.Divergence)})
	}
	if len(out.Trials) > 0 {
		out.Fork = &out.Trials[0].ID
		out.Status = string(replay.Overall(trials))
		out.Divergence = out.Trials[0].Divergence
	}
	return out, nil
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

// startBackgroundReplay runs the replay's trials in a tine of their own,
// so the command returns while they run, once that tine has claimed them
// (handOver).
func startBackgroundReplay(db string, trials []string, args []string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := backgroundReplay(exe, db, trials, args)
	return turns.HandOver(cmd.Args[1:], cmd.Env, nil)
}

// backgroundReplay is the command of a background replay: this command
// line again, with the trials it made. An --api-key goes by the
// environment, never on the command line (rule 13 in ARCHITECTURE.md), as
// startBackgroundTurns passes it.
func backgroundReplay(exe, db string, trials []string, args []string) *exec.Cmd {
	args, key := withoutAPIKey(args)
	argv := append([]string{"--db", db, "replay"}, args...)
	argv = append(argv, "--wait", "--json", "--trials", strings.Join(trials, ","))
	cmd := exec.Command(exe, argv...)
	cmd.Env = os.Environ()
	if key != "" {
		cmd.Env = append(cmd.Env, "OPENAI_API_KEY="+key, "ANTHROPIC_API_KEY="+key)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return cmd
}

// withoutAPIKey is args without --api-key and its value (in any of the
// forms the flag package reads), and that value.
func withoutAPIKey(args []string) (rest []string, key string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(rest, args[i:]...), key
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "api-key" {
			rest = append(rest, a)
			continue
		}
		if !hasVal && i+1 < len(args) {
			i++
			val = args[i]
		}
		key = val
	}
	return rest, key
}
