package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"tine/harness"
	"tine/model"
	"tine/store"
)

// comparison is runs of one tree laid side by side from where they part.
type comparison struct {
	ForkPoint int             `json:"fork_point"`
	Runs      []comparedRunJS `json:"runs"`
}

type comparedRunJS struct {
	ID       string        `json:"id"`
	Name     string        `json:"name"`
	Status   string        `json:"status"`
	Error    string        `json:"error,omitempty"`
	Steps    int           `json:"steps"`
	Usage    model.Usage   `json:"usage"`
	CostUSD  float64       `json:"cost_usd"`
	Seconds  float64       `json:"seconds"`
	Best     bool          `json:"best,omitempty"`
	Messages []messageJSON `json:"messages"`
	messages []model.Message
}

// compareRuns loads runs (refs as people type them) and cuts each at the
// prefix they all share.
func compareRuns(ctx context.Context, st *store.Store, refs []string) (comparison, error) {
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
			CostUSD: r.CostUSD, messages: after}
		if !r.FinishedAt.IsZero() {
			cr.Seconds = r.FinishedAt.Sub(r.CreatedAt).Round(100 * time.Millisecond).Seconds()
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
	f := newFlags(e, "compare", "RUN RUN... [--json]",
		"Compare runs of one tree from the point where they part: what each said and did,\nits steps, tokens, cost and time.")
	asJSON := f.Bool("json", false, "print JSON")
	refs, err := f.parse(args, 2, 10)
	if err != nil {
		return err
	}
	st, err := e.open()
	if err != nil {
		return err
	}
	defer st.Close()
	c, err := compareRuns(ctx, st, refs)
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
		fmt.Fprintf(w, "\n━━ %s  %s · %d steps · %d tokens", model.SafeText(r.Name), r.Status, r.Steps, r.Usage.Total())
		if r.CostUSD > 0 {
			fmt.Fprintf(w, " · $%.4f", r.CostUSD)
		}
		if r.Seconds > 0 {
			fmt.Fprintf(w, " · %.1fs", r.Seconds)
		}
		fmt.Fprintln(w)
		if r.Error != "" {
			fmt.Fprintf(w, "   error: %s\n", harness.OneLine(r.Error, 0))
		}
		for i, m := range r.messages {
			text := strings.TrimSpace(m.PlainText())
			fmt.Fprintf(w, "%4d %-9s %s\n", c.ForkPoint+i+1, m.Role, harness.OneLine(text, 160))
		}
	}
}
