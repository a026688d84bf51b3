package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/charmbracelet/x/term"

	"tine/harness/place"
	"tine/model"
)

// cmdOpen opens a run in its own agent, interactively: the TUI's o, for
// a terminal.
func cmdOpen(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "open", "RUN",
		"Open RUN's session in its own agent, interactively (the TUI's o): a fork that ran here\n"+
			"in its worktree, a fork that ran in a container (--on docker) in that container, on this\n"+
			"terminal; its work and its agent's session files then come back as after a turn (its\n"+
			"branch). What is said there is the agent's session; tine's transcript is its turns'.")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	if !term.IsTerminal(os.Stdin.Fd()) || !term.IsTerminal(os.Stdout.Fd()) {
		return errors.New("tine open needs a terminal: the agent is opened for a person")
	}
	st, err := e.openToWrite()
	if err != nil {
		return err
	}
	defer st.Close()
	ag := agentFlags{permissions: os.Getenv("TINE_PERMISSIONS")}
	d, err := newDriver(st, false, apiFlags{}, ag)
	if err != nil {
		return err
	}
	run, err := st.Resolve(ctx, pos[0])
	if err != nil {
		return err
	}
	t := place.Terminal{In: os.Stdin, Out: os.Stdout}
	if !run.OnThisMachine() {
		// Relayed: this terminal is raw, as the agent's is, and its size
		// follows this one's.
		old, err := term.MakeRaw(os.Stdin.Fd())
		if err != nil {
			return err
		}
		defer term.Restore(os.Stdin.Fd(), old)
		resized := make(chan os.Signal, 1)
		signal.Notify(resized, syscall.SIGWINCH)
		defer signal.Stop(resized)
		sizes := make(chan struct{}, 1)
		go func() {
			for range resized {
				select {
				case sizes <- struct{}{}:
				default:
				}
			}
		}()
		t.Size = func() (int, int) {
			w, h, err := term.GetSize(os.Stdout.Fd())
			if err != nil {
				return 80, 24
			}
			return w, h
		}
		t.Resized = sizes
		fmt.Fprintf(e.stderr, "tine: opening %s in its container\r\n", model.SafeText(run.Label()))
	}
	err = turnService(st, d, apiFlags{}, ag).Open(ctx, run.ID, t)
	return cliError(err)
}
