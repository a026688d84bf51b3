package main

import (
	"context"
	"tine/internal/service"
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
	st, d, err := tf.open(e)
	if err != nil {
		return err
	}
	defer st.Close()
	out, err := tf.service(st, d).Retry(ctx, service.RetryRequest{Run: pos[0], How: tf.how(e, st)})
	if err != nil {
		return cliError(err)
	}
	return printTurns(ctx, e, out.Runs, !tf.wait, tf.asJSON)
}
