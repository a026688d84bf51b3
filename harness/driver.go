package harness

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"tine/model"
)

// Store is what the driver persists through; *store.Store satisfies it, so
// no backend imports the store.
type Store interface {
	Run(ctx context.Context, id string) (model.Run, error)
	Messages(ctx context.Context, runID string) ([]model.Message, int, error)
	// Shape is the transcript with roles, part kinds and tool ids only:
	// enough to find pair-safe cuts, cheap on long runs.
	Shape(ctx context.Context, runID string) ([]model.Message, error)
	CreateForks(ctx context.Context, forks []*model.Run) error
	AppendMessages(ctx context.Context, runID string, msgs []model.Message) error
	SetStatus(ctx context.Context, id string, st model.Status, errText string) error
	SetNativeID(ctx context.Context, id, nativeID string) error
	SetHidden(ctx context.Context, id string, hidden bool) error
	AddCost(ctx context.Context, id string, usd float64) error
}

// Coster is a harness that can price usage.
type Coster interface {
	Cost(model string, u model.Usage) (usd float64, known bool)
}

// MaxForks bounds how many forks one request makes.
const MaxForks = 10

// ForkSpec asks for N forks of a run at one boundary.
type ForkSpec struct {
	Parent string             // the run to fork
	At     model.ContinueFrom // end, last_user, K or step:N
	N      int                // 1..MaxForks
	// Names: none (default <parent>-fork-<i>), or one per fork.
	Names []string
	// Messages: none (create the forks only: they cost nothing until used),
	// one for every fork, or one per fork.
	Messages []string
	Harness  string // "" means the parent's
	Model    string
	// ReplaceOriginal hides the parent in views once the forks exist: what
	// regenerating with replace_original does (rule 7).
	ReplaceOriginal bool
}

// RunEvent is what the driver reports while forks run, for a UI.
type RunEvent struct {
	RunID   string
	Status  model.Status // set when the status changed
	Message *model.Message
	Delta   string
	Err     error
}

// Driver makes forks and runs their turns, persisting as it goes.
type Driver struct {
	Store     Store
	Harnesses *Registry
	// Parallel bounds how many turns run at once (default 4).
	Parallel int
	// DefaultHarness, when set, is used for runs whose own harness cannot
	// run turns here (the demo forks everything through "script").
	DefaultHarness string
	Now            func() time.Time
}

func (d *Driver) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

// Fork creates the forks spec asks for, in one transaction, and returns
// them with the cut they were made at. Creating forks calls no backend
// (rule 4); their first turns are RunTurns' job.
func (d *Driver) Fork(ctx context.Context, spec ForkSpec) ([]model.Run, model.Cut, error) {
	if spec.N == 0 {
		spec.N = max(len(spec.Names), len(spec.Messages), 1)
	}
	if spec.N < 1 || spec.N > MaxForks {
		return nil, model.Cut{}, fmt.Errorf("-n must be 1 to %d, not %d", MaxForks, spec.N)
	}
	if len(spec.Names) != 0 && len(spec.Names) != spec.N {
		return nil, model.Cut{}, fmt.Errorf("%d names for %d forks: give none or one per fork", len(spec.Names), spec.N)
	}
	if len(spec.Messages) > 1 && len(spec.Messages) != spec.N {
		return nil, model.Cut{}, fmt.Errorf("%d messages for %d forks: give one for all or one per fork", len(spec.Messages), spec.N)
	}
	parent, err := d.Store.Run(ctx, spec.Parent)
	if err != nil {
		return nil, model.Cut{}, err
	}
	msgs, err := d.Store.Shape(ctx, parent.ID)
	if err != nil {
		return nil, model.Cut{}, err
	}
	cut, err := model.Resolve(msgs, spec.At)
	if err != nil {
		return nil, cut, err
	}
	hname, h, err := d.harnessFor(parent, spec.Harness)
	if err != nil {
		return nil, cut, err
	}
	if caps := h.Capabilities(); !caps.ForkAtK && cut.K != len(msgs) {
		return nil, cut, fmt.Errorf("harness %s can only fork at the end of a run (K=%d), not at K=%d", hname, len(msgs), cut.K)
	}
	forks := make([]*model.Run, spec.N)
	now := d.now()
	for i := range forks {
		name := fmt.Sprintf("%s-fork-%d", parent.Label(), i+1)
		if len(spec.Names) > 0 {
			name = spec.Names[i]
		}
		forks[i] = &model.Run{
			ParentID: parent.ID, ForkAt: cut.K, ForkStep: cut.Step, Asked: cut.Asked, SnapReason: cut.Reason,
			ParentLen: len(msgs), Name: name, Harness: hname, Model: spec.Model, Cwd: parent.Cwd, Branch: parent.Branch,
			Title: parent.Title, Status: model.Pending,
			// Distinct times keep siblings in the order they were asked for.
			CreatedAt: now.Add(time.Duration(i) * time.Microsecond),
		}
		if forks[i].Model == "" && hname == parent.Harness {
			forks[i].Model = parent.Model
		}
	}
	if err := d.Store.CreateForks(ctx, forks); err != nil {
		return nil, cut, err
	}
	if spec.ReplaceOriginal {
		if err := d.Store.SetHidden(ctx, parent.ID, true); err != nil {
			return nil, cut, err
		}
	}
	out := make([]model.Run, len(forks))
	for i, f := range forks {
		out[i] = *f
	}
	return out, cut, nil
}

// harnessFor picks the harness a run continues with.
func (d *Driver) harnessFor(r model.Run, asked string) (string, Harness, error) {
	name := asked
	if name == "" {
		name = r.Harness
		if _, err := d.Harnesses.Get(name); err != nil && d.DefaultHarness != "" {
			name = d.DefaultHarness
		}
	}
	h, err := d.Harnesses.Get(name)
	if err != nil {
		if asked == "" {
			return "", nil, fmt.Errorf("run %s was made by %q, which cannot run turns here; pick one with --harness (%s)",
				r.Label(), r.Harness, strings.Join(d.Harnesses.Names(), ", "))
		}
		return "", nil, err
	}
	return name, h, nil
}

// ErrParentMovedOn refuses a first turn whose branch point no longer is
// where the parent ends, on a harness that can only fork at the end (rule 5).
var ErrParentMovedOn = errors.New("the parent moved on; fork again from where it is now")

// Turn is one turn to run: a run and the message it gets ("" asks the
// model to answer again).
type Turn struct {
	RunID string
	Input string
}

// RunTurns runs turns concurrently, at most Parallel at a time, streaming
// each event into the store as it arrives and reporting it to onEvent
// (which may be nil). Every run ends completed, failed (with the reason) or
// cancelled; the returned runs are as stored at the end. A failed turn does
// not stop the others.
func (d *Driver) RunTurns(ctx context.Context, turns []Turn, onEvent func(RunEvent)) []model.Run {
	if onEvent == nil {
		onEvent = func(RunEvent) {}
	}
	parallel := d.Parallel
	if parallel <= 0 {
		parallel = 4
	}
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for _, t := range turns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
			}
			d.runTurn(ctx, t, onEvent)
		}()
	}
	wg.Wait()
	out := make([]model.Run, 0, len(turns))
	for _, t := range turns {
		r, err := d.Store.Run(context.WithoutCancel(ctx), t.RunID)
		if err == nil {
			out = append(out, r)
		}
	}
	return out
}

// runTurn runs one turn and records how it ended.
func (d *Driver) runTurn(ctx context.Context, t Turn, onEvent func(RunEvent)) {
	// Bookkeeping must land even when ctx is cancelled.
	bg := context.WithoutCancel(ctx)
	finish := func(st model.Status, err error) {
		text := ""
		if err != nil {
			text = OneLine(err.Error(), 500)
		}
		if serr := d.Store.SetStatus(bg, t.RunID, st, text); serr != nil && err == nil {
			err = serr
		}
		onEvent(RunEvent{RunID: t.RunID, Status: st, Err: err})
	}
	if ctx.Err() != nil {
		finish(model.Cancelled, errors.New("cancelled before it started"))
		return
	}
	run, err := d.Store.Run(bg, t.RunID)
	if err != nil {
		onEvent(RunEvent{RunID: t.RunID, Err: err})
		return
	}
	hname, h, err := d.harnessFor(run, run.Harness)
	if err != nil {
		finish(model.Failed, err)
		return
	}
	run.Harness = hname
	prefix, _, err := d.Store.Messages(bg, run.ID)
	if err != nil {
		finish(model.Failed, err)
		return
	}
	if run.Status == model.Pending && run.ParentID != "" && !h.Capabilities().ForkAtK {
		parent, err := d.Store.Run(bg, run.ParentID)
		if err != nil {
			finish(model.Failed, err)
			return
		}
		if parent.Len() != run.ParentLen {
			finish(model.Failed, fmt.Errorf("%w (it had %d messages at the fork, %d now)", ErrParentMovedOn, run.ParentLen, parent.Len()))
			return
		}
	}
	if t.Input == "" && len(prefix) > 0 && prefix[len(prefix)-1].Role == model.Assistant && len(prefix[len(prefix)-1].ToolCalls()) == 0 {
		finish(model.Failed, errors.New("nothing to answer: the run ends with the model's reply; give a message"))
		return
	}
	if err := d.Store.SetStatus(bg, run.ID, model.Running, ""); err != nil {
		onEvent(RunEvent{RunID: t.RunID, Err: err})
		return
	}
	onEvent(RunEvent{RunID: run.ID, Status: model.Running})

	var storeErr error
	emit := func(e Event) {
		if storeErr != nil {
			return
		}
		switch e.Kind {
		case EventDelta:
			onEvent(RunEvent{RunID: run.ID, Delta: e.Delta})
		case EventSession:
			storeErr = d.Store.SetNativeID(bg, run.ID, e.NativeID)
		case EventMessage:
			m := e.Message
			if m.Time.IsZero() {
				m.Time = d.now()
			}
			if storeErr = d.Store.AppendMessages(bg, run.ID, []model.Message{m}); storeErr != nil {
				return
			}
			if c, ok := h.(Coster); ok && !m.Usage.IsZero() {
				if usd, known := c.Cost(m.Model, m.Usage); known {
					storeErr = d.Store.AddCost(bg, run.ID, usd)
				}
			}
			onEvent(RunEvent{RunID: run.ID, Message: &m})
		}
	}
	err = h.Turn(ctx, TurnRequest{Run: run, Prefix: prefix, Input: t.Input, Model: run.Model}, emit)
	switch {
	case storeErr != nil:
		finish(model.Failed, fmt.Errorf("saving the turn: %w", storeErr))
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		finish(model.Cancelled, errors.New("cancelled"))
	case err != nil:
		finish(model.Failed, err)
	default:
		finish(model.Completed, nil)
	}
}

// Continue gives run id a new turn. A run that has finished is never
// written to again (rule 7): it is forked at its end and the fork gets the
// turn. A pending fork gets its first turn.
func (d *Driver) Continue(ctx context.Context, id, input, harnessName string, onEvent func(RunEvent)) (model.Run, error) {
	run, err := d.Store.Run(ctx, id)
	if err != nil {
		return model.Run{}, err
	}
	target := run.ID
	if run.Status != model.Pending {
		forks, _, err := d.Fork(ctx, ForkSpec{Parent: run.ID, At: "end", N: 1, Harness: harnessName})
		if err != nil {
			return model.Run{}, err
		}
		target = forks[0].ID
	}
	runs := d.RunTurns(ctx, []Turn{{RunID: target, Input: input}}, onEvent)
	if len(runs) == 0 {
		return model.Run{}, fmt.Errorf("run %s vanished", target)
	}
	return runs[0], nil
}
