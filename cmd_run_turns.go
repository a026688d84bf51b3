package main

import (
	"context"
	"encoding/json"
	"fmt"

	"tine/harness/fork"
)

// cmdRunTurns is the background half of `tine fork`: it reads turns as JSON
// on stdin and runs them. Not for people; hidden from the help.
func cmdRunTurns(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "run-turns", "", "Run the turns given as JSON on stdin (used by tine fork).")
	parallel := f.Int("parallel", 4, "how many turns run at once")
	var api apiFlags
	f.StringVar(&api.baseURL, "base-url", "", "the model API's base URL")
	var ag agentFlags
	ag.register(f)
	// The TUI's background turns (tuiBackground): paced as its own would
	// be, the demo's offline driver, and their events on a pipe.
	paced := f.Bool("paced", false, "")
	demo := f.Bool("demo", false, "")
	eventsFD := eventsFlag(f)
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	events := openEvents(*eventsFD)
	fail := func(err error) error {
		events.end(err)
		return err
	}
	var turns []fork.Turn
	if err := json.NewDecoder(e.stdin).Decode(&turns); err != nil {
		return fail(fmt.Errorf("run-turns: %w", err))
	}
	st, err := e.open()
	if err != nil {
		return fail(err)
	}
	defer st.Close()
	var d *fork.Driver
	if *demo {
		d = demoDriver(st)
	} else if d, err = newDriver(st, *paced, api, ag); err != nil {
		return fail(err)
	}
	d.Parallel = *parallel
	d.RunTurns(ctx, turns, events.put)
	events.end(nil)
	return nil
}
