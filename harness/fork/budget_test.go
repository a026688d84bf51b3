package fork_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/harness/fork"
	"tine/model"
)

// spender is a harness that makes up to calls model calls until its
// context ends: each a message of usage u of model mdl, then, when cost is
// set, the money it says the call cost. made counts the calls.
func spender(u model.Usage, mdl string, cost float64, calls int) (*fake, *atomic.Int32) {
	var made atomic.Int32
	f := &fake{name: "fake", caps: harness.Capabilities{Fork: true, ForkAtK: true, Resume: true, Stream: true}}
	f.turn = func(ctx context.Context, req harness.TurnRequest, emit func(harness.Event)) error {
		if req.Input != "" {
			emit(harness.Event{Kind: harness.EventMessage, Message: msg(model.User, req.Input, model.Usage{})})
		}
		emit(harness.Event{Kind: harness.EventSession, NativeID: "s-1"})
		for i := range calls {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			m := msg(model.Assistant, "step "+string(rune('a'+i)), u)
			m.Model = mdl
			emit(harness.Event{Kind: harness.EventMessage, Message: m})
			if cost > 0 {
				emit(harness.Event{Kind: harness.EventCost, CostUSD: cost})
			}
			made.Add(1)
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Millisecond):
			}
		}
		return ctx.Err()
	}
	return f, &made
}

// TestBudgetStopsAForkThatGoesOverItsTokens: a fork given --max-tokens is
// stopped as soon as the usage its agent reports goes over, through the
// turn's cancellation, and is recorded failed with what it spent; what it
// had streamed stays.
func TestBudgetStopsAForkThatGoesOverItsTokens(t *testing.T) {
	f, made := spender(model.Usage{InputTokens: 5000, CacheReadTokens: 1000, OutputTokens: 200}, "", 0, 10)
	st, d, root := setup(t, f)
	ctx := context.Background()
	forks, _, err := d.Fork(ctx, fork.ForkSpec{Parent: root.ID, Budget: model.Budget{Tokens: 10_000}})
	require.NoError(t, err)
	assert.Equal(t, model.Budget{Tokens: 10_000}, forks[0].Budget)
	var events []fork.RunEvent
	runs := d.RunTurns(ctx, []fork.Turn{{RunID: forks[0].ID, Input: "go on"}}, func(e fork.RunEvent) { events = append(events, e) })
	require.Len(t, runs, 1)
	r := runs[0]
	assert.Equal(t, model.Failed, r.Status)
	// Cache reads count: 2 calls of 6,200 tokens each.
	assert.Equal(t, "budget: 12,400 tokens spent, over --max-tokens 10,000; stopped, and what it had streamed is kept", r.Error)
	assert.EqualValues(t, 2, made.Load(), "stopped at the call that went over, not left to run its 10")
	assert.Equal(t, 3, r.OwnMessages, "the person's message and both calls are kept")
	msgs, _, err := st.Messages(ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, "step b", msgs[len(msgs)-1].PlainText())
	assert.Equal(t, int64(12_400), r.Usage.Total())
	last := events[len(events)-1]
	assert.Equal(t, model.Failed, last.Status)
	require.Error(t, last.Err)
	assert.ErrorIs(t, last.Err, model.ErrOverBudget)

	// Within its budget a fork runs to its end.
	forks, _, err = d.Fork(ctx, fork.ForkSpec{Parent: root.ID, Budget: model.Budget{Tokens: 100_000}})
	require.NoError(t, err)
	runs = d.RunTurns(ctx, []fork.Turn{{RunID: forks[0].ID, Input: "go on"}}, nil)
	assert.Equal(t, model.Completed, runs[0].Status, runs[0].Error)
	assert.Equal(t, 11, runs[0].OwnMessages)
}

// TestBudgetStopsAForkThatGoesOverItsCost: --max-cost counts what the
// model's messages cost at list price as they arrive, and what the agent
// reports it spent (whichever is more).
func TestBudgetStopsAForkThatGoesOverItsCost(t *testing.T) {
	// claude-haiku-4-5: $1 a million input tokens, $5 output: $0.15 a call.
	f, made := spender(model.Usage{InputTokens: 100_000, OutputTokens: 10_000}, "claude-haiku-4-5-20251001", 0, 10)
	_, d, root := setup(t, f)
	ctx := context.Background()
	forks, _, err := d.Fork(ctx, fork.ForkSpec{Parent: root.ID, Budget: model.Budget{USD: 0.25}})
	require.NoError(t, err)
	runs := d.RunTurns(ctx, []fork.Turn{{RunID: forks[0].ID, Input: "go on"}}, nil)
	assert.Equal(t, model.Failed, runs[0].Status)
	assert.Equal(t, "budget: $0.30 spent, over --max-cost $0.25; stopped, and what it had streamed is kept", runs[0].Error)
	assert.EqualValues(t, 2, made.Load())

	// An agent that prices its own calls higher is held to its figure.
	f2, made2 := spender(model.Usage{InputTokens: 1000, OutputTokens: 100}, "claude-haiku-4-5", 0.2, 10)
	_, d2, root2 := setup(t, f2)
	forks, _, err = d2.Fork(ctx, fork.ForkSpec{Parent: root2.ID, Budget: model.Budget{USD: 0.5}})
	require.NoError(t, err)
	runs = d2.RunTurns(ctx, []fork.Turn{{RunID: forks[0].ID, Input: "go on"}}, nil)
	assert.Equal(t, model.Failed, runs[0].Status)
	assert.Contains(t, runs[0].Error, "budget: $0.60 spent, over --max-cost $0.50")
	assert.EqualValues(t, 3, made2.Load())
	assert.InDelta(t, 0.6, runs[0].CostUSD, 1e-9, "the cost it reported is stored, as always")
}

// TestBudgetOfAnUnknownPrice: a cost budget tine cannot keep is refused
// before anything is made when the fork's model is known, and stops the
// turn at the first message of a model it cannot price when it is not.
func TestBudgetOfAnUnknownPrice(t *testing.T) {
	f, made := spender(model.Usage{InputTokens: 10, OutputTokens: 10}, "mystery-model", 0, 5)
	st, d, root := setup(t, f)
	ctx := context.Background()
	_, _, err := d.Fork(ctx, fork.ForkSpec{Parent: root.ID, Model: "tine-test-model", Budget: model.Budget{USD: 1}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `tine does not know the price of model "tine-test-model"`)
	assert.Contains(t, err.Error(), "--max-tokens")
	kids, err := st.ForkNames(ctx, root.ID)
	require.NoError(t, err)
	assert.Empty(t, kids, "nothing was made")
	_, _, err = d.Fork(ctx, fork.ForkSpec{Parent: root.ID, Model: "claude-sonnet-4-5", Budget: model.Budget{USD: 1}})
	require.NoError(t, err, "a priced model is fine")
	_, _, err = d.Fork(ctx, fork.ForkSpec{Parent: root.ID, Model: "tine-test-model", Budget: model.Budget{Tokens: 100}})
	require.NoError(t, err, "a token budget needs no price")

	forks, _, err := d.Fork(ctx, fork.ForkSpec{Parent: root.ID, Budget: model.Budget{USD: 1}})
	require.NoError(t, err, "the agent's default model is not known before it answers")
	runs := d.RunTurns(ctx, []fork.Turn{{RunID: forks[0].ID, Input: "go on"}}, nil)
	assert.Equal(t, model.Failed, runs[0].Status)
	assert.Contains(t, runs[0].Error, `budget: --max-cost $1.00: tine does not know the price of model "mystery-model"`)
	assert.EqualValues(t, 1, made.Load())
}

// TestBudgetIsKeptByRetryAndLaterTurns: a fork's budget is stored with
// it: its retry gets the same, and a fork that spent it starts no other
// turn until it is given more.
func TestBudgetIsKeptByRetryAndLaterTurns(t *testing.T) {
	f, _ := spender(model.Usage{InputTokens: 600, OutputTokens: 100}, "", 0, 3)
	_, d, root := setup(t, f)
	ctx := context.Background()
	forks, _, err := d.Fork(ctx, fork.ForkSpec{Parent: root.ID, Names: []string{"b"}, Budget: model.Budget{Tokens: 1000}})
	require.NoError(t, err)
	runs := d.RunTurns(ctx, []fork.Turn{{RunID: forks[0].ID, Input: "go on"}}, nil)
	require.Equal(t, model.Failed, runs[0].Status)

	fresh, input, err := d.PrepareRetry(ctx, forks[0].ID)
	require.NoError(t, err)
	assert.Equal(t, "go on", input)
	assert.Equal(t, model.Budget{Tokens: 1000}, fresh.Budget, "the retry keeps the budget")

	calls := f.calls.Load()
	r, err := d.Continue(ctx, forks[0].ID, "more", "", nil)
	require.NoError(t, err)
	assert.Equal(t, forks[0].ID, r.ID, "a fork tine made gets its next turn itself")
	assert.Equal(t, model.Failed, r.Status)
	assert.Equal(t, "budget: 1,400 tokens spent, over --max-tokens 1,000: nothing is left for another turn; give it a larger budget with tine run --max-tokens or --max-cost", r.Error)
	assert.Equal(t, calls, f.calls.Load(), "its agent was not started")

	require.NoError(t, d.SetBudget(ctx, r.ID, model.Budget{Tokens: 10_000}))
	r, err = d.Continue(ctx, r.ID, "more", "", nil)
	require.NoError(t, err)
	assert.Equal(t, model.Completed, r.Status, r.Error)
	assert.Equal(t, int64(1400+3*700), r.Usage.Total(), "the budget bounds its own spending over all its turns")
}
