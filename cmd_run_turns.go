package main

import (
	"context"
	"encoding/json"
	"fmt"

	"tine/harness/fork"
	"tine/harness/turns"
)

// cmdRunTurns is the background half of `tine fork`: it reads turns as JSON
// on stdin and runs them. Not for people; hidden from the help.
func cmdRunTurns(ctx context.Context, e *env, args []string) (err error) {
	f := newFlags(e, "run-turns", "", "Run the turns given as JSON on stdin (used by tine fork).")
	parallel := f.Int("parallel", 4, "how many turns run at once")
	// The TUI's turns (tuiBackground): their events, and how they ended,
	// go back to it on a pipe.
	events := eventsFlag(f)
	defer func() { events.End(err) }()
	var api apiFlags
	f.StringVar(&api.baseURL, "base-url", "", "the model API's base URL")
	var ag agentFlags
	ag.register(f)
	ackFD := ackFlag(f)
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	// The command that started this process waits until the turns are
	// claimed as this process's (handOver), or for why they cannot be.
	ack := turns.OpenAck(*ackFD)
	defer func() { ack.Done(err) }()
	var turns []fork.Turn
	if err := json.NewDecoder(e.stdin).Decode(&turns); err != nil {
		return fmt.Errorf("run-turns: reading its turns: %w", err)
	}
	st, err := e.openToWrite()
	if err != nil {
		return err
	}
	defer st.Close()
	d, err := newDriver(st, false, api, ag)
	if err != nil {
		return err
	}
	ids := make([]string, len(turns))
	for i, t := range turns {
		ids[i] = t.RunID
	}
	if err := st.ClaimTurns(ctx, ids); err != nil {
		return err
	}
	ack.Done(nil)
	d.Parallel = *parallel
	d.RunTurns(ctx, turns, events.Put)
	return nil
}
