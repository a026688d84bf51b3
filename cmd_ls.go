package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"tine/model"
	"tine/replay"
)

// runJSON is a run as `ls` and `show` print it; keys may be added, never removed.
type runJSON struct {
	ID         string      `json:"id"`
	Tree       string      `json:"tree"`
	Parent     string      `json:"parent"`
	ForkAt     int         `json:"fork_at"`
	Asked      string      `json:"asked,omitempty"`
	Snapped    string      `json:"snapped_reason,omitempty"`
	Name       string      `json:"name"`
	Harness    string      `json:"harness"`
	NativeID   string      `json:"native_id"`
	Model      string      `json:"model,omitempty"`
	Status     string      `json:"status"`
	Error      string      `json:"error,omitempty"`
	Messages   int         `json:"messages"`
	Title      string      `json:"title"`
	Cwd        string      `json:"cwd"`
	CreatedAt  time.Time   `json:"created_at"`
	FinishedAt *time.Time  `json:"finished_at,omitempty"`
	Usage      model.Usage `json:"usage"`
	CostUSD    usd         `json:"cost_usd"`
	Hidden     bool        `json:"hidden,omitempty"`
	SpawnedBy  string      `json:"spawned_by,omitempty"`
	Best       bool        `json:"best,omitempty"`
	Worktree   string      `json:"worktree,omitempty"`
	Branch     string      `json:"branch,omitempty"`
	Handoff    bool        `json:"handoff,omitempty"`
	Check      *checkJSON  `json:"check,omitempty"`
	// Replay says how a run made by tine replay came about.
	Replay *lsReplayJSON `json:"replay,omitempty"`
	// AA sums up the run's own replays: how many continuations reproduced
	// it, of those measured.
	AA *aaJSON `json:"aa,omitempty"`
}

// aaJSON is a run's A/A rate as ls and show print it.
type aaJSON struct {
	Measured   int     `json:"measured"`
	Reproduced int     `json:"reproduced"`
	Rate       float64 `json:"rate"`
}

func toAAJSON(a model.AARate) *aaJSON {
	if a.Measured == 0 {
		return nil
	}
	return &aaJSON{Measured: a.Measured, Reproduced: a.Reproduced, Rate: float64(a.Reproduced) / float64(a.Measured)}
}

// lsReplayJSON is a replay's row as ls prints it.
type lsReplayJSON struct {
	Of         string          `json:"of"`
	Step       int             `json:"step"`
	Status     string          `json:"status"`
	Replayed   int             `json:"replayed"`
	AA         *bool           `json:"aa"`
	Divergence json.RawMessage `json:"divergence"`
}

func toLsReplay(r model.Replay) *lsReplayJSON {
	j := &lsReplayJSON{Of: r.Of, Step: r.Step, Status: string(r.Status), Replayed: r.Replayed, AA: r.AA, Divergence: json.RawMessage("null")}
	if r.Divergence != "" && json.Valid([]byte(r.Divergence)) {
		j.Divergence = json.RawMessage(r.Divergence)
	}
	return j
}

// replayStatus is a replay's status as ls's STATUS column adds it.
func replayStatus(r model.Replay) string {
	s := fmt.Sprintf(" (%s replay to step %d", r.Status, r.Step)
	if d := replay.DivergenceOf(r); d != nil && r.Status == model.ReplayDiverged {
		s += fmt.Sprintf(": %s at step %d", d.Kind, d.Step)
	}
	return s + ")"
}

func toRunJSON(r model.Run) runJSON {
	j := runJSON{
		ID: r.ID, Tree: r.TreeID, Parent: r.ParentID, ForkAt: r.ForkAt, Asked: r.Asked, Snapped: r.SnapReason,
		Name: r.Name, Harness: r.Harness, NativeID: r.NativeID, Model: r.Model, Status: string(r.Status),
		Error: r.Error, Messages: r.Len(), Title: r.Title, Cwd: r.Cwd, CreatedAt: r.CreatedAt,
		Usage: r.Usage, CostUSD: usd(r.CostUSD), Hidden: r.Hidden, SpawnedBy: r.SpawnedBy, Best: r.Best,
		Worktree: r.Worktree, Branch: r.Branch, Handoff: r.Handoff, Check: toCheckJSON(r.Check),
	}
	if !r.FinishedAt.IsZero() {
		t := r.FinishedAt
		j.FinishedAt = &t
	}
	return j
}

func cmdLs(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "ls", "[--json] [--all]", "List every tree and its runs: roots first, forks indented under their parents.")
	asJSON := f.Bool("json", false, "print JSON")
	all := f.Bool("all", false, "include hidden runs")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	st, err := e.open()
	if err != nil {
		return err
	}
	defer st.Close()
	runs, err := st.Runs(ctx)
	if err != nil {
		return err
	}
	// Subagents are listed under the run that spawned them, not as trees.
	var trees []*model.Node
	spawned := map[string][]*model.Node{}
	for _, t := range model.BuildTrees(runs) {
		if t.Run.SpawnedBy != "" {
			spawned[t.Run.SpawnedBy] = append(spawned[t.Run.SpawnedBy], t)
		} else {
			trees = append(trees, t)
		}
	}
	type line struct {
		n     *model.Node
		depth int
		sub   bool
	}
	var lines []line
	var walk func(n *model.Node, depth int, sub bool)
	walk = func(n *model.Node, depth int, sub bool) {
		under := depth + 1
		if *all || !n.Run.Hidden {
			lines = append(lines, line{n, depth, sub})
		} else {
			under = depth // its forks (what replaced it) take its place
		}
		for _, c := range n.Children {
			walk(c, under, false)
		}
		for _, s := range spawned[n.Run.ID] {
			walk(s, under, true)
		}
	}
	for _, t := range trees {
		walk(t, 0, false)
	}
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
	}
	replays, err := st.Replays(ctx, ids)
	if err != nil {
		return err
	}
	rates, err := st.AARates(ctx, ids)
	if err != nil {
		return err
	}
	if *asJSON {
		out := []runJSON{}
		for _, l := range lines {
			j := toRunJSON(l.n.Run)
			if r, ok := replays[l.n.Run.ID]; ok {
				j.Replay = toLsReplay(r)
			}
			j.AA = toAAJSON(rates[l.n.Run.ID])
			out = append(out, j)
		}
		return writeJSON(e.stdout, out)
	}
	if len(trees) == 0 {
		fmt.Fprintln(e.stdout, "No runs yet. Import with: tine import (every agent session here), tine import FILE, or try: tine demo")
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tNAME\tHARNESS\tSTATUS\tK\tMSGS\tTOKENS\tCOST\tTITLE")
	for _, l := range lines {
		r := l.n.Run
		indent := strings.Repeat("  ", l.depth)
		k, title := "", ""
		switch {
		case l.sub:
			indent += "⤷ "
			title = "subagent: " + model.OneLine(r.Title, 50)
		case r.ParentID != "":
			k = fmt.Sprint(r.ForkAt)
		default:
			title = model.OneLine(r.Title, 60)
		}
		status := string(r.Status)
		if rp, ok := replays[r.ID]; ok {
			status += replayStatus(rp)
		}
		if a, ok := rates[r.ID]; ok {
			status += fmt.Sprintf(" (A/A %d/%d)", a.Reproduced, a.Measured)
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", indent, model.ShortID(r.ID),
			model.OneLine(r.Name, 30), r.Harness, status, k, r.Len(), r.Usage.Total(), costText(r.CostUSD), title)
	}
	return tw.Flush()
}

// costText is dollars spent the one way tine writes them (as the TUI
// does): "-" for nothing, "<$0.01" under a cent, else to the cent.
func costText(usd float64) string {
	switch {
	case usd <= 0:
		return "-"
	case usd < 0.01:
		return "<$0.01"
	case usd < 100:
		return fmt.Sprintf("$%.2f", usd)
	}
	return fmt.Sprintf("$%.0f", usd)
}
