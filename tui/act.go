package tui

import (
	"context"

	"tine/harness/fork"
	"tine/internal/service"
	"tine/replay"
)

// The program is a face of internal/service (ARCHITECTURE.md: Faces):
// each action it offers (fork, next turn, retry, merge, replay, cancel,
// apply, pick the best, import, search) is one call of the service with a
// typed request, made in a command (never in Update), so it is checked
// and refused as the command line, tine mcp and tine serve check and
// refuse it. What differs is where the turns run: the service hands them
// to the action's starter (deferred), and Update runs them as a batch
// whose events the screen follows (startTurns, replayStarted).

// act is the service one action calls: the program's, on drv (a copy of
// the driver with the API settings typed in the Fork screen; nil: the
// program's), with a starter of its own that keeps what the service
// starts.
func (a *App) act(drv *fork.Driver) (*service.Service, *deferred) {
	svc := *a.svc
	if drv != nil {
		svc.Driver = drv
	}
	start := &deferred{}
	svc.Turns = start
	return &svc, start
}

// deferred is the service.Starter of one action: it keeps the turns (or
// the replay) the service starts, and the action's answer carries them
// to Update, which runs them (startTurns, replayStarted): a batch is the
// program's state, which only Update touches. The runs are made and
// pending when the service returns; a background tine claims them as
// any does, and one that never starts them is said (failUnstarted).
type deferred struct {
	turns    []fork.Turn
	parallel int
	plan     *replay.Plan
}

// Admit: the program's turns run in tine processes of their own, or in
// the program, with room for any.
func (*deferred) Admit(int) (func(), error) { return func() {}, nil }

func (s *deferred) StartTurns(_ context.Context, work []fork.Turn, parallel int) error {
	s.turns, s.parallel = append(s.turns, work...), parallel
	return nil
}

func (s *deferred) StartReplay(_ context.Context, plan *replay.Plan) error {
	s.plan = plan
	return nil
}

// work is what the action started: its turns and how many run at once.
func (s *deferred) work() startWork { return startWork{turns: s.turns, parallel: s.parallel} }

// startWork is the turns an action's service call started, for
// startTurns.
type startWork struct {
	turns    []fork.Turn
	parallel int
}
