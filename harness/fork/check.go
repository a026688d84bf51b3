package fork

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"tine/harness/place"
	"tine/model"
)

// PickBest chooses the best of runs, a whole batch, by their checks: the
// highest score (for an exit-status check, only forks that passed), then
// fewer tokens, then less time. It returns "" when no run qualifies, with
// why; the reason counts the batch.
func PickBest(runs []model.Run) (id, reason string) {
	var cands []model.Run
	checked := 0
	for _, r := range runs {
		c := r.Check
		if c == nil || !c.Ran {
			continue
		}
		checked++
		if c.Score == nil || c.Error != "" || (!c.Number && *c.Score <= 0) {
			continue
		}
		cands = append(cands, r)
	}
	if checked == 0 {
		return "", "no fork's check ran"
	}
	if len(cands) == 0 {
		if !firstChecked(runs).Number {
			return "", fmt.Sprintf("no fork passed the check (%d checked)", checked)
		}
		return "", "no fork's check gave a score"
	}
	took := func(r model.Run) time.Duration {
		if r.FinishedAt.IsZero() {
			return 1<<63 - 1
		}
		return r.Took()
	}
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if *a.Check.Score != *b.Check.Score {
			return *a.Check.Score > *b.Check.Score
		}
		if a.Usage.Total() != b.Usage.Total() {
			return a.Usage.Total() < b.Usage.Total()
		}
		return took(a) < took(b)
	})
	best := cands[0]
	switch {
	case best.Check.Number && len(cands) == 1:
		reason = fmt.Sprintf("the only score: %g", *best.Check.Score)
	case best.Check.Number && *cands[1].Check.Score < *best.Check.Score:
		reason = fmt.Sprintf("highest score: %g (next %g)", *best.Check.Score, *cands[1].Check.Score)
	case len(cands) == 1 && len(runs) == 1:
		reason = "its check passed"
	case len(cands) == 1:
		// Of the whole batch: a fork that failed, or whose turn has not
		// run yet, was not checked, and is still one of the batch.
		reason = fmt.Sprintf("the only fork of %d whose check passed", len(runs))
		if checked < len(runs) {
			reason += fmt.Sprintf(" (%d not checked)", len(runs)-checked)
		}
	case best.Usage.Total() < cands[1].Usage.Total():
		reason = fmt.Sprintf("%d passed; fewest tokens (%d vs %d)", len(cands), best.Usage.Total(), cands[1].Usage.Total())
	default:
		reason = fmt.Sprintf("%d passed with as many tokens; fastest (%s vs %s)", len(cands),
			took(best).Round(time.Second), took(cands[1]).Round(time.Second))
	}
	return best.ID, reason
}

func firstChecked(runs []model.Run) *model.Check {
	for _, r := range runs {
		if r.Check != nil && r.Check.Ran {
			return r.Check
		}
	}
	return &model.Check{}
}

// runChecks runs the checks of the runs that finished with one, at most
// Parallel at a time, stores each result, then marks the best of each
// batch they are of (rule 11).
// It returns the runs as stored afterwards.
func (d *Driver) runChecks(ctx context.Context, runs []model.Run, onEvent func(RunEvent)) []model.Run {
	bg := context.WithoutCancel(ctx)
	parallel := max(d.Parallel, 1)
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	started := false
	for i, r := range runs {
		if r.Check == nil || r.Check.Ran || r.Status != model.Completed {
			continue
		}
		started = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			c := d.check(ctx, r)
			if err := d.Store.SetCheck(bg, r.ID, c); err != nil {
				c.Error = err.Error()
			}
			runs[i].Check = &c
			onEvent(RunEvent{RunID: r.ID})
		}()
	}
	wg.Wait()
	if !started {
		return runs
	}
	// The best is the best of its batch (the forks made together), all of
	// it as stored: some of its forks may have run elsewhere, or before.
	done := map[string]bool{}
	for _, r := range runs {
		if r.Check == nil || !r.Check.Ran || done[batchKey(r)] {
			continue
		}
		done[batchKey(r)] = true
		batch, err := d.Store.BatchRuns(bg, r.ID)
		if err != nil {
			continue
		}
		id, reason := PickBest(batch)
		if id == "" || d.Store.MarkBest(bg, id, reason) != nil {
			continue
		}
		for i := range runs {
			if batchKey(runs[i]) == batchKey(r) {
				runs[i].Best = runs[i].ID == id
				runs[i].BestReason = ""
				if runs[i].Best {
					runs[i].BestReason = reason
				}
			}
		}
		onEvent(RunEvent{RunID: id})
	}
	return runs
}

// check runs fork r's check: where an agent's fork has its files (its
// place), or, for a model API's fork, which has none, in its directory.
func (d *Driver) check(ctx context.Context, r model.Run) model.Check {
	if _, h, err := d.harnessFor(r, r.Harness); err != nil || !h.Capabilities().OwnSessions {
		if r.Cwd == "" {
			// Never tine's own directory instead (rule 12 in ARCHITECTURE.md).
			return model.Check{Cmd: r.Check.Cmd, Number: r.Check.Number, Ran: true, Exit: -1,
				Error: fmt.Sprintf("fork %s has no directory, so its check has nowhere to run", r.Label())}
		}
		return place.RunCheck(ctx, r.Cwd, r.Check.Cmd, r.Check.Number, d.CheckTimeout)
	}
	pl, err := d.PlaceOf(r)
	if err != nil {
		return model.Check{Cmd: r.Check.Cmd, Number: r.Check.Number, Ran: true, Exit: -1, Error: err.Error()}
	}
	return pl.Check(ctx, r, *r.Check, d.CheckTimeout)
}

// batchKey names r's batch; a run made in none is a batch of its own.
func batchKey(r model.Run) string {
	if r.Batch == "" {
		return "run:" + r.ID
	}
	return r.Batch
}
