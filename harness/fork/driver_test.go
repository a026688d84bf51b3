package fork_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/harness/fork"
	"tine/harness/script"
	"tine/model"
	"tine/store"
)

// fake is a scriptable harness that counts its calls.
type fake struct {
	name    string
	caps    harness.Capabilities
	calls   atomic.Int32
	running atomic.Int32
	peak    atomic.Int32
	turn    func(ctx context.Context, req harness.TurnRequest, emit func(harness.Event)) error
}

func (f *fake) Name() string                       { return f.name }
func (f *fake) Capabilities() harness.Capabilities { return f.caps }
func (f *fake) Turn(ctx context.Context, req harness.TurnRequest, emit func(harness.Event)) error {
	f.calls.Add(1)
	n := f.running.Add(1)
	defer f.running.Add(-1)
	for {
		p := f.peak.Load()
		if n <= p || f.peak.CompareAndSwap(p, n) {
			break
		}
	}
	if f.turn != nil {
		return f.turn(ctx, req, emit)
	}
	if req.Input != "" {
		emit(harness.Event{Kind: harness.EventMessage, Message: msg(model.User, req.Input, model.Usage{})})
	}
	emit(harness.Event{Kind: harness.EventMessage, Message: msg(model.Assistant, "reply to "+req.Input, model.Usage{InputTokens: 100, OutputTokens: 10})})
	return nil
}

func msg(role model.Role, text string, u model.Usage) model.Message {
	return model.Message{Role: role, Parts: []model.Part{{Kind: model.Text, Text: text}}, Usage: u}
}

func seed() []model.Message {
	call := func(ids ...string) model.Message {
		m := model.Message{Role: model.Assistant, Usage: model.Usage{InputTokens: 1000, OutputTokens: 50}}
		for _, id := range ids {
			m.Parts = append(m.Parts, model.Part{Kind: model.ToolCall, ToolCallID: id, ToolName: "w"})
		}
		return m
	}
	res := func(id string) model.Message {
		return model.Message{Role: model.Tool, Parts: []model.Part{{Kind: model.ToolResult, ToolCallID: id, Text: "ok"}}}
	}
	return []model.Message{msg(model.User, "q", model.Usage{}), call("a", "b", "c"), res("a"), res("b"), res("c"),
		msg(model.Assistant, "done", model.Usage{InputTokens: 2000, OutputTokens: 30})}
}

func setup(t *testing.T, hs ...harness.Harness) (*store.Store, *fork.Driver, model.Run) {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "t.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	root := model.Run{Harness: "fake", Name: "root", Title: "seed"}
	require.NoError(t, st.CreateRun(context.Background(), &root, seed()))
	return st, &fork.Driver{Store: st, Harnesses: harness.NewRegistry(hs...)}, root
}

func TestForkIsLazyAndSnaps(t *testing.T) {
	f := &fake{name: "fake", caps: harness.Capabilities{Fork: true, ForkAtK: true}}
	st, d, root := setup(t, f)
	ctx := context.Background()
	forks, cut, err := d.Fork(ctx, fork.ForkSpec{Parent: root.ID, At: "3", N: 2})
	require.NoError(t, err)
	assert.Equal(t, model.Cut{Asked: "3", K: 1, Reason: "mid tool batch"}, cut)
	require.Len(t, forks, 2)
	assert.Equal(t, "root-fork-1", forks[0].Name)
	assert.Equal(t, "root-fork-2", forks[1].Name)
	for _, fk := range forks {
		assert.Equal(t, 1, fk.ForkAt)
		assert.Equal(t, "3", fk.Asked)
		assert.Equal(t, "mid tool batch", fk.SnapReason)
		assert.Equal(t, model.Pending, fk.Status)
		assert.Equal(t, 6, fk.ParentLen)
	}
	assert.Zero(t, f.calls.Load(), "making forks calls no backend (rule 4)")
	msgs, inherited, err := st.Messages(ctx, forks[0].ID)
	require.NoError(t, err)
	assert.Len(t, msgs, 1)
	assert.Equal(t, 1, inherited)
}

func TestForkRefusals(t *testing.T) {
	endOnly := &fake{name: "fake", caps: harness.Capabilities{Fork: true}}
	_, d, root := setup(t, endOnly, &script.Harness{})
	ctx := context.Background()
	_, _, err := d.Fork(ctx, fork.ForkSpec{Parent: root.ID, At: "0"})
	assert.ErrorIs(t, err, model.ErrEmptyPrefix, "rule 3")
	_, _, err = d.Fork(ctx, fork.ForkSpec{Parent: root.ID, At: "1"})
	assert.ErrorContains(t, err, "can only fork at the end", "rule 8: a fact about the harness")
	_, _, err = d.Fork(ctx, fork.ForkSpec{Parent: root.ID, At: "1", Harness: "script"})
	assert.NoError(t, err)
	_, _, err = d.Fork(ctx, fork.ForkSpec{Parent: root.ID, N: 11})
	assert.ErrorContains(t, err, "-n must be 1 to 10")
	_, _, err = d.Fork(ctx, fork.ForkSpec{Parent: root.ID, N: 3, Names: []string{"a", "b"}})
	assert.ErrorContains(t, err, "2 names for 3 forks")
	_, _, err = d.Fork(ctx, fork.ForkSpec{Parent: root.ID, N: 3, Messages: []string{"a", "b"}})
	assert.ErrorContains(t, err, "2 messages for 3 forks")
	_, _, err = d.Fork(ctx, fork.ForkSpec{Parent: root.ID, Harness: "nope"})
	assert.ErrorContains(t, err, `no harness "nope"`)
}

func TestTurnsSpendOnTheirOwnAndLeaveTheParentAlone(t *testing.T) {
	f := &fake{name: "fake", caps: harness.Capabilities{Fork: true, ForkAtK: true}}
	st, d, root := setup(t, f)
	ctx := context.Background()
	before, err := st.Run(ctx, root.ID)
	require.NoError(t, err)
	forks, _, err := d.Fork(ctx, fork.ForkSpec{Parent: root.ID, At: "end", N: 3, Names: []string{"a", "b", "c"}})
	require.NoError(t, err)
	var turns []fork.Turn
	for i, fk := range forks {
		turns = append(turns, fork.Turn{RunID: fk.ID, Input: []string{"x", "y", "z"}[i]})
	}
	runs := d.RunTurns(ctx, turns, nil)
	require.Len(t, runs, 3)
	for i, r := range runs {
		assert.Equal(t, model.Completed, r.Status, r.Error)
		assert.Equal(t, model.Usage{InputTokens: 100, OutputTokens: 10}, r.Usage, "a fork's usage is its own (rule 6)")
		assert.Equal(t, 2, r.OwnMessages)
		msgs, _, err := st.Messages(ctx, r.ID)
		require.NoError(t, err)
		require.Len(t, msgs, 8)
		assert.Equal(t, "reply to "+[]string{"x", "y", "z"}[i], msgs[7].PlainText())
		assert.False(t, r.FinishedAt.IsZero())
	}
	after, err := st.Run(ctx, root.ID)
	require.NoError(t, err)
	assert.Equal(t, before.OwnMessages, after.OwnMessages, "the parent is never touched")
	assert.Equal(t, before.Usage, after.Usage)
}

func TestStaleBranchPoint(t *testing.T) {
	endOnly := &fake{name: "fake", caps: harness.Capabilities{Fork: true}}
	st, d, root := setup(t, endOnly)
	ctx := context.Background()
	forks, _, err := d.Fork(ctx, fork.ForkSpec{Parent: root.ID, N: 2})
	require.NoError(t, err)
	// The parent moves on before the forks are used.
	require.NoError(t, st.AppendMessages(ctx, root.ID, []model.Message{msg(model.User, "more", model.Usage{})}))
	runs := d.RunTurns(ctx, []fork.Turn{{RunID: forks[0].ID, Input: "go"}}, nil)
	require.Len(t, runs, 1)
	assert.Equal(t, model.Failed, runs[0].Status)
	assert.Contains(t, runs[0].Error, "the parent moved on; fork again from where it is now")
	assert.Zero(t, endOnly.calls.Load(), "refused rather than branched from elsewhere")

	// A harness that can fork at K is not affected.
	anyK := &fake{name: "anyk", caps: harness.Capabilities{Fork: true, ForkAtK: true}}
	d.Harnesses.Register(anyK)
	forks, _, err = d.Fork(ctx, fork.ForkSpec{Parent: root.ID, At: "6", Harness: "anyk"})
	require.NoError(t, err)
	require.NoError(t, st.AppendMessages(ctx, root.ID, []model.Message{msg(model.Assistant, "on", model.Usage{})}))
	runs = d.RunTurns(ctx, []fork.Turn{{RunID: forks[0].ID, Input: "go"}}, nil)
	assert.Equal(t, model.Completed, runs[0].Status, runs[0].Error)
}

func TestRegenerateAndContinue(t *testing.T) {
	f := &fake{name: "fake", caps: harness.Capabilities{Fork: true, ForkAtK: true}}
	st, d, root := setup(t, f)
	ctx := context.Background()
	forks, cut, err := d.Fork(ctx, fork.ForkSpec{Parent: root.ID, At: "last_user", ReplaceOriginal: true})
	require.NoError(t, err)
	assert.Equal(t, 1, cut.K)
	got, err := st.Run(ctx, root.ID)
	require.NoError(t, err)
	assert.True(t, got.Hidden, "replace_original hides the source, which stays stored")
	runs := d.RunTurns(ctx, []fork.Turn{{RunID: forks[0].ID}}, nil)
	assert.Equal(t, model.Completed, runs[0].Status, runs[0].Error)
	assert.Equal(t, 1, runs[0].OwnMessages, "the model answers again; no new user message")

	// Continuing a completed run makes a fork at its end.
	r, err := d.Continue(ctx, root.ID, "and then?", "", nil)
	require.NoError(t, err)
	assert.NotEqual(t, root.ID, r.ID)
	assert.Equal(t, root.ID, r.ParentID)
	assert.Equal(t, 6, r.ForkAt)
	after, _ := st.Run(ctx, root.ID)
	assert.Equal(t, 6, after.OwnMessages, "history is never rewritten")
	// Asking for an answer again right after a reply is refused clearly.
	forks, _, err = d.Fork(ctx, fork.ForkSpec{Parent: root.ID})
	require.NoError(t, err)
	runs = d.RunTurns(ctx, []fork.Turn{{RunID: forks[0].ID}}, nil)
	assert.Contains(t, runs[0].Error, "nothing to answer")
}

func TestFailureCancellationAndParallelism(t *testing.T) {
	release := make(chan struct{})
	f := &fake{name: "fake", caps: harness.Capabilities{Fork: true, ForkAtK: true}}
	f.turn = func(ctx context.Context, req harness.TurnRequest, emit func(harness.Event)) error {
		switch req.Input {
		case "fail":
			emit(harness.Event{Kind: harness.EventMessage, Message: msg(model.User, req.Input, model.Usage{})})
			return errors.New("HTTP 500 from server: boom")
		case "hang":
			emit(harness.Event{Kind: harness.EventMessage, Message: msg(model.User, req.Input, model.Usage{})})
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-release:
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
		return nil
	}
	st, d, root := setup(t, f)
	d.Parallel = 2
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	forks, _, err := d.Fork(ctx, fork.ForkSpec{Parent: root.ID, N: 6})
	require.NoError(t, err)
	inputs := []string{"fail", "ok", "ok", "ok", "ok", "hang"}
	var turns []fork.Turn
	for i, fk := range forks {
		turns = append(turns, fork.Turn{RunID: fk.ID, Input: inputs[i]})
	}
	var mu sync.Mutex
	var events []fork.RunEvent
	done := make(chan []model.Run)
	go func() {
		done <- d.RunTurns(ctx, turns, func(e fork.RunEvent) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		})
	}()
	// The hanging fork's first message is stored while it still runs.
	require.Eventually(t, func() bool {
		r, err := st.Run(context.Background(), forks[5].ID)
		return err == nil && r.Status == model.Running && r.OwnMessages == 1
	}, 5*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool {
		for _, fk := range forks[:5] {
			r, err := st.Run(context.Background(), fk.ID)
			if err != nil || r.Status == model.Pending || r.Status == model.Running {
				return false
			}
		}
		return true
	}, 5*time.Second, 10*time.Millisecond)
	cancel()
	runs := <-done
	require.Len(t, runs, 6)
	assert.Equal(t, model.Failed, runs[0].Status)
	assert.Equal(t, "HTTP 500 from server: boom", runs[0].Error, "a failed fork records its reason")
	assert.Equal(t, 1, runs[0].OwnMessages, "what it did before failing is kept")
	for _, r := range runs[1:5] {
		assert.Equal(t, model.Completed, r.Status)
	}
	assert.Equal(t, model.Cancelled, runs[5].Status)
	assert.LessOrEqual(t, f.peak.Load(), int32(2), "at most Parallel turns at once")
	mu.Lock()
	defer mu.Unlock()
	assert.NotEmpty(t, events)
}

// A parent in the middle of a turn that tine drives cannot be forked: its
// transcript is still growing (the cut could fall inside the turn) and its
// agent's session is being written. Once the turn ends it can.
func TestARunMidTurnIsNotForked(t *testing.T) {
	f := &fake{name: "fake", caps: harness.Capabilities{Fork: true, ForkAtK: true}}
	started, release := make(chan struct{}), make(chan struct{})
	f.turn = func(ctx context.Context, req harness.TurnRequest, emit func(harness.Event)) error {
		emit(harness.Event{Kind: harness.EventMessage, Message: msg(model.User, req.Input, model.Usage{})})
		close(started)
		<-release
		emit(harness.Event{Kind: harness.EventMessage, Message: msg(model.Assistant, "done", model.Usage{})})
		return nil
	}
	_, d, root := setup(t, f)
	ctx := context.Background()
	forks, _, err := d.Fork(ctx, fork.ForkSpec{Parent: root.ID, Names: []string{"busy"}})
	require.NoError(t, err)
	done := make(chan []model.Run)
	go func() { done <- d.RunTurns(ctx, []fork.Turn{{RunID: forks[0].ID, Input: "go"}}, nil) }()
	<-started
	_, _, err = d.Fork(ctx, fork.ForkSpec{Parent: forks[0].ID, At: "end"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "busy is in the middle of a turn")
	assert.Contains(t, err.Error(), "wait for the turn to finish")
	_, _, err = d.Fork(ctx, fork.ForkSpec{Parent: forks[0].ID, At: "1"})
	assert.ErrorContains(t, err, "in the middle of a turn", "at any boundary")
	close(release)
	require.Equal(t, model.Completed, (<-done)[0].Status)
	_, _, err = d.Fork(ctx, fork.ForkSpec{Parent: forks[0].ID, At: "end"})
	assert.NoError(t, err, "once the turn has ended")
}

// Forks started at once, from several processes, each get a name of their
// own (five once were all named <parent>-fork-13, and then no command could
// find any of them by it): the store refuses a second run of a name, and
// the driver takes the next number. Names given twice are refused before
// anything is made.
func TestConcurrentForksGetNamesOfTheirOwn(t *testing.T) {
	f := &fake{name: "fake", caps: harness.Capabilities{Fork: true, ForkAtK: true}}
	st, _, root := setup(t, f)
	ctx := context.Background()
	const procs, each = 6, 2
	var wg sync.WaitGroup
	got := make([][]model.Run, procs)
	errs := make([]error, procs)
	start := make(chan struct{})
	// Every process reads the names taken before any writes its forks:
	// the race, every time.
	var read sync.WaitGroup
	read.Add(procs)
	for i := range procs {
		// A store of its own on the file: another process's connection.
		other, err := store.Open(st.Path())
		require.NoError(t, err)
		defer other.Close()
		d := &fork.Driver{Store: &readTogether{Store: other, read: &read}, Harnesses: harness.NewRegistry(f)}
		wg.Go(func() {
			<-start
			got[i], _, errs[i] = d.Fork(ctx, fork.ForkSpec{Parent: root.ID, N: each})
		})
	}
	close(start)
	wg.Wait()
	seen := map[string]bool{}
	for i := range procs {
		require.NoError(t, errs[i])
		for _, r := range got[i] {
			assert.False(t, seen[r.Name], "%s given twice", r.Name)
			seen[r.Name] = true
			found, err := st.Resolve(ctx, r.Name)
			require.NoError(t, err, "the name finds the fork")
			assert.Equal(t, r.ID, found.ID)
		}
	}
	for i := 1; i <= procs*each; i++ {
		assert.True(t, seen[fmt.Sprintf("root-fork-%d", i)], "root-fork-%d", i)
	}

	d := &fork.Driver{Store: st, Harnesses: harness.NewRegistry(f)}
	before, err := st.Runs(ctx)
	require.NoError(t, err)
	_, _, err = d.Fork(ctx, fork.ForkSpec{Parent: root.ID, Names: []string{"a", "a"}})
	assert.ErrorContains(t, err, `the name "a" is given twice`)
	_, _, err = d.Fork(ctx, fork.ForkSpec{Parent: root.ID, Names: []string{"root-fork-3"}})
	assert.ErrorIs(t, err, model.ErrNameTaken, "a name asked for is never changed")
	_, _, err = d.Fork(ctx, fork.ForkSpec{Parent: root.ID, Names: []string{" "}})
	assert.ErrorContains(t, err, "a fork's name cannot be empty")
	after, err := st.Runs(ctx)
	require.NoError(t, err)
	assert.Len(t, after, len(before), "nothing was made")

	// A default name some other run took is passed over.
	other := model.Run{Name: "root-fork-13"}
	require.NoError(t, st.CreateRun(ctx, &other, nil))
	next, _, err := d.Fork(ctx, fork.ForkSpec{Parent: root.ID})
	require.NoError(t, err)
	assert.Equal(t, "root-fork-14", next[0].Name)
}

// readTogether is a store whose first LastForkNumber returns only once
// every other process sharing read has read the names too.
type readTogether struct {
	fork.Store
	read *sync.WaitGroup
	once sync.Once
}

func (s *readTogether) LastForkNumber(ctx context.Context, id, prefix string) (int, error) {
	n, err := s.Store.LastForkNumber(ctx, id, prefix)
	s.once.Do(func() { s.read.Done(); s.read.Wait() })
	return n, err
}

// TestACheckWithNoDirectoryRunsNowhere: a model API's fork of a run with
// no directory (an imported chat) has nowhere to run its check: it says
// so, and the check never runs in tine's own directory instead.
func TestACheckWithNoDirectoryRunsNowhere(t *testing.T) {
	f := &fake{name: "fake", caps: harness.Capabilities{Fork: true, ForkAtK: true}}
	_, d, root := setup(t, f)
	ctx := context.Background()
	here, err := os.Getwd()
	require.NoError(t, err)
	marker := "tine-check-ran-" + root.ID
	forks, _, err := d.Fork(ctx, fork.ForkSpec{Parent: root.ID, Check: "touch " + marker})
	require.NoError(t, err)
	runs := d.RunTurns(ctx, []fork.Turn{{RunID: forks[0].ID, Input: "go on"}}, nil)
	require.Len(t, runs, 1)
	require.NotNil(t, runs[0].Check)
	assert.Equal(t, "fork root-fork-1 has no directory, so its check has nowhere to run", runs[0].Check.Error)
	_, err = os.Stat(filepath.Join(here, marker))
	assert.True(t, os.IsNotExist(err), "the check ran in tine's own directory")
	os.Remove(filepath.Join(here, marker))
}

// countedNames counts LastForkNumber's reads.
type countedNames struct {
	fork.Store
	reads atomic.Int32
}

func (s *countedNames) LastForkNumber(ctx context.Context, id, prefix string) (int, error) {
	s.reads.Add(1)
	return s.Store.LastForkNumber(ctx, id, prefix)
}

// TestNumbersSpareTheStore: a driver that remembers the numbers it gave
// (tine serve's) names a run's next forks on from them without reading
// the store again, and a name another process took meanwhile is skipped.
func TestNumbersSpareTheStore(t *testing.T) {
	f := &fake{name: "fake", caps: harness.Capabilities{Fork: true, ForkAtK: true}}
	st, d, root := setup(t, f)
	ctx := context.Background()
	counted := &countedNames{Store: st}
	d.Store, d.Numbers = counted, &fork.Numbers{}
	var names []string
	for range 3 {
		forks, _, err := d.Fork(ctx, fork.ForkSpec{Parent: root.ID})
		require.NoError(t, err)
		names = append(names, forks[0].Name)
	}
	// Another process's fork takes the next number.
	other := model.Run{ParentID: root.ID, ForkAt: 2, Name: "root-fork-4"}
	require.NoError(t, st.CreateForks(ctx, []*model.Run{&other}))
	forks, _, err := d.Fork(ctx, fork.ForkSpec{Parent: root.ID})
	require.NoError(t, err)
	names = append(names, forks[0].Name)
	assert.Equal(t, []string{"root-fork-1", "root-fork-2", "root-fork-3", "root-fork-5"}, names)
	assert.Equal(t, int32(1), counted.reads.Load(), "the store was read for the first fork only")
}
