package main

import (
	"context"
	"fmt"

	"tine/internal/service"
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
	out, err := readService(st).Cancel(ctx, pos, service.CancelWait)
	for _, c := range out {
		label := model.SafeText(c.Name)
		switch model.Status(c.Was) {
		case model.Running:
			if c.Status != c.Was {
				fmt.Fprintf(e.stdout, "%s: %s\n", label, c.Status)
			}
		case model.Pending, model.Queued:
			fmt.Fprintf(e.stdout, "%s: cancelled before it started\n", label)
		default:
			fmt.Fprintf(e.stdout, "%s: already %s; nothing to cancel\n", label, c.Was)
		}
	}
	return err
}
