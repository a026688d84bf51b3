package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"tine/harness/turns"
	"tine/model"
	"tine/replay"
)

// ReplayRequest asks for a run's world rebuilt at step AtStep and forked
// there (rule 9 in ARCHITECTURE.md).
type ReplayRequest struct {
	Run    string
	AtStep int
	// Continuations is how many live continuations (0..10); 0 only
	// verifies that the run reproduces to AtStep.
	Continuations int
	// OnDivergence is stop (the default) or live.
	OnDivergence string
	Base         string // the commit the sandbox starts at ("": the run's)
	Check        string
	CheckNumber  bool
	Budget       model.Budget
	How
}

// Spec is the replay req asks for, but for its run (its id, once
// resolved).
func (req ReplayRequest) Spec() replay.Spec {
	spec := replay.Spec{AtStep: req.AtStep, Continuations: req.Continuations, OnDivergence: replay.OnDivergence(req.OnDivergence),
		Base: req.Base, Check: req.Check, CheckNumber: req.CheckNumber, Budget: req.Budget}
	if spec.OnDivergence == "" {
		spec.OnDivergence = replay.Stop
	}
	return spec
}

// Valid says what is wrong with the request's own values, before any
// store is opened or run read.
func (req ReplayRequest) Valid() error {
	if req.AtStep < 1 {
		return invalidf("replay: --at-step N is required (N >= 1)")
	}
	if err := req.Spec().Valid(); err != nil {
		return invalidf("replay: %s", err)
	}
	return checkBudget("replay", req.Budget)
}

// Replayed is a replay's trials as stored, and, for a run that cannot be
// replayed, why (Status unreplayed, nothing made).
type Replayed struct {
	Replay
	Plan *replay.Plan
}

// Replay rebuilds a recorded run's world at a step and forks it there:
// its trials run here (Wait) or where nobody waits (Starter).
func (s *Service) Replay(ctx context.Context, req ReplayRequest) (Replayed, error) {
	if err := req.Valid(); err != nil {
		return Replayed{}, err
	}
	spec := req.Spec()
	rp := s.Replayer
	if rp == nil {
		return Replayed{}, &Error{Code: Refused, Err: errors.New("this face of tine replays no runs")}
	}
	if err := s.writable(); err != nil {
		return Replayed{}, err
	}
	run, err := s.resolve(ctx, req.Run)
	if err != nil {
		return Replayed{}, err
	}
	spec.Run = run.ID
	release, err := s.admit(!req.Wait, max(spec.Continuations, 1))
	if err != nil {
		return Replayed{}, err
	}
	defer release()
	plan, err := rp.Prepare(ctx, spec)
	var un *replay.Unreplayable
	if errors.As(err, &un) {
		return Replayed{Replay: Replay{Status: string(model.ReplayUnreplayed), Reason: un.Why, Trials: []Trial{}, TrialIDs: []string{}}}, nil
	}
	if err != nil {
		return Replayed{}, refused(err)
	}
	if req.Wait || s.Turns == nil {
		if _, err := rp.Execute(ctx, plan, req.Progress); err != nil {
			return Replayed{Plan: plan}, err
		}
	} else {
		err := s.Turns.StartReplay(ctx, plan)
		release()
		if err != nil {
			for _, id := range turns.FailHandOver(ctx, s.Store, plan.Trials, err) {
				_ = s.Store.UpdateReplay(context.WithoutCancel(ctx), id, model.ReplayUnreplayed, 0, "", nil, "its background process never started it")
			}
			return Replayed{Plan: plan}, fmt.Errorf("the replay's forks were made, but it could not start (they are marked failed): %w", err)
		}
		if req.WaitFor > 0 {
			s.settleReplay(ctx, req.WaitFor, plan.Trials)
		}
	}
	out, err := s.ReplayReport(ctx, plan.Trials)
	return Replayed{Replay: out, Plan: plan}, err
}

// ReplayReport reads a replay's trials as stored.
func (s *Service) ReplayReport(ctx context.Context, ids []string) (Replay, error) {
	trials, err := replay.Trials(ctx, s.Store, ids)
	if err != nil {
		return Replay{}, err
	}
	return ToReplay(trials), nil
}

// settleReplay waits until every trial's prefix has settled (its replay
// is no longer replaying), or for d.
func (s *Service) settleReplay(ctx context.Context, d time.Duration, ids []string) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		rs, err := s.Store.Replays(ctx, ids)
		if err != nil {
			return
		}
		settled := true
		for _, id := range ids {
			settled = settled && rs[id].Status != model.ReplayReplaying
		}
		if settled {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(min(settlePoll, time.Until(deadline))):
		}
	}
}

// ForkStatus is a fork made with others (its batch) as the HTTP API's
// GET /api/forks/{id} answers it: for a replay, the replay (its status,
// divergence and trials); for forks, status forked and no divergence.
// Forks are the batch's runs either way.
type ForkStatus struct {
	Replay
	Forks []Fork `json:"forks"`
}

// ForkStatus reads the fork ref names and those made with it.
func (s *Service) ForkStatus(ctx context.Context, ref string) (ForkStatus, error) {
	r, err := s.resolve(ctx, ref)
	if err != nil {
		return ForkStatus{}, err
	}
	if r.ParentID == "" {
		return ForkStatus{}, &Error{Code: NotFound, Err: fmt.Errorf("run %s is no fork: it has no parent", model.SafeText(r.Label()))}
	}
	batch, err := s.Store.BatchRuns(ctx, r.ID)
	if err != nil {
		return ForkStatus{}, err
	}
	ids := make([]string, len(batch))
	for i, b := range batch {
		ids[i] = b.ID
	}
	rs, err := s.Store.Replays(ctx, ids)
	if err != nil {
		return ForkStatus{}, err
	}
	out := ForkStatus{Forks: ToForks(batch).Forks}
	if _, ok := rs[r.ID]; ok {
		trials := slices.DeleteFunc(ids, func(id string) bool { _, ok := rs[id]; return !ok })
		out.Replay, err = s.ReplayReport(ctx, trials)
		return out, err
	}
	first := batch[0].ID
	out.Replay = Replay{Fork: &first, Status: string(model.ReplayForked), TrialIDs: ids, Trials: []Trial{}}
	return out, nil
}

// Status is forks just made (Forked) as ForkStatus answers them.
func (f Forked) Status() ForkStatus {
	out := ForkStatus{Forks: ToForks(f.Runs).Forks, Replay: Replay{Status: string(model.ReplayForked), TrialIDs: []string{}, Trials: []Trial{}}}
	for _, r := range f.Runs {
		out.TrialIDs = append(out.TrialIDs, r.ID)
	}
	if len(f.Runs) > 0 {
		out.Fork = &out.TrialIDs[0]
	}
	return out
}
