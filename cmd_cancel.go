package main

import (
	"context"
	"fmt"
	"time"

	"tine/model"
)

// cmdCancel stops running forks, whichever process runs them.
func cmdCancel(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "cancel", "RUN...",
		"Stop a running fork, whichever tine process runs it (the TUI, a background turn, a\n`tine fork --wait` elsewhere): what it streamed so far is kept. A pending fork is\nmarked cancelled.")
	pos, err := f.parse(args, 1, -1)
	if err != nil {
		return err
	}
	st, err := e.openToWrite()
	if err != nil {
		return err
	}
	defer st.Close()
	var waiting []model.Run
	for _, ref := range pos {
		r, err := st.Resolve(ctx, ref)
		if err != nil {
			return err
		}
		was, err := st.RequestCancel(ctx, r.ID)
		if err != nil {
			return err
		}
		switch was {
		case model.Running:
			waiting = append(waiting, r)
		case model.Pending, model.Queued:
			fmt.Fprintf(e.stdout, "%s: cancelled before it started\n", model.SafeText(r.Label()))
		default:
			fmt.Fprintf(e.stdout, "%s: already %s; nothing to cancel\n", model.SafeText(r.Label()), was)
		}
	}
	// The owner polls for the request about twice a second; wait a while
	// to say how it ended.
	deadline := time.Now().Add(15 * time.Second)
	for _, r := range waiting {
		for {
			now, err := st.Run(ctx, r.ID)
			if err != nil {
				return err
			}
			if now.Status != model.Running {
				fmt.Fprintf(e.stdout, "%s: %s\n", model.SafeText(r.Label()), now.Status)
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("asked %s to stop, but it is still running (owner process %d)", r.Label(), now.OwnerPID)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}
