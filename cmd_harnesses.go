package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"tine/harness"
	"tine/model"
)

// harnessJSON is one harness as `tine harnesses --json` prints it.
type harnessJSON struct {
	Name         string               `json:"name"`
	Installed    bool                 `json:"installed"`
	Path         string               `json:"path"`
	Version      string               `json:"version"`
	Capabilities harness.Capabilities `json:"capabilities"`
	Needs        []string             `json:"needs"`
	Problem      string               `json:"problem,omitempty"`
	// Note is what it did not say in time, which stops nothing.
	Note string `json:"note,omitempty"`
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
				hj.Installed, hj.Path, hj.Version, hj.Problem, hj.Note = ds.Installed, ds.Path, ds.Version, ds.Problem, ds.Note
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
		// Installed with a problem (a model API without its key) cannot
		// run here either: the line under the table says why.
		here := "yes"
		if !h.Installed || h.Problem != "" {
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
			yes(c.Tools), yes(c.Stream), yes(c.Replayable()), model.OneLine(h.Version, cells(e.stdout, 30)), model.OneLine(needs, cells(e.stdout, 120)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, h := range hs {
		if why := model.FirstNonBlank(h.Problem, h.Note); why != "" {
			fmt.Fprintf(e.stdout, "%s: %s\n", h.Name, model.OneLine(why, cells(e.stdout, 200)))
		}
	}
	return nil
}
