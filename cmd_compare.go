package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"tine/harness/worktree"
	"tine/internal/service"
	"tine/model"
)

type comparison = service.Comparison

func cmdCompare(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "compare", "RUN RUN... [--diff] [--json]",
		"Compare runs of one tree from the point where they part: what each said and did,\n"+
			"its steps, tokens, cost and time, the files it changed in its worktree, and its check.")
	withDiff := f.Bool("diff", false, "also print each fork's whole diff against the files it started with (its base commit and the uncommitted work carried over)")
	asJSON := f.Bool("json", false, "print JSON")
	refs, err := f.parse(args, 1, 10)
	if err != nil {
		return err
	}
	st, err := e.open()
	if err != nil {
		return err
	}
	defer st.Close()
	c, err := readService(st).Compare(ctx, refs, *withDiff)
	if err != nil {
		return cliError(err)
	}
	if *asJSON {
		return writeJSON(e.stdout, c)
	}
	writeComparison(e.stdout, c)
	return nil
}

func writeComparison(w io.Writer, c comparison) {
	fmt.Fprintf(w, "%d runs, parting after message %d\n", len(c.Runs), c.ForkPoint)
	for _, r := range c.Runs {
		steps := "steps"
		if r.Steps == 1 {
			steps = "step"
		}
		fmt.Fprintf(w, "\n━━ %s  %s · %d %s · %d tokens", model.SafeText(r.Name), r.Status, r.Steps, steps, r.Usage.Total())
		if r.CostUSD > 0 {
			fmt.Fprintf(w, " · %s", costText(float64(r.CostUSD)))
		}
		if r.Seconds > 0 {
			fmt.Fprintf(w, " · %.1fs", r.Seconds)
		}
		if r.Handoff {
			fmt.Fprint(w, " · handoff")
		}
		if r.Best {
			fmt.Fprint(w, " · ★ best")
			if r.Why != "" {
				fmt.Fprintf(w, " (%s)", r.Why)
			}
		}
		fmt.Fprintln(w)
		if r.Error != "" {
			fmt.Fprintf(w, "   error: %s\n", model.OneLine(r.Error, 0))
		}
		if r.Check != nil {
			fmt.Fprintf(w, "   check: %s", model.OneLine(r.Check.Cmd, 60))
			switch {
			case !r.Check.Ran:
				fmt.Fprint(w, " (not run)")
			case r.Check.Error != "":
				fmt.Fprintf(w, ": %s", model.OneLine(r.Check.Error, 80))
			case r.Check.Score != nil && r.Check.Exit == 0:
				fmt.Fprintf(w, ": exit 0, score %g", *r.Check.Score)
			default:
				fmt.Fprintf(w, ": exit %d", r.Check.Exit)
			}
			fmt.Fprintln(w)
		}
		switch {
		case r.Worktree != "":
			fmt.Fprintf(w, "   %s on %s: %s\n", model.SafeText(r.Worktree), model.SafeText(r.Branch), filesText(r.Files, r.FilesErr))
		case r.Files != nil || r.FilesErr != "":
			fmt.Fprintf(w, "   branch %s (its work, from its container): %s\n", model.SafeText(r.Branch), filesText(r.Files, r.FilesErr))
		}
		for i, m := range r.Own {
			text := strings.TrimSpace(m.PlainText())
			fmt.Fprintf(w, "%4d %-9s %s\n", c.ForkPoint+i+1, m.Role, model.OneLine(text, 160))
		}
		if r.Diff != "" {
			fmt.Fprintln(w)
			fmt.Fprint(w, model.SafeText(r.Diff))
		}
	}
}

// filesText is a fork's diffstat on one line: "3 files, +12 -4: a.go, b.go, …".
func filesText(files []worktree.FileStat, errText string) string {
	if errText != "" {
		return "files unknown: " + errText
	}
	if len(files) == 0 {
		return "no files changed"
	}
	add, del := 0, 0
	names := ""
	for i, f := range files {
		add += f.Added
		del += f.Deleted
		if i < 4 {
			if i > 0 {
				names += ", "
			}
			names += f.Path
		}
	}
	if len(files) > 4 {
		names += ", …"
	}
	noun := "files"
	if len(files) == 1 {
		noun = "file"
	}
	return model.OneLine(fmt.Sprintf("%d %s, +%d -%d: %s", len(files), noun, add, del, names), 200)
}
