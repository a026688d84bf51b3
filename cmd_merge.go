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
	"tine/internal/service"
	"tine/model"
)

type (
	mergeJSON  = service.Merge
	dryRunJSON = service.DryRun
)

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
	req := service.MergeRequest{Forks: refs, Into: *into, Note: *note, Summarize: *summarize, Apply: *apply,
		Commit: *commit, DryRun: *dry, How: service.How{Wait: tf.wait}}
	if *edit {
		req.Edit = editText
	}
	if err := req.Valid(); err != nil {
		return cliError(err)
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
	var d *fork.Driver
	if !*dry {
		if d, err = newDriver(st, false, tf.api, tf.ag); err != nil {
			return err
		}
	}
	// --summarize's turns run here, as the merge waits for them.
	req.Progress = forkProgress(e, st)
	out, err := tf.service(st, d).Merge(ctx, req)
	if err != nil {
		return cliError(err)
	}
	if *dry {
		if !tf.asJSON {
			fmt.Fprint(e.stdout, out.Message)
			return nil
		}
		return writeJSON(e.stdout, out.DryRunJSON())
	}
	if out.Applied != nil && !tf.asJSON {
		fmt.Fprintln(e.stdout, out.Applied.Summary())
	}
	target := out.Runs[0]
	if target.ID != out.Plan.Into.ID && !tf.asJSON {
		fmt.Fprintf(e.stderr, "tine: %s is not written to; the merge goes to a new fork at its end, %s (the TUI's o opens it in its agent)\n",
			model.SafeText(out.Plan.Into.Label()), model.SafeText(target.Label()))
	}
	if tf.asJSON {
		if err := writeJSON(e.stdout, out.JSON()); err != nil {
			return err
		}
	} else {
		names := make([]string, len(out.Plan.Forks))
		for i, fk := range out.Plan.Forks {
			names[i] = model.OneLine(fk.Run.Label(), 40)
		}
		fmt.Fprintf(e.stdout, "merged %s into %s: its message %d carries their digests\n", model.List(names),
			model.SafeText(target.Label()), out.Merge.At+1)
		printForks(e.stdout, out.Runs)
		if !tf.wait {
			fmt.Fprintln(e.stdout, "The turn runs in the background; watch it with: tine ls (or in the TUI)")
		}
	}
	if ctx.Err() != nil {
		return errors.New("cancelled: what the turn had streamed is kept, and it is recorded as cancelled")
	}
	return service.FailedForks(out.Runs)
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
