package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"tine/harness"
	"tine/harness/fork"
	"tine/harness/worktree"
	"tine/model"
	"tine/store"
)

// cmdRun gives a run its next turn: a pending fork its first, a fork tine
// made its next (resuming its own session), any other run a fork at its end.
func cmdRun(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "run", "RUN -m MSG [--harness NAME] [--wait] [--json]",
		"Give RUN its next turn. A pending fork gets its first; a fork tine made and ran gets\n"+
			"its next one, in the agent's own session; any other run (an agent's session on this\n"+
			"machine) is never written to: it is forked at its end and the fork gets the turn.\n"+
			"--harness with another agent hands the conversation over (a new session that gets the\n"+
			"transcript as its first message).")
	msg := f.String("m", "", "the `message`")
	hname := f.String("harness", "", "the `harness` (default: the run's own)")
	var tf turnFlags
	tf.register(f)
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	st, run, d, err := tf.open(ctx, e, pos[0])
	if err != nil {
		return err
	}
	defer st.Close()
	target, err := d.NextTurnRun(ctx, run.ID, *hname)
	if err != nil {
		return err
	}
	if target.ID != run.ID && !tf.asJSON {
		fmt.Fprintf(e.stderr, "tine: %s is not written to; its next turn goes to a new fork, %s\n", model.SafeText(run.Label()), model.SafeText(target.Label()))
	}
	return tf.run(ctx, e, st, d, []fork.Turn{{RunID: target.ID, Input: *msg}}, []model.Run{target})
}

// turnFlags are the flags of every command that runs turns: where the
// turns run, how they are printed, the model API's address and key, and
// how agents run.
type turnFlags struct {
	wait, asJSON bool
	api          apiFlags
	ag           agentFlags
}

func (t *turnFlags) register(f *flags) {
	f.BoolVar(&t.wait, "wait", false, "run the turns in the foreground and wait for them")
	f.StringVar(&t.api.baseURL, "base-url", "", "the model API's base `URL` (default OPENAI_BASE_URL or ANTHROPIC_BASE_URL)")
	f.StringVar(&t.api.apiKey, "api-key", "", "the model API's `key` (better: OPENAI_API_KEY or ANTHROPIC_API_KEY, which ps cannot see)")
	t.ag.register(f)
	f.BoolVar(&t.asJSON, "json", false, "print JSON")
}

// open opens the store, resolves ref and makes the driver the flags ask
// for; the caller closes the store.
func (t *turnFlags) open(ctx context.Context, e *env, ref string) (*store.Store, model.Run, *fork.Driver, error) {
	st, err := e.open()
	if err != nil {
		return nil, model.Run{}, nil, err
	}
	run, err := st.Resolve(ctx, ref)
	if err == nil {
		var d *fork.Driver
		if d, err = newDriver(st, false, t.api, t.ag); err == nil {
			return st, run, d, nil
		}
	}
	st.Close()
	return nil, model.Run{}, nil, err
}

// run runs turns as the flags say (runTurns).
func (t *turnFlags) run(ctx context.Context, e *env, st *store.Store, d *fork.Driver, turns []fork.Turn, runs []model.Run) error {
	return runTurns(ctx, e, st, d, turns, runs, t.wait, t.asJSON, t.api, t.ag)
}

// runTurns runs turns (none: the runs were only created) in the
// foreground (wait) or in a background tine, then prints runs as `tine
// fork` does.
func runTurns(ctx context.Context, e *env, st *store.Store, d *fork.Driver, turns []fork.Turn, runs []model.Run,
	wait, asJSON bool, api apiFlags, ag agentFlags) error {
	switch {
	case len(turns) == 0:
	case wait:
		done := d.RunTurns(ctx, turns, forkProgress(e, runs))
		byID := map[string]model.Run{}
		for _, r := range done {
			byID[r.ID] = r
		}
		for i, r := range runs {
			if r2, ok := byID[r.ID]; ok {
				runs[i] = r2
			}
		}
	default:
		if err := startBackgroundTurns(st.Path(), max(d.Parallel, 1), api, ag, turns); err != nil {
			return fmt.Errorf("created, but the turns could not start: %w", err)
		}
		for _, t := range turns {
			for i := range runs {
				if runs[i].ID == t.RunID {
					runs[i].Status = model.Running
				}
			}
		}
	}
	if asJSON {
		out := struct {
			Forks []forkJSON `json:"forks"`
		}{}
		for _, r := range runs {
			out.Forks = append(out.Forks, toForkJSON(r))
		}
		if err := writeJSON(e.stdout, out); err != nil {
			return err
		}
	} else {
		printForks(e.stdout, runs)
		if len(turns) > 0 && !wait {
			fmt.Fprintln(e.stdout, "The turns run in the background; watch them with: tine ls (or in the TUI)")
		}
	}
	if ctx.Err() != nil {
		return errors.New("cancelled: what the forks had streamed is kept, and they are recorded as cancelled")
	}
	return failedForks(runs)
}

// cmdRetry runs a failed fork's first turn again, as a new sibling.
func cmdRetry(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "retry", "RUN [--wait] [--json]",
		"Run a failed or cancelled fork again: a new fork at the same boundary, with the same\nharness, model, check and message. The failed one stays, as history does.")
	var tf turnFlags
	tf.register(f)
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	st, run, d, err := tf.open(ctx, e, pos[0])
	if err != nil {
		return err
	}
	defer st.Close()
	if rs, err := st.Replays(ctx, []string{run.ID}); err == nil {
		if r, ok := rs[run.ID]; ok {
			return fmt.Errorf("%s is a replay of step %d: replay again with: tine replay %s --at-step %d", run.Label(), r.Step, model.ShortID(r.Of), r.Step)
		}
	}
	fresh, input, err := d.PrepareRetry(ctx, run.ID)
	if err != nil {
		return err
	}
	return tf.run(ctx, e, st, d, []fork.Turn{{RunID: fresh.ID, Input: input}}, []model.Run{fresh})
}

// cmdCancel stops running forks, whichever process runs them.
func cmdCancel(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "cancel", "RUN...",
		"Stop a running fork, whichever tine process runs it (the TUI, a background turn, a\n`tine fork --wait` elsewhere): what it streamed so far is kept. A pending fork is\nmarked cancelled.")
	pos, err := f.parse(args, 1, -1)
	if err != nil {
		return err
	}
	st, err := e.open()
	if err != nil {
		return err
	}
	defer st.Close()
	var waiting []model.Run
	for _, ref := range pos {
		r, err := st.Resolve(ctx, ref)
		if err != nil {
			return err
		}
		was, err := st.RequestCancel(ctx, r.ID)
		if err != nil {
			return err
		}
		switch was {
		case model.Running:
			waiting = append(waiting, r)
		case model.Pending:
			fmt.Fprintf(e.stdout, "%s: cancelled before it started\n", model.SafeText(r.Label()))
		default:
			fmt.Fprintf(e.stdout, "%s: already %s; nothing to cancel\n", model.SafeText(r.Label()), was)
		}
	}
	// The owner polls for the request about twice a second; wait a while
	// to say how it ended.
	deadline := time.Now().Add(15 * time.Second)
	for _, r := range waiting {
		for {
			now, err := st.Run(ctx, r.ID)
			if err != nil {
				return err
			}
			if now.Status != model.Running {
				fmt.Fprintf(e.stdout, "%s: %s\n", model.SafeText(r.Label()), now.Status)
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("asked %s to stop, but it is still running (owner process %d)", r.Label(), now.OwnerPID)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// harnessJSON is one harness as `tine harnesses --json` prints it.
type harnessJSON struct {
	Name         string               `json:"name"`
	Installed    bool                 `json:"installed"`
	Path         string               `json:"path"`
	Version      string               `json:"version"`
	Capabilities harness.Capabilities `json:"capabilities"`
	Needs        []string             `json:"needs"`
	Problem      string               `json:"problem,omitempty"`
}

// describeHarnesses says what every registered harness can do here.
func describeHarnesses(ctx context.Context, reg *harness.Registry) []harnessJSON {
	names := reg.Names()
	out := make([]harnessJSON, len(names))
	done := make(chan struct{}, len(names))
	for i, n := range names {
		go func() {
			defer func() { done <- struct{}{} }()
			h, _ := reg.Get(n)
			hj := harnessJSON{Name: n, Capabilities: h.Capabilities(), Installed: true, Needs: []string{}}
			if ds, ok := reg.Describe(ctx, n); ok {
				hj.Installed, hj.Path, hj.Version, hj.Problem = ds.Installed, ds.Path, ds.Version, ds.Problem
				if ds.Needs != nil {
					hj.Needs = ds.Needs
				}
			}
			out[i] = hj
		}()
	}
	for range names {
		<-done
	}
	return out
}

func cmdHarnesses(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "harnesses", "[--json]",
		"List every harness: whether it is installed here (path, version), what it can do\n(fork, fork at a checkpoint, resume, run tools, stream, be recorded and replayed)\nand what it needs.")
	asJSON := f.Bool("json", false, "print JSON")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	hs := describeHarnesses(ctx, backends(harness.Setup{}, true))
	if *asJSON {
		return writeJSON(e.stdout, hs)
	}
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "-"
	}
	tw := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HARNESS\tHERE\tFORK\tAT CHECKPOINT\tRESUME\tTOOLS\tSTREAM\tREPLAY\tVERSION\tNEEDS")
	for _, h := range hs {
		here := "yes"
		if !h.Installed {
			here = "no"
		}
		needs := ""
		for i, n := range h.Needs {
			if i > 0 {
				needs += "; "
			}
			needs += n
		}
		c := h.Capabilities
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", h.Name, here, yes(c.Fork), yes(c.ForkAtK), yes(c.Resume),
			yes(c.Tools), yes(c.Stream), yes(c.Replayable()), model.OneLine(h.Version, 30), model.OneLine(needs, 120))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, h := range hs {
		if h.Problem != "" {
			fmt.Fprintf(e.stdout, "%s: %s\n", h.Name, model.OneLine(h.Problem, 200))
		}
	}
	return nil
}

func cmdWorktree(ctx context.Context, e *env, args []string) error {
	sub := ""
	if len(args) > 0 && (args[0] == "rm" || args[0] == "prune") {
		sub, args = args[0], args[1:]
	}
	f := newFlags(e, "worktree", "rm RUN... [--force] | prune [--all] [--force]",
		"Remove forks' git worktrees. rm removes the named forks' worktrees; prune removes\n"+
			"those of every finished fork but the ones marked best (--all: those too) and lets git\n"+
			"forget worktrees whose folders are gone. A fork's branch is deleted with its worktree\n"+
			"only when it has no commits of its own; --force deletes it anyway.")
	force := f.Bool("force", false, "delete a fork's branch even when it has commits of its own")
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
	st, err := e.open()
	if err != nil {
		return err
	}
	defer st.Close()
	var runs []model.Run
	if sub == "rm" {
		for _, ref := range pos {
			r, err := st.Resolve(ctx, ref)
			if err != nil {
				return err
			}
			if r.Worktree == "" {
				return fmt.Errorf("%s has no worktree", r.Label())
			}
			runs = append(runs, r)
		}
	} else {
		every, err := st.Runs(ctx)
		if err != nil {
			return err
		}
		for _, r := range every {
			if r.Worktree != "" && r.Status != model.Running && r.Status != model.Pending && (*all || !r.Best) {
				runs = append(runs, r)
			}
		}
	}
	var failed error
	for _, r := range runs {
		if r.Status == model.Running {
			return fmt.Errorf("%s is running in its worktree; cancel it first (tine cancel %s)", r.Label(), model.ShortID(r.ID))
		}
		err := worktree.Remove(ctx, r.Worktree, r.Branch, r.BaseCommit, *force)
		kept := errors.Is(err, worktree.ErrHasCommits)
		if err != nil && !kept && !errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(e.stderr, "tine: %s: %s\n", model.SafeText(r.Label()), model.OneLine(err.Error(), 0))
			failed = fmt.Errorf("some worktrees were not removed")
			continue
		}
		if err := st.SetWorktree(ctx, r.ID, "", r.Branch, r.BaseCommit, r.StartTree); err != nil {
			return err
		}
		if kept {
			fmt.Fprintf(e.stdout, "%s: removed %s; kept branch %s, which has commits of its own (--force deletes it)\n",
				model.SafeText(r.Label()), model.SafeText(r.Worktree), model.SafeText(r.Branch))
		} else {
			fmt.Fprintf(e.stdout, "%s: removed %s and branch %s\n", model.SafeText(r.Label()), model.SafeText(r.Worktree), model.SafeText(r.Branch))
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
				_ = worktree.Prune(ctx, r.Cwd)
			}
		}
		if len(runs) == 0 {
			fmt.Fprintln(e.stdout, "No finished fork has a worktree to remove.")
		}
	}
	return failed
}
