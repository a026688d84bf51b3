package service

import (
	"context"
	"errors"
	"fmt"

	"tine/harness/fork"
	"tine/harness/merge"
	"tine/model"
)

// MergeRequest asks for what forks found to be brought home: their
// parent (or Into) gets one new turn whose message carries a digest of
// each (harness/merge).
type MergeRequest struct {
	Forks []string
	Into  string // a run of the same tree; "" is the forks' parent
	// Note is the person's own words about the forks, before the digests.
	Note string
	// Summarize first asks each fork's agent for a summary, in one more
	// turn of the fork (its spending), run here.
	Summarize bool
	// Apply also brings the (one) fork's files into the checkout, as
	// Apply does; Commit as one commit.
	Apply, Commit bool
	// DryRun only says the message; it changes nothing.
	DryRun bool
	// Edit, when set, is given the message and returns the one to send
	// (the command line's $EDITOR).
	Edit func(ctx context.Context, text string) (string, error)
	How
}

// Merged is a merge: its plan, the run that got its turn, the merge as
// recorded, the message sent, and what Apply brought home.
type Merged struct {
	Plan    merge.Plan
	Runs    []model.Run // the run that got the turn
	Merge   model.Merge
	Message string
	Applied *fork.Applied
}

// JSON is the merge as merge --json gives it.
func (m Merged) JSON() Merge {
	var out Merge
	out.Merge.ID, out.Merge.Run, out.Merge.At, out.Merge.Forks = m.Merge.ID, m.Merge.RunID, m.Merge.At, m.Merge.Forks
	out.Forks, out.Message, out.Applied = ToForks(m.Runs).Forks, m.Message, m.Applied
	return out
}

// DryRunJSON is what the merge would send, as merge --dry-run --json
// gives it.
func (m Merged) DryRunJSON() DryRun {
	out := DryRun{DryRun: true, Run: m.Plan.Into.ID, Message: m.Message, Forks: []string{}}
	for _, fk := range m.Plan.Forks {
		out.Forks = append(out.Forks, fk.Run.ID)
	}
	return out
}

// Valid says what is wrong with the request's own values, before any
// store is opened or run read.
func (req MergeRequest) Valid() error {
	switch {
	case len(req.Forks) == 0:
		return invalidf("merge: name at least one fork")
	case len(req.Forks) > fork.MaxForks:
		return invalidf("merge: at most %d forks are merged at once, not %d", fork.MaxForks, len(req.Forks))
	case req.Commit && !req.Apply:
		return invalidf("merge: --commit goes with --apply")
	case req.DryRun && (req.Apply || req.Summarize || req.Edit != nil):
		return invalidf("merge: --dry-run changes nothing: it takes no --apply, --summarize or --edit")
	}
	return nil
}

// Merge brings what the forks found home (tine merge).
func (s *Service) Merge(ctx context.Context, req MergeRequest) (Merged, error) {
	var out Merged
	if err := req.Valid(); err != nil {
		return out, err
	}
	if !req.DryRun {
		if err := s.writable(); err != nil {
			return out, err
		}
	}
	var forks []model.Run
	for _, ref := range req.Forks {
		r, err := s.resolve(ctx, ref)
		if err != nil {
			return out, err
		}
		forks = append(forks, r)
	}
	intoID := ""
	if req.Into != "" {
		r, err := s.resolve(ctx, req.Into)
		if err != nil {
			return out, err
		}
		intoID = r.ID
	}
	plan, err := merge.Prepare(ctx, s.Store, forks, intoID)
	if err != nil {
		return out, mergeRefused(err)
	}
	plan.Note = req.Note
	if req.Apply {
		if err := plan.CanApply(); err != nil {
			return out, refused(err)
		}
		plan.Applied = plan.Forks[0].Run.Label()
	}
	out.Plan = plan
	if req.DryRun {
		out.Message = plan.Prompt()
		return out, nil
	}
	d, err := s.driver()
	if err != nil {
		return out, err
	}
	// Refused before anything runs or changes: the run's agent, its
	// budget, and the forks' agents for their summaries.
	if err := s.cliMissing(d.Harnesses, plan.Into.Harness); err != nil {
		return out, err
	}
	if err := d.Spent(ctx, plan.Into); err != nil {
		return out, refused(fmt.Errorf("%s: %w", model.SafeText(plan.Into.Label()), err))
	}
	if req.Summarize {
		if err := s.summarize(ctx, d, &plan, req.Progress); err != nil {
			return out, err
		}
		out.Plan = plan
	}
	prompt := plan.Prompt()
	if req.Edit != nil {
		if prompt, err = req.Edit(ctx, prompt); err != nil {
			return out, err
		}
	}
	out.Message = prompt
	release, err := s.admit(!req.Wait, 1)
	if err != nil {
		return out, err
	}
	defer release()
	req.How.release = release
	if req.Apply {
		a, err := plan.Apply(ctx, req.Commit)
		if err != nil {
			return out, &Error{Code: Conflict, Err: fmt.Errorf("%w; nothing was merged", err)}
		}
		out.Applied = &a
	}
	target, m, err := merge.Start(ctx, d, s.Store, plan)
	if err != nil {
		return out, mergeRefused(err)
	}
	out.Runs, out.Merge = []model.Run{target}, m
	if err := s.runTurns(ctx, req.How, []fork.Turn{{RunID: target.ID, Input: prompt}}, out.Runs); err != nil {
		return Merged{}, err
	}
	return out, nil
}

// mergeRefused marks a merge's refusal: a run mid-turn is a conflict.
func mergeRefused(err error) error {
	if errors.Is(err, merge.ErrMidTurn) {
		return &Error{Code: Conflict, Err: err}
	}
	return refused(err)
}

// summarize asks each fork of plan for its own summary, in one more turn
// of the fork (run here, as the merge waits for them), and puts each in
// its digest. A summary turn that fails stops the merge; what the forks
// spent stays theirs.
func (s *Service) summarize(ctx context.Context, d *fork.Driver, plan *merge.Plan, progress func(fork.RunEvent)) error {
	var turns []fork.Turn
	var runs []model.Run
	for _, fk := range plan.Forks {
		if err := s.cliMissing(d.Harnesses, fk.Run.Harness); err != nil {
			return err
		}
		// A fork that has spent its budget starts no other turn.
		if err := d.Spent(ctx, fk.Run); err != nil {
			return refused(fmt.Errorf("--summarize: %s: %w", model.SafeText(fk.Run.Label()), err))
		}
	}
	for _, fk := range plan.Forks {
		t, r, err := merge.SummaryTurn(ctx, d, fk.Run)
		if err != nil {
			return refused(fmt.Errorf("--summarize: %s: %w", model.SafeText(fk.Run.Label()), err))
		}
		turns, runs = append(turns, t), append(runs, r)
	}
	at := make([]int, len(runs))
	for i, r := range runs {
		at[i] = r.Len()
	}
	done := d.RunTurns(ctx, turns, progress)
	if ctx.Err() != nil {
		return errors.New("cancelled while the forks summed up; nothing was merged")
	}
	byID := map[string]model.Run{}
	for _, r := range done {
		byID[r.ID] = r
	}
	for i := range plan.Forks {
		r, ok := byID[runs[i].ID]
		if !ok {
			return fmt.Errorf("--summarize: %s vanished", model.SafeText(runs[i].Label()))
		}
		text, spent, err := merge.Summary(ctx, s.Store, r, at[i])
		if err != nil {
			return refused(fmt.Errorf("--summarize: %w; nothing was merged", err))
		}
		plan.Forks[i].Summary, plan.Forks[i].SummaryRun, plan.Forks[i].SummarySpent = text, r.Label(), spent
	}
	return nil
}
