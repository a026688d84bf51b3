package tui

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/harness/fork"
	"tine/model"
	"tine/replay"
	"tine/store"
)

// held is a harness whose turn streams a little, then waits until it is
// released (and completes) or cancelled.
type held struct {
	started chan struct{}
	release chan struct{}
	once    sync.Once
}

func newHeld() *held { return &held{started: make(chan struct{}), release: make(chan struct{})} }

func (h *held) Name() string { return "held" }
func (h *held) Capabilities() harness.Capabilities {
	return harness.Capabilities{Fork: true, ForkAtK: true}
}
func (h *held) Turn(ctx context.Context, req harness.TurnRequest, emit func(harness.Event)) error {
	emit(harness.Event{Kind: harness.EventDelta, Delta: "thinking "})
	h.once.Do(func() { close(h.started) })
	select {
	case <-h.release:
		emit(harness.Event{Kind: harness.EventMessage, Message: model.Message{Role: model.Assistant,
			Parts: []model.Part{{Kind: model.Text, Text: "done"}}}})
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// detached stands in for main's background tine: it runs the turns on a
// driver of its own, under a context of its own, so they go on when the
// program quits (the program's context ends); it reports their events to
// the program only while the program is there.
type detached struct {
	drv  *fork.Driver
	done chan struct{}
}

func (b *detached) Turns(ctx context.Context, job TurnsJob, events func(fork.RunEvent)) error {
	go func() {
		defer close(b.done)
		b.drv.RunTurns(context.Background(), job.Turns, func(ev fork.RunEvent) {
			if ctx.Err() == nil {
				events(ev)
			}
		})
	}()
	select {
	case <-ctx.Done():
	case <-b.done:
	}
	return nil
}

func (b *detached) Replay(context.Context, *replay.Plan, func(fork.RunEvent)) error { return nil }

// quitFixture is the seed tree open, and one fork of its root whose turn
// runs on h (through bg, when set, else in the program), started as the
// Fork screen starts one. Its listener is not run: the fork is running as
// far as the program knows.
func quitFixture(t *testing.T, h *held, bg func(*fork.Driver) Background) (*driver, model.Run, *store.Store) {
	t.Helper()
	st := seedStore(t, 0)
	drv := &fork.Driver{Store: st, Harnesses: harness.NewRegistry(h), CancelPoll: 20 * time.Millisecond}
	opts := Options{Title: "test", Driver: drv, Follow: "tine --db x.db ls"}
	if bg != nil {
		opts.Background = bg(drv)
	}
	d := newDriverOpts(t, st, opts, 120, 30)
	d.keys("enter")
	runs, _, err := drv.Fork(context.Background(), fork.ForkSpec{Parent: firstTree(t, st), At: model.ContinueFrom("end"), N: 1,
		Names: []string{"long-one"}, Harness: "held"})
	require.NoError(t, err)
	d.a.startTurns(1, drv, apiSettings{}, startWork{turns: []fork.Turn{{RunID: runs[0].ID, Input: "go"}}}, runs[0])
	select {
	case <-h.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the turn did not start")
	}
	d.run(d.a.reloadTree())
	return d, runs[0], st
}

// quits reports whether cmd (a batch too) quits the program.
func quits(t *testing.T, cmd tea.Cmd) bool {
	t.Helper()
	if cmd == nil {
		return false
	}
	switch m := cmd().(type) {
	case tea.QuitMsg:
		return true
	case tea.BatchMsg:
		for _, c := range m {
			if quits(t, c) {
				return true
			}
		}
	}
	return false
}

func status(t *testing.T, st *store.Store, id string) model.Status {
	t.Helper()
	r, err := st.Run(context.Background(), id)
	require.NoError(t, err)
	return r.Status
}

// TestQuitWithoutRunningForksQuitsAtOnce: q quits at once when no fork
// this program started runs, even while a fork another process runs shows
// running in the tree: that one is not this program's to keep or stop.
func TestQuitWithoutRunningForksQuitsAtOnce(t *testing.T) {
	st := seedStore(t, 0)
	d := newDriver(t, st, 120, 30)
	d.keys("enter")
	nested := d.runNamed("nested")
	require.NoError(t, st.SetRunning(context.Background(), nested.ID)) // another tine's
	d.run(d.a.reloadTree())
	require.True(t, d.a.treeRunning())
	_, cmd := d.a.Update(press("q"))
	assert.True(t, quits(t, cmd), "q quits at once")
	assert.Nil(t, d.a.quitting, "and asks nothing")
	assert.Empty(t, d.a.exit.String())
	assert.Equal(t, model.Running, status(t, st, nested.ID), "another process's fork is left alone")
}

// TestQuitWithARunningForkAsks: q (and ctrl+c, and q in a dialog) with a
// fork this program started still running asks what becomes of it, and
// does not quit; esc stays, and the fork runs on.
func TestQuitWithARunningForkAsks(t *testing.T) {
	h := newHeld()
	defer close(h.release)
	d, fk, st := quitFixture(t, h, func(drv *fork.Driver) Background { return &detached{drv: drv, done: make(chan struct{})} })
	for _, k := range []string{"q", "ctrl+c"} {
		_, cmd := d.a.Update(press(k))
		assert.False(t, quits(t, cmd), "%s asks first", k)
		require.NotNil(t, d.a.quitting, k)
		s := d.plain()
		assert.Contains(t, s, "Quit tine? 1 fork started here still running")
		assert.Contains(t, s, "⑂ long-one")
		assert.Contains(t, s, "keep running")
		assert.Contains(t, s, "they go on in the background after tine quits: follow them with tine --db x.db ls")
		assert.Contains(t, s, "stop them")
		assert.Contains(t, s, "stay")
		assert.Equal(t, "confirm-quit-forks", d.a.keysNow().id)
		d.keys("esc")
		assert.Nil(t, d.a.quitting, "esc stays")
		assert.NotContains(t, d.plain(), "Quit tine?")
		assert.Equal(t, model.Running, status(t, st, fk.ID), "and the fork runs on")
	}
	// From the Fork screen too.
	d.cursorTo("long-one")
	d.keys("f")
	require.NotNil(t, d.a.dialog)
	_, cmd := d.a.Update(press("q"))
	assert.False(t, quits(t, cmd))
	assert.NotNil(t, d.a.quitting, "q in a dialog asks too")
	d.keys("down", "down", "enter") // stay, chosen with the arrows
	assert.Nil(t, d.a.quitting)
}

// TestQuitKeepsForksRunning: k quits and leaves the fork running: the
// program's context ends, the fork goes on (it completes later), and the
// exit says so with the command that follows it.
func TestQuitKeepsForksRunning(t *testing.T) {
	h := newHeld()
	var bg *detached
	d, fk, st := quitFixture(t, h, func(drv *fork.Driver) Background {
		bg = &detached{drv: drv, done: make(chan struct{})}
		return bg
	})
	d.keys("q")
	require.NotNil(t, d.a.quitting)
	_, cmd := d.a.Update(press("k"))
	require.True(t, quits(t, cmd), "k quits")
	d.a.stopOnExit(false) // as Run does: the choice was made, nothing more
	d.a.shutdown()
	assert.Equal(t, []string{"long-one"}, d.a.exit.Kept)
	assert.Equal(t, "1 fork (long-one) keeps running in the background: tine --db x.db ls to follow them", d.a.exit.String())
	assert.Equal(t, model.Running, status(t, st, fk.ID), "quitting did not stop it")
	close(h.release)
	select {
	case <-bg.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the kept fork did not finish")
	}
	assert.Equal(t, model.Completed, status(t, st, fk.ID), "it went on to the end after the program quit")
}

// TestQuitStopsForks: s asks the process running the fork to stop it
// (through the store, as x does: a background tine is not stopped by this
// program's context), and quits once it is recorded cancelled.
func TestQuitStopsForks(t *testing.T) {
	h := newHeld()
	defer close(h.release)
	d, fk, st := quitFixture(t, h, func(drv *fork.Driver) Background { return &detached{drv: drv, done: make(chan struct{})} })
	d.keys("q")
	_, cmd := d.a.Update(press("s"))
	require.NotNil(t, cmd)
	assert.Contains(t, d.plain(), "stopping 1 fork…")
	msg := cmd()
	require.IsType(t, quitStoppedMsg{}, msg)
	_, cmd = d.a.Update(msg)
	assert.True(t, quits(t, cmd), "it quits once the fork has stopped")
	assert.Equal(t, model.Cancelled, status(t, st, fk.ID))
	assert.Equal(t, "stopped 1 fork (long-one)", d.a.exit.String())
}

// TestQuitInProcessCannotKeep: when the program runs the forks itself (no
// background tine), keeping them is no choice, and says why; s stops them
// at once.
func TestQuitInProcessCannotKeep(t *testing.T) {
	h := newHeld()
	defer close(h.release)
	d, fk, st := quitFixture(t, h, nil)
	d.keys("q")
	require.NotNil(t, d.a.quitting)
	assert.Contains(t, d.plain(), "not here: this tine runs them itself")
	_, cmd := d.a.Update(press("k"))
	assert.False(t, quits(t, cmd), "k cannot keep them")
	assert.Contains(t, lastLine(d.plain()), "this tine runs them itself", "it says why")
	assert.Contains(t, d.plain(), "ctrl+c again stops them and quits")
	_, cmd = d.a.Update(press("enter")) // the cursor is on stop
	msg := cmd()
	_, cmd = d.a.Update(msg)
	assert.True(t, quits(t, cmd))
	assert.Equal(t, model.Cancelled, status(t, st, fk.ID))
	assert.Equal(t, []string{"long-one"}, d.a.exit.Stopped)
}

// TestQuitAfterTheForksEnded: a fork that ends while the question is
// asked leaves it; with none left the question stays, saying so, until
// the person quits or stays (it quit under their eyes).
func TestQuitAfterTheForksEnded(t *testing.T) {
	h := newHeld()
	defer close(h.release)
	d, fk, _ := quitFixture(t, h, nil)
	d.keys("q")
	require.NotNil(t, d.a.quitting)
	_, cmd := d.a.Update(press("q"))
	assert.False(t, quits(t, cmd), "q waits for a choice while a fork runs")
	assert.Contains(t, d.footer(), "choose what becomes of them first")
	_, cmd = d.a.Update(runEventMsg{batch: 1, news: []runNews{{runID: fk.ID, status: model.Completed, stored: true}}})
	assert.False(t, quits(t, cmd), "the question stays")
	require.NotNil(t, d.a.quitting)
	assert.Contains(t, d.plain(), "Every fork started here has ended")
	_, cmd = d.a.Update(press("s"))
	assert.False(t, quits(t, cmd), "nothing to stop")
	assert.Contains(t, d.footer(), "every fork started here has ended: q or enter quits, esc stays")
	asked := *d.a.quitting
	for _, k := range []string{"q", "enter"} {
		d.a.quitting = &asked
		_, cmd = d.a.Update(press(k))
		assert.True(t, quits(t, cmd), "%s quits", k)
		assert.Nil(t, d.a.quitting)
	}
	d.a.quitting = &asked
	d.keys("esc")
	assert.Nil(t, d.a.quitting, "esc stays")
}

// TestKilledProgramStopsItsForks: ended by a signal (nobody chose), the
// program stops the forks it started, as a closed terminal stops `tine
// fork --wait`'s, and says so.
func TestKilledProgramStopsItsForks(t *testing.T) {
	h := newHeld()
	defer close(h.release)
	d, fk, st := quitFixture(t, h, func(drv *fork.Driver) Background { return &detached{drv: drv, done: make(chan struct{})} })
	d.a.stopOnExit(false)
	d.a.shutdown()
	assert.Equal(t, model.Cancelled, status(t, st, fk.ID))
	assert.Equal(t, []string{"long-one"}, d.a.exit.Stopped)
}

// refusing is a background that cannot start its work.
type refusing struct{}

func (refusing) Turns(context.Context, TurnsJob, func(fork.RunEvent)) error {
	return errors.New("no tine to run it: exec: not found")
}

func (refusing) Replay(context.Context, *replay.Plan, func(fork.RunEvent)) error {
	return errors.New("no tine to run it")
}

// TestABackgroundThatDoesNotStartFailsItsForks: turns handed to a
// background tine that never took them do not stay pending: each is
// marked failed, saying why, and the status line says so.
func TestABackgroundThatDoesNotStartFailsItsForks(t *testing.T) {
	st := seedStore(t, 0)
	drv := &fork.Driver{Store: st, Harnesses: harness.NewRegistry(newHeld())}
	d := newDriverOpts(t, st, Options{Title: "test", Driver: drv, Background: refusing{}}, 120, 30)
	d.keys("enter")
	runs, _, err := drv.Fork(context.Background(), fork.ForkSpec{Parent: firstTree(t, st), At: model.ContinueFrom("end"), N: 1, Harness: "held"})
	require.NoError(t, err)
	d.run(d.a.startTurns(1, drv, apiSettings{}, startWork{turns: []fork.Turn{{RunID: runs[0].ID, Input: "go"}}}, runs[0]))
	r, err := st.Run(context.Background(), runs[0].ID)
	require.NoError(t, err)
	assert.Equal(t, model.Failed, r.Status)
	assert.Contains(t, r.Error, "its turn never started: no tine to run it")
	assert.Contains(t, d.plain(), "a fork failed: its turn never started")
	assert.Empty(t, d.a.ownRunning(), "and it is not running as far as quitting knows")
}
