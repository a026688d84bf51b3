package tui

import (
	"log/slog"
	"time"

	tea "charm.land/bubbletea/v2"

	"tine/store"
)

// The open tree and the library follow the store: a change counter
// (store.Changes) is asked twice a second and the screen reads again only
// when something was committed, by this process or another (a tine fork
// in another terminal, a background turn, an import).
const (
	liveEvery = 500 * time.Millisecond
	// reapEvery paces store.ReapOrphans: a fork whose owner died is shown
	// failed (interrupted) rather than running (rule 4 in ARCHITECTURE.md).
	reapEvery = 3 * time.Second
)

// liveState is following the store: its change counter once open, whether
// it is being asked now, and when orphaned runs were last looked for.
type liveState struct {
	changes  *store.Changes
	checking bool
	lastReap time.Time
}

type (
	changesReadyMsg struct {
		changes *store.Changes
		err     error
	}
	liveTickMsg    struct{}
	liveCheckedMsg struct {
		changed bool
		err     error
	}
)

// openChanges opens the change counter.
func openChanges(e env) tea.Cmd {
	if e.st == nil {
		return nil
	}
	ctx, st := e.ctx, e.st
	return func() tea.Msg {
		c, err := st.WatchChanges(ctx)
		return changesReadyMsg{changes: c, err: err}
	}
}

// update handles the change counter's messages; changed reports that the
// store changed, so the screens read again.
func (l liveState) update(msg tea.Msg, e env) (_ liveState, _ tea.Cmd, changed bool) {
	var check tea.Cmd
	next := func() tea.Cmd { return e.tick(liveEvery, func(time.Time) tea.Msg { return liveTickMsg{} }) }
	switch msg := msg.(type) {
	case changesReadyMsg:
		if msg.err != nil {
			slog.Warn("the screen will not follow the store", "err", msg.err)
			return l, nil, false
		}
		l.changes = msg.changes
		l, check = l.check(e)
		return l, tea.Batch(check, next()), false
	case liveTickMsg:
		l, check = l.check(e)
		return l, tea.Batch(check, next()), false
	case liveCheckedMsg:
		l.checking = false
		if msg.err != nil {
			slog.Warn("watch the store", "err", msg.err)
			return l, nil, false
		}
		return l, nil, msg.changed
	}
	return l, nil, false
}

// check asks whether the store changed (and, every few seconds, marks the
// runs of dead owners interrupted); one check at a time.
func (l liveState) check(e env) (liveState, tea.Cmd) {
	if l.changes == nil || l.checking {
		return l, nil
	}
	l.checking = true
	reap := e.now().Sub(l.lastReap) >= reapEvery
	if reap {
		l.lastReap = e.now()
	}
	ctx, st, c := e.ctx, e.st, l.changes
	return l, func() tea.Msg {
		reaped := 0
		if reap {
			n, err := st.ReapOrphans(ctx)
			if err != nil {
				slog.Warn("reap orphaned runs", "err", err)
			}
			reaped = n
		}
		changed, err := c.Changed(ctx)
		return liveCheckedMsg{changed: changed || reaped > 0, err: err}
	}
}

// storeChanged reads again what shows: the open tree, an open comparison,
// and the library unless it lists search hits.
func (a *App) storeChanged() tea.Cmd {
	cmds := []tea.Cmd{a.reloadTree(), a.reloadCompare()}
	if a.screen == screenLibrary && !a.lib.showsHits() {
		cmds = append(cmds, a.loadTrees())
	}
	return tea.Batch(cmds...)
}
