package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"tine/harness/fork"
	"tine/harness/turns"
	"tine/replay"
	"tine/tui"
)

// tuiBackground runs what the TUI starts (its forks' turns, its replays)
// in tine processes of their own, started as `tine fork` and `tine replay`
// start theirs (run-turns, replay --trials), so that they go on when the
// TUI quits and a person can choose to leave them running (tui.Background).
// While the TUI is open, each process streams its events back on a pipe
// (--events-fd), so the screen is as live as with turns run in-process.
type tuiBackground struct {
	db string
	ag agentFlags // how the TUI's own driver runs them (paced, demo)
}

func (b tuiBackground) Turns(ctx context.Context, job tui.TurnsJob, events func(fork.RunEvent)) error {
	api := apiFlags{baseURL: job.BaseURL, apiKey: job.APIKey}
	parallel := job.Parallel
	if parallel <= 0 {
		parallel = 4 // as RunTurns has it
	}
	args, env := runTurnsArgs(b.db, parallel, api, b.ag)
	data, err := json.Marshal(job.Turns)
	if err != nil {
		return err
	}
	return turns.Follow(ctx, args, env, data, events)
}

func (b tuiBackground) Replay(ctx context.Context, plan *replay.Plan, events func(fork.RunEvent)) error {
	args, env := replayArgs(b.db, plan, apiFlags{}, b.ag)
	return turns.Follow(ctx, args, env, nil, events)
}

// eventsFlag registers --events-fd, for the TUI's background processes
// only (no usage line: hidden from the help): the pipe it names is opened
// as the flag is parsed. Without it the pipe reports nothing.
func eventsFlag(f *flags) *turns.EventPipe {
	p := &turns.EventPipe{}
	f.Func("events-fd", "", func(s string) error {
		fd, err := strconv.Atoi(s)
		if err != nil || fd < 3 {
			return fmt.Errorf("not a file descriptor of tine's: %q", s)
		}
		p.Open(fd)
		return nil
	})
	return p
}

// ackFlag registers --ack-fd, for tine's own background processes only
// (no usage line: hidden from the help).
func ackFlag(f *flags) *int { return f.Int("ack-fd", 0, "") }
