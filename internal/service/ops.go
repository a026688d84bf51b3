package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"tine/harness/fork"
	"tine/model"
)

// CancelWait is how long Cancel waits for a running fork's owner to stop
// it: the owner polls for the request about twice a second.
const CancelWait = 15 * time.Second

// Cancel stops the runs refs name, whichever tine process runs them: a
// pending or queued one is cancelled before it starts, a running one is
// asked to stop and waited for (up to wait) to say how it ended; with no
// wait it is left stopping (its owner polls for the request: the TUI
// follows it on its screen). What they streamed is kept.
func (s *Service) Cancel(ctx context.Context, refs []string, wait time.Duration) ([]Cancelled, error) {
	if len(refs) == 0 {
		return nil, invalidf("cancel: name a run to stop")
	}
	if err := s.writable(); err != nil {
		return nil, err
	}
	var out []Cancelled
	var running []int
	for _, ref := range refs {
		r, err := s.resolve(ctx, ref)
		if err != nil {
			return out, err
		}
		was, err := s.Store.RequestCancel(ctx, r.ID)
		if err != nil {
			return out, err
		}
		c := Cancelled{Run: r.ID, Name: r.Label(), Was: string(was), Status: string(was)}
		switch was {
		case model.Running:
			running = append(running, len(out))
		case model.Pending, model.Queued:
			c.Status = string(model.Cancelled)
		}
		out = append(out, c)
	}
	if wait <= 0 {
		return out, nil
	}
	deadline := time.Now().Add(wait)
	for _, i := range running {
		for {
			now, err := s.Store.Run(ctx, out[i].Run)
			if err != nil {
				return out, err
			}
			if now.Status != model.Running {
				out[i].Status = string(now.Status)
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return out, &Error{Code: Conflict, Err: fmt.Errorf("asked %s to stop, but it is still running (owner process %d)", out[i].Name, now.OwnerPID)}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return out, nil
}

// Apply brings the work of the fork ref names (its commits since the fork
// and its uncommitted changes) into the checkout it was made from: as
// uncommitted changes, or as one commit. It refuses, changing nothing,
// when the checkout has its own changes to those files or they do not
// apply cleanly.
func (s *Service) Apply(ctx context.Context, ref string, commit bool) (fork.Applied, error) {
	run, err := s.resolve(ctx, ref)
	if err != nil {
		return fork.Applied{}, err
	}
	a, err := fork.Apply(ctx, run, commit)
	if err != nil && CodeOf(err) == Internal && !errors.Is(err, context.Canceled) {
		err = &Error{Code: Conflict, Err: err}
	}
	return a, err
}

// Pick records a person's pick of the best (rule 11 in ARCHITECTURE.md):
// the run ref names is the best of the runs among name (they lose their
// mark), or, with none, of its batch; best false unmarks it alone. The
// TUI's Compare screen offers it.
func (s *Service) Pick(ctx context.Context, ref string, best bool, among []string) error {
	if err := s.writable(); err != nil {
		return err
	}
	run, err := s.resolve(ctx, ref)
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(among))
	for _, a := range among {
		r, err := s.resolve(ctx, a)
		if err != nil {
			return err
		}
		ids = append(ids, r.ID)
	}
	return s.Store.SetBest(ctx, run.ID, best, ids...)
}
