package tui

import (
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
)

// The Fork and next-turn dialogs' keys. Which field has the focus decides
// what a dialog key does there (a choice changes, a text field takes the
// text), so the dialog itself (forkDialog.update, turnDialog.update)
// answers the same DialogKeys these tables list; the tables add help and
// quitting, which on a choice are ? and q and in a text field f1 and
// ctrl+c (? and q are text there).

const (
	forkIntro = "Fork: where the forks start, how many, which harness runs them and how, what each is told, and an optional check that scores them (the best is marked ★). An agent that cannot branch this run's session continues it only as a handoff, which you turn on here. In a text field, keys are text: f1 is help, ctrl+c quits."
	turnIntro = "Next turn: a message for the run, answered by its own harness or another. A session tine did not make (an imported one) is never written to: a fork at its end gets the turn. In the text field, keys are text: f1 is help, ctrl+c quits."
)

func dialogTable(k KeyMap, turn, typing bool) keyTable {
	d, g := k.Dialog, k.Global
	kt := keyTable{id: "dialog-fork", intro: forkIntro, rest: (*App).dialogWidget}
	if turn {
		kt.id, kt.intro = "dialog-turn", turnIntro
	}
	widget := (*App).dialogWidget
	kt.keys = []binding{
		{key: d.NextField, run: widget, footer: 1},
		{key: d.PrevField, run: widget, footer: 2},
		{key: d.Change, run: widget, footer: 3},
		{key: d.Enter, run: widget},
		{key: d.Launch, run: widget, footer: 4},
		{key: d.Cancel, run: widget, footer: 5},
	}
	if typing {
		kt.id += "-typing"
		kt.keys = append(kt.keys, helpKey(g.HelpTyping).at(6), dialogQuit(g.ForceQuit).at(7))
	} else {
		kt.keys = append(kt.keys, helpKey(g.Help).at(6), dialogQuit(g.Quit).at(7), dialogQuit(g.ForceQuit))
	}
	return kt
}

// dialogWidget hands the key to the open dialog, and does what it asks:
// close, or launch.
func (a *App) dialogWidget(msg tea.KeyPressMsg) tea.Cmd {
	if a.dialog != nil {
		res, cmd := a.dialog.update(msg, a.keys.Dialog)
		switch res {
		case dialogCancel:
			a.dialog = nil
		case dialogLaunch:
			return a.launch()
		}
		return cmd
	}
	res, cmd := a.turn.update(msg, a.keys.Dialog)
	switch res {
	case dialogCancel:
		a.turn = nil
	case dialogLaunch:
		return a.sendTurn()
	}
	return cmd
}

// dialogQuit quits, asking first when something was typed in the dialog.
func dialogQuit(b key.Binding) binding {
	return binding{key: b, run: do(func(a *App) tea.Cmd {
		typed := a.turn != nil && a.turn.message() != ""
		if a.dialog != nil {
			typed = a.dialog.typed()
		}
		if typed {
			a.confirmQuit = true
			return nil
		}
		return a.quit()
	})}
}

// confirmTable is the question before quitting with typed text: y quits,
// any other key goes back.
func confirmTable() keyTable {
	return keyTable{id: "confirm-quit",
		keys: []binding{quitKey(key.NewBinding(key.WithKeys("y"), key.WithHelp("y", "quit and lose what was typed")))},
		rest: do(func(a *App) tea.Cmd {
			a.status.text = ""
			return nil
		}),
	}
}
