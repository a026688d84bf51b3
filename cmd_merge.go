package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"tine/harness/fork"
	"tine/harness/merge"
	"tine/model"
)

// mergeJSON is what `tine merge --json` prints: the merge, the run that
// got its turn (as tine run prints it), the message it was given, and
// what --apply brought home.
type mergeJSON struct {
	Merge struct {
		ID    int64    `json:"id"`
		Run   string   `json:"run"`
		At    int      `json:"at"`
		Forks []string `json:"forks"`
	} `json:"merge"`
	Forks   []forkJSON    `json:"forks"`
	Message string        `json:"message"`
	Applied *fork.Applied `json:"applied"`
}

// dryRunJSON is what `tine merge --dry-run --json` prints: the run that
// would get the merge, the forks in the message's order, the message.
type dryRunJSON struct {
	DryRun  bool     `json:"dry_run"`
	Run     string   `json:"run"`
	Forks   []string `json:"forks"`
	Message string   `json:"message"`
}

// cmdMerge brings what forks found into the conversation they came from:
// one new turn of the parent (or --into), whose message carries a digest
// of each fork (harness/merge).
func cmdMerge(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "merge", "FORK... [--into RUN] [--summary TEXT] [--summarize] [--apply [--commit]] [--edit] [--dry-run] [--wait] [--json]",
		"Bring what forks found home: their parent (or --into RUN, a run of the same conversation)\n"+
			"gets one new turn, through its own agent, as tine run gives one: in its own session when\n"+
			"tine made it; an agent's session of yours is never written to, so there the turn goes to a\n"+
			"new fork at its end. The turn's message carries a digest of each fork: what it was asked,\n"+
			"where it branched, the files it changed, the commands it ran and how they ended, its\n"+
			"check, what it spent and its final answer. Several forks are a best-of-N: the one marked\n"+
			"best comes first, then what each other tried and why it lost. The turn's spending is the\n"+
			"run's; --summarize's turns are the forks'. Files come home only with --apply.")
	into := f.String("into", "", "the `run` that gets the merge (default: the forks' parent)")
	note := f.String("summary", "", "your own words about the forks (`TEXT`), put in the merge's message before their digests")
	summarize := f.Bool("summarize", false, "first ask each fork's agent for a short summary of what it found, in one more turn of the fork (its spending, shown as such; these run in the foreground)")
	apply := f.Bool("apply", false, "also bring the (one) fork's files into the checkout they came from, the merged run's, as tine apply does: refused, changing nothing, when they clash")
	commit := f.Bool("commit", false, "with --apply: as one commit naming the fork")
	edit := f.Bool("edit", false, "read and edit the merge's message in $EDITOR (else $VISUAL, else vi) before it is sent; an empty file sends nothing")
	dry := f.Bool("dry-run", false, "print the merge's message and change nothing")
	var tf turnFlags
	tf.register(f)
	refs, err := f.parse(args, 1, fork.MaxForks)
	if err != nil {
		return err
	}
	switch {
	case *commit && !*apply:
		return usagef("merge: --commit goes with --apply")
	case *dry && (*apply || *summarize || *edit):
		return usagef("merge: --dry-run changes nothing: it takes no --apply, --summarize or --edit")
	}
	open := e.openToWrite
	if *dry {
		open = e.open // it only reads
	}
	st, err := open()
	if err != nil {
		return err
	}
	defer st.Close()
	var forks []model.Run
	for _, ref := range refs {
		r, err := st.Resolve(ctx, ref)
		if err != nil {
			return err
		}
		forks = append(forks, r)
	}
	intoID := ""
	if *into != "" {
		r, err := st.Resolve(ctx, *into)
		if err != nil {
			return err
		}
		intoID = r.ID
	}
	d, err := newDriver(st, false, tf.api, tf.ag)
	if err != nil {
		return err
	}
	plan, err := merge.Prepare(ctx, st, forks, intoID)
	if err != nil {
		return err
	}
	plan.Note = *note
	if *apply {
		if err := plan.CanApply(); err != nil {
			return err
		}
		plan.Applied = plan.Forks[0].Run.Label()
	}
	if *dry {
		if !tf.asJSON {
			fmt.Fprint(e.stdout, plan.Prompt())
			return nil
		}
		out := dryRunJSON{DryRun: true, Run: plan.Into.ID, Message: plan.Prompt()}
		for _, fk := range plan.Forks {
			out.Forks = append(out.Forks, fk.Run.ID)
		}
		return writeJSON(e.stdout, out)
	}
	// Refused before anything runs or changes: the run's agent, its
	// budget, and the forks' agents for their summaries.
	if err := cliMissing(d.Harnesses, plan.Into.Harness, os.Getenv); err != nil {
		return err
	}
	if err := d.Spent(ctx, plan.Into); err != nil {
		return fmt.Errorf("%s: %w", model.SafeText(plan.Into.Label()), err)
	}
	if *summarize {
		if err := summarizeForks(ctx, e, d, st, &plan); err != nil {
			return err
		}
	}
	prompt := plan.Prompt()
	if *edit {
		if prompt, err = editText(ctx, prompt); err != nil {
			return err
		}
	}
	var applied *fork.Applied
	if *apply {
		a, err := plan.Apply(ctx, *commit)
		if err != nil {
			return fmt.Errorf("%w; nothing was merged", err)
		}
		applied = &a
		if !tf.asJSON {
			fmt.Fprintln(e.stdout, a.Summary())
		}
	}
	target, m, err := merge.Start(ctx, d, st, plan)
	if err != nil {
		return err
	}
	if target.ID != plan.Into.ID && !tf.asJSON {
		fmt.Fprintf(e.stderr, "tine: %s is not written to; the merge goes to a new fork at its end, %s (the TUI's o opens it in its agent)\n",
			model.SafeText(plan.Into.Label()), model.SafeText(target.Label()))
	}
	runs := []model.Run{target}
	if err := driveTurns(ctx, e, st, d, []fork.Turn{{RunID: target.ID, Input: prompt}}, runs, tf.wait, tf.api, tf.ag); err != nil {
		return err
	}
	if tf.asJSON {
		var out mergeJSON
		out.Merge.ID, out.Merge.Run, out.Merge.At, out.Merge.Forks = m.ID, m.RunID, m.At, m.Forks
		out.Forks, out.Message, out.Applied = []forkJSON{toForkJSON(runs[0])}, prompt, applied
		if err := writeJSON(e.stdout, out); err != nil {
			return err
		}
	} else {
		names := make([]string, len(plan.Forks))
		for i, fk := range plan.Forks {
			names[i] = model.OneLine(fk.Run.Label(), 40)
		}
		fmt.Fprintf(e.stdout, "merged %s into %s: its message %d carries their digests\n", model.List(names),
			model.SafeText(target.Label()), m.At+1)
		printForks(e.stdout, runs)
		if !tf.wait {
			fmt.Fprintln(e.stdout, "The turn runs in the background; watch it with: tine ls (or in the TUI)")
		}
	}
	if ctx.Err() != nil {
		return errors.New("cancelled: what the turn had streamed is kept, and it is recorded as cancelled")
	}
	return failedForks(runs)
}

// summarizeForks asks each fork of plan for its own summary, in one more
// turn of the fork (run here, as the merge waits for them), and puts
// each in its digest. A summary turn that fails stops the merge; what
// the forks spent stays theirs.
func summarizeForks(ctx context.Context, e *env, d *fork.Driver, st merge.Store, plan *merge.Plan) error {
	var turns []fork.Turn
	var runs []model.Run
	for _, fk := range plan.Forks {
		if err := cliMissing(d.Harnesses, fk.Run.Harness, os.Getenv); err != nil {
			return err
		}
		// A fork that has spent its budget starts no other turn.
		if err := d.Spent(ctx, fk.Run); err != nil {
			return fmt.Errorf("--summarize: %s: %w", model.SafeText(fk.Run.Label()), err)
		}
	}
	for _, fk := range plan.Forks {
		t, r, err := merge.SummaryTurn(ctx, d, fk.Run)
		if err != nil {
			return fmt.Errorf("--summarize: %s: %w", model.SafeText(fk.Run.Label()), err)
		}
		turns, runs = append(turns, t), append(runs, r)
	}
	at := make([]int, len(runs))
	for i, r := range runs {
		at[i] = r.Len()
	}
	done := d.RunTurns(ctx, turns, forkProgress(e, runs))
	if ctx.Err() != nil {
		return errors.New("cancelled while the forks summed up; nothing was merged")
	}
	byID := map[string]model.Run{}
	for _, r := range done {
		byID[r.ID] = r
	}
	for i := range plan.Forks {
		r, ok := byID[runs[i].ID]
		if !ok {
			return fmt.Errorf("--summarize: %s vanished", model.SafeText(runs[i].Label()))
		}
		text, spent, err := merge.Summary(ctx, st, r, at[i])
		if err != nil {
			return fmt.Errorf("--summarize: %w; nothing was merged", err)
		}
		plan.Forks[i].Summary, plan.Forks[i].SummaryRun, plan.Forks[i].SummarySpent = text, r.Label(), spent
	}
	return nil
}

// maxEdited bounds the message a person edits: a message bigger than
// this is refused, not sent.
const maxEdited = 4 * merge.MaxPrompt

// editText opens text in the person's editor ($EDITOR, else $VISUAL,
// else vi; split on spaces, no shell) on this terminal and returns what
// they saved, made safe: an empty file is a refusal, sending nothing.
func editText(ctx context.Context, text string) (string, error) {
	dir, err := os.MkdirTemp("", "tine-merge-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "merge.md")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		return "", err
	}
	var argv []string
	for _, v := range []string{"EDITOR", "VISUAL"} {
		if argv = strings.Fields(os.Getenv(v)); len(argv) > 0 {
			break
		}
	}
	if len(argv) == 0 {
		argv = []string{"vi"}
	}
	cmd := exec.CommandContext(ctx, argv[0], append(argv[1:], file)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("--edit: %s: %w; nothing was merged", model.SafeText(strings.Join(argv, " ")), err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	switch {
	case strings.TrimSpace(string(b)) == "":
		return "", errors.New("--edit: the message was left empty; nothing was merged")
	case len(b) > maxEdited:
		return "", fmt.Errorf("--edit: the message is %d bytes, more than the %d a merge sends; nothing was merged", len(b), maxEdited)
	}
	return model.SafeText(string(b)), nil
}
