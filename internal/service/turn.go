package service

import (
	"context"
	"fmt"

	"tine/harness/fork"
	"tine/model"
)

// ContinueRequest asks for a run's next turn (tine run), or, with any of
// the fork forms the HTTP API's continue takes (Fork, a ContinueFrom
// other than end, Regenerate), a fork that gets it.
type ContinueRequest struct {
	Run     string
	Message string
	Harness string // another agent: a handoff
	Budget  model.Budget
	// On is where a new fork made for the turn runs ("": where the run
	// ran); a fork keeps its own place.
	On    string
	Place model.PlaceOpts
	// ContinueFrom, Fork, Regenerate and ReplaceOriginal ask for a fork
	// of the run at a boundary (ForkRequest) instead of its next turn:
	// history is never rewritten (rule 7 in ARCHITECTURE.md).
	ContinueFrom                string
	Fork                        bool
	Regenerate, ReplaceOriginal bool
	How
}

// Continued is the run that got the turn: the run asked for, or a new
// fork of it (NewFork).
type Continued struct {
	Asked   model.Run
	Runs    []model.Run
	Cut     model.Cut
	NewFork bool
}

// JSON is the run that got the turn, as run --json gives it.
func (c Continued) JSON() Forks { return ToForks(c.Runs) }

// Continue gives the run req names its next turn: a pending fork its
// first, a fork tine made its next (resuming its own session), any other
// run a new fork at its end (rule 7), or a fork at ContinueFrom.
func (s *Service) Continue(ctx context.Context, req ContinueRequest) (Continued, error) {
	at, err := model.ParseContinueFrom(req.ContinueFrom)
	if err != nil {
		return Continued{}, invalidf("run: %s", err)
	}
	if req.Fork || req.Regenerate || req.ReplaceOriginal || at != "end" {
		fr := ForkRequest{Run: req.Run, N: 1, At: string(at), Harness: req.Harness, Regenerate: req.Regenerate,
			ReplaceOriginal: req.ReplaceOriginal, Budget: req.Budget, On: req.On, Place: req.Place, How: req.How}
		if req.Message != "" {
			fr.Messages = []string{req.Message}
		}
		if fr.Harness != "" {
			d, err := s.driver()
			if err != nil {
				return Continued{}, err
			}
			if parent, err := s.resolve(ctx, req.Run); err == nil && parent.Harness != fr.Harness {
				fr.Handoff = d.NeedsHandoff(parent, fr.Harness)
			}
		}
		f, err := s.Fork(ctx, fr)
		if err != nil {
			return Continued{}, err
		}
		asked, _ := s.Store.Run(ctx, f.Runs[0].ParentID)
		return Continued{Asked: asked, Runs: f.Runs, Cut: f.Cut, NewFork: true}, nil
	}
	return s.nextTurn(ctx, req)
}

func (s *Service) nextTurn(ctx context.Context, req ContinueRequest) (Continued, error) {
	if err := checkBudget("run", req.Budget); err != nil {
		return Continued{}, err
	}
	d, err := s.driver()
	if err != nil {
		return Continued{}, err
	}
	on, err := s.place(req.On, req.Place, "run")
	if err != nil {
		return Continued{}, err
	}
	if err := s.writable(); err != nil {
		return Continued{}, err
	}
	run, err := s.resolve(ctx, req.Run)
	if err != nil {
		return Continued{}, err
	}
	// Refused before NextTurnRun, which may make a fork for the turn.
	h := req.Harness
	if h == "" {
		h = run.Harness
	}
	if run.Status == model.Running || run.Status == model.Queued {
		return Continued{}, conflictf("run %s is %s; wait for it, or stop it with tine cancel %s", run.Label(), run.Status, model.ShortID(run.ID))
	}
	// An agent that runs in a container needs its program there, not here.
	if run.OnThisMachine() && on == "" {
		if err := s.cliMissing(d.Harnesses, h); err != nil {
			return Continued{}, err
		}
	}
	if req.Message == "" {
		if err := s.nothingToAnswer(ctx, run); err != nil {
			return Continued{}, err
		}
	}
	if h == run.Harness {
		if err := d.Stale(ctx, run); err != nil {
			return Continued{}, err
		}
	}
	if !req.Budget.IsZero() {
		// Refused before NextTurnRun makes a fork it could not keep. The
		// turn goes to run itself or to a fork at its end, with its model
		// when the agent is the same.
		modelName := ""
		if h == run.Harness {
			modelName = run.Model
		}
		hh, err := d.Harnesses.Get(h)
		if err != nil {
			return Continued{}, refused(err)
		}
		if err := fork.CheckBudget(req.Budget, hh, modelName); err != nil {
			return Continued{}, refused(err)
		}
	}
	release, err := s.admit(!req.Wait, 1)
	if err != nil {
		return Continued{}, err
	}
	defer release()
	req.How.release = release
	target, err := d.NextTurnRun(ctx, run.ID, req.Harness, fork.Where{On: on, Opts: req.Place})
	if err != nil {
		return Continued{}, refused(err)
	}
	if !req.Budget.IsZero() {
		if err := d.SetBudget(ctx, target.ID, req.Budget); err != nil {
			return Continued{}, err
		}
		target.Budget = req.Budget
	}
	// A fork that has spent its budget starts no other turn.
	if err := d.Spent(ctx, target); err != nil {
		return Continued{}, refused(fmt.Errorf("%s: %w", model.SafeText(target.Label()), err))
	}
	out := Continued{Asked: run, Runs: []model.Run{target}, NewFork: target.ID != run.ID}
	if err := s.runTurns(ctx, req.How, []fork.Turn{{RunID: target.ID, Input: req.Message}}, out.Runs); err != nil {
		return Continued{}, err
	}
	return out, nil
}

// nothingToAnswer refuses a turn without a message on a run whose
// transcript ends with the model's reply (the driver would fail it after
// making its fork), before anything is made.
func (s *Service) nothingToAnswer(ctx context.Context, run model.Run) error {
	b, err := s.Store.Boundaries(ctx, run.ID)
	if err != nil {
		return err
	}
	if n := b.Len(); n > 0 && b.IsAssistant(n-1) && !b.MadeCalls(n-1) {
		return invalidf("run: -m MSG is the turn's message; without one the model would answer again, and %s ends with its reply", model.SafeText(run.Label()))
	}
	return nil
}

// RetryRequest asks for a failed or cancelled fork's first turn again,
// as a new sibling.
type RetryRequest struct {
	Run string
	How
}

// Retry runs a failed or cancelled fork again: a new fork at the same
// boundary, with the same harness, model, check and message.
func (s *Service) Retry(ctx context.Context, req RetryRequest) (Forked, error) {
	d, err := s.driver()
	if err != nil {
		return Forked{}, err
	}
	if err := s.writable(); err != nil {
		return Forked{}, err
	}
	run, err := s.resolve(ctx, req.Run)
	if err != nil {
		return Forked{}, err
	}
	if rs, err := s.Store.Replays(ctx, []string{run.ID}); err == nil {
		if r, ok := rs[run.ID]; ok {
			return Forked{}, &Error{Code: Refused, Err: fmt.Errorf("%s is a replay of step %d: replay again with: tine replay %s --at-step %d",
				run.Label(), r.Step, model.ShortID(r.Of), r.Step)}
		}
	}
	if err := s.cliMissing(d.Harnesses, run.Harness); err != nil {
		return Forked{}, err
	}
	release, err := s.admit(!req.Wait, 1)
	if err != nil {
		return Forked{}, err
	}
	defer release()
	req.How.release = release
	fresh, input, err := d.PrepareRetry(ctx, run.ID)
	if err != nil {
		return Forked{}, refused(err)
	}
	out := Forked{Runs: []model.Run{fresh}, Turns: 1}
	if err := s.runTurns(ctx, req.How, []fork.Turn{{RunID: fresh.ID, Input: input}}, out.Runs); err != nil {
		return Forked{}, err
	}
	return out, nil
}
