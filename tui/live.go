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

type (
	watchReadyMsg struct {
		changes *store.Changes
		err     error
	}
	liveTickMsg    struct{}
	liveCheckedMsg struct {
		changed bool
		err     error
	}
)

// watch opens the change counter.
func (a *App) watch() tea.Cmd {
	if a.st == nil {
		return nil
	}
	ctx, st := a.ctx, a.st
	return func() tea.Msg {
		c, err := st.WatchChanges(ctx)
		return watchReadyMsg{changes: c, err: err}
	}
}

func (a *App) liveTick() tea.Cmd {
	return a.tick(liveEvery, func(time.Time) tea.Msg { return liveTickMsg{} })
}

// checkLive asks whether the store changed (and, every few seconds, marks
// the runs of dead owners interrupted); one check at a time.
func (a *App) checkLive() tea.Cmd {
	if a.changes == nil || a.checking {
		return nil
	}
	a.checking = true
	reap := a.now().Sub(a.lastReap) >= reapEvery
	if reap {
		a.lastReap = a.now()
	}
	ctx, st, c := a.ctx, a.st, a.changes
	return func() tea.Msg {
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

// live handles the change counter's messages.
func (a *App) live(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case watchReadyMsg:
		if msg.err != nil {
			slog.Warn("the screen will not follow the store", "err", msg.err)
			return nil
		}
		a.changes = msg.changes
		return tea.Batch(a.checkLive(), a.liveTick())
	case liveTickMsg:
		return tea.Batch(a.checkLive(), a.liveTick())
	case liveCheckedMsg:
		a.checking = false
		if msg.err != nil {
			slog.Warn("watch the store", "err", msg.err)
			return nil
		}
		if !msg.changed {
			return nil
		}
		cmds := []tea.Cmd{a.reloadTree(), a.reloadCompare()}
		if a.screen == screenLibrary && a.lib.mode != libHits {
			cmds = append(cmds, a.loadTrees())
		}
		return tea.Batch(cmds...)
	}
	return nil
}
