package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"tine/harness/fork"
	"tine/harness/worktree"
	"tine/model"
	"tine/store"
)

// comparison is runs of one tree laid side by side from where they part.
type comparison struct {
	ForkPoint int             `json:"fork_point"`
	Runs      []comparedRunJS `json:"runs"`
}

type comparedRunJS struct {
	ID       string      `json:"id"`
	Name     string      `json:"name"`
	Status   string      `json:"status"`
	Error    string      `json:"error,omitempty"`
	Steps    int         `json:"steps"`
	Usage    model.Usage `json:"usage"`
	CostUSD  usd         `json:"cost_usd"`
	Seconds  float64     `json:"seconds"`
	Best     bool        `json:"best,omitempty"`
	Why      string      `json:"best_reason,omitempty"`
	Harness  string      `json:"harness"`
	Handoff  bool        `json:"handoff,omitempty"`
	Worktree string      `json:"worktree,omitempty"`
	Branch   string      `json:"branch,omitempty"`
	// Files is what the fork changed in its worktree against the files it
	// started with (the commit it was made from and the uncommitted work
	// carried over); null when it has no worktree.
	Files    []worktree.FileStat `json:"files"`
	FilesErr string              `json:"files_error,omitempty"`
	Check    *checkJSON          `json:"check"`
	Diff     string              `json:"diff,omitempty"`
	Messages []messageJSON       `json:"messages"`
	messages []model.Message
}

// compareRuns loads runs (refs as people type them) and cuts each at the
// prefix they all share.
func compareRuns(ctx context.Context, st *store.Store, refs []string, withDiff bool) (comparison, error) {
	var c comparison
	var runs []model.Run
	for _, ref := range refs {
		r, err := st.Resolve(ctx, ref)
		if err != nil {
			return c, err
		}
		runs = append(runs, r)
	}
	tree, err := st.TreeRuns(ctx, runs[0].TreeID)
	if err != nil {
		return c, err
	}
	roots := model.BuildTrees(tree)
	var nodes []*model.Node
	for _, r := range runs {
		if r.TreeID != runs[0].TreeID {
			return c, fmt.Errorf("%s and %s are in different trees: compare forks of one conversation", r.Label(), runs[0].Label())
		}
		var n *model.Node
		for _, root := range roots {
			if n = root.Find(r.ID); n != nil {
				break
			}
		}
		nodes = append(nodes, n)
	}
	c.ForkPoint = nodes[0].Run.Len()
	for _, n := range nodes[1:] {
		c.ForkPoint = min(c.ForkPoint, model.SharedPrefix(nodes[0], n))
	}
	for _, r := range runs {
		msgs, _, err := st.Messages(ctx, r.ID)
		if err != nil {
			return c, err
		}
		after := msgs[c.ForkPoint:]
		cr := comparedRunJS{ID: r.ID, Name: r.Label(), Status: string(r.Status), Error: r.Error, Usage: r.Usage,
			CostUSD: usd(r.CostUSD), messages: after, Best: r.Best, Why: r.BestReason, Harness: r.Harness, Handoff: r.Handoff,
			Worktree: r.Worktree, Branch: r.Branch, Check: toCheckJSON(r.Check)}
		if fork.HasFiles(r) && r.DiffBase() != "" {
			if cr.Files, err = fork.Files(ctx, r); err != nil {
				cr.FilesErr = model.OneLine(err.Error(), 200)
			}
			if withDiff && err == nil {
				if cr.Diff, _, err = fork.Diff(ctx, r); err != nil {
					cr.FilesErr = model.OneLine(err.Error(), 200)
				}
			}
		}
		if !r.FinishedAt.IsZero() {
			cr.Seconds = r.Took().Round(100 * time.Millisecond).Seconds()
		}
		for _, m := range after {
			if m.Role == model.Assistant {
				cr.Steps++
			}
		}
		cr.Messages = toShowJSON(r, msgs, 0).Transcript[c.ForkPoint:]
		c.Runs = append(c.Runs, cr)
	}
	return c, nil
}

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
	if len(refs) == 1 {
		return oneToCompare(ctx, st, refs[0])
	}
	c, err := compareRuns(ctx, st, refs, *withDiff)
	if err != nil {
		return err
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
		for i, m := range r.messages {
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

// oneToCompare is the usage error of a compare given one run: which runs
// it could be compared with (its forks, else its siblings), if any.
func oneToCompare(ctx context.Context, st *store.Store, ref string) error {
	r, err := st.Resolve(ctx, ref)
	if err != nil {
		return err
	}
	runs, err := st.TreeRuns(ctx, r.TreeID)
	if err != nil {
		return err
	}
	var forks, siblings []string
	for _, o := range runs {
		switch {
		case o.Hidden || o.ID == r.ID:
		case o.ParentID == r.ID:
			forks = append(forks, model.OneLine(o.Label(), 40))
		case r.ParentID != "" && o.ParentID == r.ParentID:
			siblings = append(siblings, model.OneLine(o.Label(), 40))
		}
	}
	label := model.SafeText(r.Label())
	switch {
	case len(forks) > 0:
		return usagef("compare: %s alone has nothing to compare with; give two runs or more, e.g. its forks: tine compare %s %s", label, label, strings.Join(forks[:min(len(forks), 3)], " "))
	case len(siblings) > 0:
		return usagef("compare: %s alone has nothing to compare with; give two runs or more, e.g. its siblings: tine compare %s %s", label, label, strings.Join(siblings[:min(len(siblings), 3)], " "))
	}
	return usagef("compare: %s alone has nothing to compare with, and it has no forks yet (tine fork %s makes some)", label, label)
}
