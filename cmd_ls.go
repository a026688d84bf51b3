package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"tine/internal/service"
	"tine/model"
	"tine/replay"
)

// The JSON shapes are the service's: every face gives the same
// (internal/service).
type (
	runJSON = service.Run
	aaJSON  = service.AA
)

// replayStatus is a replay's status as ls's STATUS column adds it.
func replayStatus(r model.Replay) string {
	s := fmt.Sprintf(" (%s replay to step %d", r.Status, r.Step)
	if d := replay.DivergenceOf(r); d != nil && r.Status == model.ReplayDiverged {
		s += fmt.Sprintf(": %s at step %d", d.Kind, d.Step)
	}
	return s + ")"
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
	list, err := readService(st).List(ctx, *all)
	if err != nil {
		return err
	}
	if list.Unread != nil {
		fmt.Fprintf(e.stderr, "tine: replays' statuses and A/A rates are left out: %v\n", list.Unread)
	}
	if *asJSON {
		return writeJSON(e.stdout, list.JSON())
	}
	if list.Trees == 0 {
		fmt.Fprintln(e.stdout, "No runs yet. Import with: tine import (every agent session here), tine import FILE, or try: tine demo")
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tNAME\tHARNESS\tSTATUS\tK\tMSGS\tTOKENS\tCOST\tTITLE")
	for _, l := range list.Lines {
		r := l.Run
		indent := strings.Repeat("  ", l.Depth)
		k, title := "", ""
		switch {
		case l.Sub:
			indent += "⤷ "
			title = "subagent: " + model.OneLine(r.Title, 50)
		case r.ParentID != "":
			k = fmt.Sprint(r.ForkAt)
		default:
			title = model.OneLine(r.Title, 60)
		}
		status := string(r.Status)
		if l.Replay != nil {
			status += replayStatus(*l.Replay)
		}
		if a := l.AA; a.Measured > 0 {
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
