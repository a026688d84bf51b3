package main

import (
	"context"
	"fmt"
	"os"

	"tine/harness/fork"
	"tine/model"
)

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
	if err := cliMissing(d.Harnesses, run.Harness, os.Getenv); err != nil {
		return err
	}
	fresh, input, err := d.PrepareRetry(ctx, run.ID)
	if err != nil {
		return err
	}
	return tf.run(ctx, e, st, d, []fork.Turn{{RunID: fresh.ID, Input: input}}, []model.Run{fresh})
}
