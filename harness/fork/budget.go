package fork

import (
	"context"
	"errors"
	"fmt"

	"tine/harness"
	"tine/model"
)

// CheckBudget refuses, before anything is made, a budget the driver could
// not keep: a cost bound for a model whose price tine does not know
// (harness h's own, for a model API that prices its usage, else
// model.PriceOf). modelName is the model the fork will ask for; "" (the
// agent's default, not known before it answers) is checked as its
// messages arrive instead.
func CheckBudget(b model.Budget, h harness.Harness, modelName string) error {
	if b.USD <= 0 || modelName == "" {
		return nil
	}
	if _, ok := priceOf(h)(modelName, model.Usage{OutputTokens: 1}); !ok {
		return unpricedError(modelName, b)
	}
	return nil
}

// priceOf is how the driver prices a model's usage on harness h: a model
// API prices its own provider's models (Coster); an agent's are priced
// from the table by the model each message names.
func priceOf(h harness.Harness) func(string, model.Usage) (float64, bool) {
	if c, ok := h.(Coster); ok {
		return c.Cost
	}
	return func(name string, u model.Usage) (float64, bool) {
		p, ok := model.PriceOf(name)
		if !ok {
			return 0, false
		}
		return p.Cost(u), true
	}
}

// unpricedError says that a cost budget cannot be kept for modelName.
func unpricedError(modelName string, b model.Budget) error {
	return fmt.Errorf("--max-cost %s: tine does not know the price of model %q, so it cannot keep a cost budget; bound its tokens with --max-tokens instead (the models tine prices are in the README, under Budgets)",
		model.USD(b.USD), model.OneLine(modelName, 80))
}

// SetBudget gives run id the budget b in place of its own (tine run
// --max-tokens, --max-cost), once CheckBudget allows it.
func (d *Driver) SetBudget(ctx context.Context, id string, b model.Budget) error {
	run, err := d.Store.Run(ctx, id)
	if err != nil {
		return err
	}
	_, h, err := d.harnessFor(run, run.Harness)
	if err != nil {
		return err
	}
	if err := CheckBudget(b, h, run.Model); err != nil {
		return err
	}
	return d.Store.SetBudget(ctx, id, b)
}

// Spent is the budget error run's next turn fails with before it starts
// (nil when it has some budget left): a fork that has spent its budget
// does not start another turn.
func (d *Driver) Spent(ctx context.Context, run model.Run) error {
	if run.Budget.IsZero() {
		return nil
	}
	_, h, err := d.harnessFor(run, run.Harness)
	if err != nil {
		return err
	}
	msgs, _, err := d.Store.Messages(ctx, run.ID)
	if err != nil {
		return err
	}
	return newMeter(run, msgs, priceOf(h)).left()
}

// meter counts what a run has spent of its own against its budget while
// its turn streams (rule 6 in ARCHITECTURE.md: a fork's usage is its own
// messages'): the tokens of its own messages (model.Usage.Total, as tine
// ls counts them), and their cost, the more of what the table prices
// them at and what was stored as their cost (agents that price their own
// usage report it, Claude Code and pi at a turn's end).
type meter struct {
	b       model.Budget
	model   string // the run's model, for a message that names none
	priceOf func(string, model.Usage) (float64, bool)
	tokens  int64
	priced  float64 // own messages at list price
	stored  float64 // as the store holds it: reported, or priced by an API harness
	// unpriced is a model of this turn's whose price is unknown while a
	// cost bound is set: the bound cannot be kept.
	unpriced string
}

// newMeter starts counting from what run has spent so far: its own usage
// and cost as stored, and its own messages (msgs[run.ForkAt:]) priced.
func newMeter(run model.Run, msgs []model.Message, priceOf func(string, model.Usage) (float64, bool)) *meter {
	m := &meter{b: run.Budget, model: run.Model, priceOf: priceOf, tokens: run.Usage.Total(), stored: run.CostUSD}
	if m.b.USD > 0 {
		for _, msg := range msgs[min(run.ForkAt, len(msgs)):] {
			if usd, ok := m.price(msg); ok {
				m.priced += usd
			}
		}
	}
	return m
}

// price is what msg cost, at the table's price of its model (the run's
// when it names none).
func (m *meter) price(msg model.Message) (float64, bool) {
	if msg.Usage.IsZero() {
		return 0, true
	}
	name := msg.Model
	if name == "" {
		name = m.model
	}
	return m.priceOf(name, msg.Usage)
}

// message counts a message the turn stored.
func (m *meter) message(msg model.Message) {
	m.tokens += msg.Usage.Total()
	if m.b.USD <= 0 {
		return
	}
	if usd, ok := m.price(msg); ok {
		m.priced += usd
	} else if m.unpriced == "" {
		m.unpriced = msg.Model
		if m.unpriced == "" {
			m.unpriced = m.model
		}
	}
}

// cost counts money stored as the run's cost.
func (m *meter) cost(usd float64) { m.stored += usd }

func (m *meter) usd() float64 { return max(m.priced, m.stored) }

// left is the error a turn that has spent what the meter holds fails
// with before it starts: none of its budget is left.
func (m *meter) left() error {
	if err := m.b.Over(m.tokens, m.usd(), true); err != nil {
		return fmt.Errorf("%w: nothing is left for another turn; give it a larger budget with tine run --max-tokens or --max-cost", err)
	}
	return nil
}

// over is the error the turn is stopped with, nil while it is within its
// budget.
func (m *meter) over() error {
	if m.b.IsZero() {
		return nil
	}
	if err := m.b.Over(m.tokens, m.usd(), false); err != nil {
		return err
	}
	if m.unpriced != "" {
		return fmt.Errorf("%w: %w", model.ErrOverBudget, unpricedError(m.unpriced, m.b))
	}
	return nil
}

// budgetStop is the cause a turn's context is cancelled with when its
// budget stops it; Err is said when the turn ends, with what it spent by
// then.
type budgetStop struct{ err error }

func (b *budgetStop) Error() string { return b.err.Error() }

// stoppedByBudget reports whether ctx was cancelled because the turn went
// over its budget.
func stoppedByBudget(ctx context.Context) bool {
	var bs *budgetStop
	return errors.As(context.Cause(ctx), &bs)
}
