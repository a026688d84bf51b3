package service

import (
	"context"
	"errors"
	"sync"
	"time"

	"tine/harness/fork"
	"tine/replay"
)

// Queue runs the turns nobody waits for in this process (tine serve): at
// most Parallel at once across every request, with room for Capacity
// turns waiting or running; a request that would pass it is refused
// (ErrBusy) before anything is made. Its turns are this process's
// (claimed in the store): should it die, the next tine fails them (rule
// 14 in ARCHITECTURE.md); Close cancels those still running, which are
// recorded cancelled.
type Queue struct {
	driver   *fork.Driver
	replayer *replay.Replayer
	capacity int

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	used int // turns admitted, waiting or running
}

// NewQueue makes a queue that runs d's turns, parallel at once (d.Slots
// is made for it), with room for capacity turns; rp runs replays.
func NewQueue(d *fork.Driver, rp *replay.Replayer, parallel, capacity int) *Queue {
	if parallel < 1 {
		parallel = fork.DefaultParallel
	}
	d.Slots = make(chan struct{}, parallel)
	// A long-lived process numbers a run's forks on from the last it gave.
	d.Numbers = &fork.Numbers{}
	ctx, cancel := context.WithCancel(context.Background())
	return &Queue{driver: d, replayer: rp, capacity: max(capacity, 1), ctx: ctx, cancel: cancel}
}

// Admit reserves room for n turns.
func (q *Queue) Admit(n int) (func(), error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ctx.Err() != nil {
		return nil, &Error{Code: Refused, Err: errors.New("tine serve is stopping: no turn starts now")}
	}
	if q.used+n > q.capacity {
		return nil, ErrBusy
	}
	q.used += n
	return sync.OnceFunc(func() { q.add(-n) }), nil
}

func (q *Queue) add(n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.used += n
}

// Used is how many turns are waiting or running.
func (q *Queue) Used() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.used
}

// StartTurns runs turns in the queue; it returns once they are claimed.
func (q *Queue) StartTurns(_ context.Context, turns []fork.Turn, _ int) error {
	ids := make([]string, len(turns))
	for i, t := range turns {
		ids[i] = t.RunID
	}
	// Claimed before the request is answered, so that a turn never looks
	// left pending (RunTurns claims them again as it starts).
	if err := q.driver.Store.ClaimTurns(q.ctx, ids); err != nil {
		return err
	}
	q.add(len(turns))
	q.wg.Go(func() {
		defer q.add(-len(turns))
		q.driver.RunTurns(q.ctx, turns, nil)
	})
	return nil
}

// StartReplay runs a prepared replay's trials in the queue.
func (q *Queue) StartReplay(_ context.Context, plan *replay.Plan) error {
	if err := q.driver.Store.ClaimTurns(q.ctx, plan.Trials); err != nil {
		return err
	}
	q.add(len(plan.Trials))
	q.wg.Go(func() {
		defer q.add(-len(plan.Trials))
		_, _ = q.replayer.Execute(q.ctx, plan, nil)
	})
	return nil
}

// Close stops the queue: its turns are cancelled (and recorded so), and
// it waits for them to end, at most grace.
func (q *Queue) Close(grace time.Duration) {
	q.cancel()
	done := make(chan struct{})
	go func() { q.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
	}
}
