package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"tine/harness/place"
	"tine/harness/place/docker"
	"tine/tui"
)

// cmdTUI is tine with no command: the TUI on the user's own database,
// importing the agents' sessions as they grow.
func cmdTUI(ctx context.Context, e *env, _ []string) error {
	if err := requireTerminal(); err != nil {
		return err
	}
	st, err := e.open()
	if err != nil {
		return err
	}
	defer st.Close()
	ag := agentFlags{checkTimeout: 10 * time.Minute, record: e.record || os.Getenv("TINE_RECORD") == "1"}
	d, err := newDriver(st, true, apiFlags{}, ag)
	if err != nil {
		return err
	}
	follow := "tine ls"
	if e.db != "" {
		follow = "tine --db " + shellQuote(st.Path()) + " ls"
	}
	// The Fork screen offers containers on the daemon TINE_ON names, or
	// the one the environment points at; TINE_ON makes them its first
	// choice.
	on := place.Normalize(os.Getenv("TINE_ON"))
	elsewhere := on
	if elsewhere == "" {
		elsewhere = docker.Kind
	}
	exit, err := tui.Run(ctx, st, tui.Options{Driver: d, Watch: true, Replayer: newReplayer(st, d, ag), NewDatabase: e.made,
		Background: tuiBackground{db: st.Path(), ag: agentFlags{checkTimeout: ag.checkTimeout, record: ag.record, paced: true}}, Follow: follow,
		Elsewhere: elsewhere, ContainersFirst: on != ""})
	if s := exit.String(); s != "" {
		fmt.Fprintln(e.stdout, "tine: "+s)
	}
	return err
}
