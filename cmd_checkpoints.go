package main

import (
	"context"
	"fmt"
	"strings"

	"tine/model"
)

func cmdCheckpoints(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "checkpoints", "RUN [--json]", "Print the run's pair-safe boundaries: every K a fork can keep messages[:K] at\nwithout splitting a tool call from its result.")
	asJSON := f.Bool("json", false, "print JSON")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	r, msgs, _, err := loadRun(ctx, e, pos[0])
	if err != nil {
		return err
	}
	cps := model.Checkpoints(msgs)
	if *asJSON {
		return writeJSON(e.stdout, map[string]any{"run": r.ID, "messages": len(msgs), "checkpoints": cps})
	}
	strs := make([]string, len(cps))
	for i, k := range cps {
		strs[i] = fmt.Sprint(k)
	}
	fmt.Fprintf(e.stdout, "[%s]\n", strings.Join(strs, ", "))
	return nil
}
