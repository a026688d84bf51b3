package service

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"

	"tine/harness/place"
	"tine/model"
)

// Open opens the run ref names in its own agent, interactively, on t: a
// fork that ran here in its worktree (or its directory), one that ran in
// a container in that container (place.Opener), whose work and session
// files then come back as after a turn. It returns once the agent exits.
// What the person does there is the agent's session, not tine's: tine's
// transcript of the run is what its turns streamed.
func (s *Service) Open(ctx context.Context, ref string, t place.Terminal) error {
	d, err := s.driver()
	if err != nil {
		return err
	}
	run, err := s.resolve(ctx, ref)
	if err != nil {
		return err
	}
	ag, known := d.Harnesses.Agent(run.Harness)
	switch {
	case run.SpawnedBy != "":
		return &Error{Code: Refused, Err: errors.New("a subagent's session belongs to the run that started it: open that one")}
	case !known:
		return &Error{Code: Refused, Err: fmt.Errorf("runs of %q cannot be opened in an agent", model.SafeText(run.Harness))}
	case ag.Open == nil:
		return &Error{Code: Refused, Err: errors.New(ag.NoOpen)}
	case run.Status == model.Running || run.Status == model.Queued:
		return conflictf("%s's turn is running: its agent is writing the session now (tine cancel stops it)", run.Label())
	case run.NativeID == "":
		return conflictf("%s has no session of %s yet: it never ran (tine run gives it a turn)", run.Label(), ag.Display)
	}
	if !run.OnThisMachine() {
		pl, err := d.Places.Get(run.Place, d.Local())
		if err != nil {
			return refused(err)
		}
		op, ok := pl.(place.Opener)
		if !ok {
			return &Error{Code: Refused, Err: fmt.Errorf("%s ran on %s, where tine cannot open its agent", run.Label(), model.SafeText(run.Place))}
		}
		return op.Open(ctx, run, t)
	}
	bin := run.Harness
	if ag.CLI != nil {
		bin = ag.CLI.Bin
		if v := s.getenv(ag.CLI.BinVar); ag.CLI.BinVar != "" && v != "" {
			bin = v
		}
	}
	if _, err := exec.LookPath(bin); err != nil {
		return &Error{Code: Refused, Err: fmt.Errorf("%s is not installed here", bin)}
	}
	dir := run.Worktree
	if dir == "" {
		dir = run.Cwd
	}
	if st, err := os.Stat(dir); dir == "" || err != nil || !st.IsDir() {
		return conflictf("%s's directory %q is gone, and its agent finds the session by directory", run.Label(), model.SafeText(dir))
	}
	argv, err := ag.Open(run, bin)
	if err != nil {
		return refused(err)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PWD="+dir)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = t.In, t.Out, t.Out
	return cmd.Run()
}
