package tui

import (
	"context"
	"time"

	tea "charm.land/bubbletea/v2"

	"tine/model"
	"tine/store"
)

// ticker schedules a message later (tea.Tick); tests give one that never
// fires.
type ticker func(time.Duration, func(time.Time) tea.Msg) tea.Cmd

// env is what the root lends the parts of the program for their commands:
// the program's context (quitting cancels it), the store, the clock, the
// timer, and spawn, which runs background work that quitting waits for.
type env struct {
	ctx   context.Context
	st    *store.Store
	now   func() time.Time
	tick  ticker
	spawn func(where string, fn func())
}

// level orders status messages.
type level int

const (
	levelInfo level = iota
	levelWarn
	levelError
)

// statusClearAfter is how long a status message stays.
const statusClearAfter = 5 * time.Second

// statusLine is the footer's message: what was said last, how loud, and
// which saying it is, so that the clear of an older one leaves it alone.
type statusLine struct {
	text  string
	level level
	id    int
}

type clearStatusMsg struct{ id int }

// set shows text until it is cleared, statusClearAfter from now; "" says
// nothing and leaves what is there.
func (s statusLine) set(text string, lvl level, tick ticker) (statusLine, tea.Cmd) {
	if text == "" {
		return s, nil
	}
	s.id++
	s.text, s.level = text, lvl
	id := s.id
	return s, tick(statusClearAfter, func(time.Time) tea.Msg { return clearStatusMsg{id: id} })
}

// update clears the line when msg is for what it says now.
func (s statusLine) update(msg clearStatusMsg) statusLine {
	if msg.id == s.id {
		s.text = ""
	}
	return s
}

// quiet reports whether news may be said over the line: it says nothing,
// or only news itself (never over a warning or an error).
func (s statusLine) quiet() bool { return s.text == "" || s.level == levelInfo }

// setStatus shows text in the status line until it is cleared.
func (a *App) setStatus(text string, lvl level) tea.Cmd {
	var cmd tea.Cmd
	a.status, cmd = a.status.set(text, lvl, a.tick)
	return cmd
}

func (a *App) errorStatus(err error) tea.Cmd { return a.setStatus(errorText(err), levelError) }

// errorText is an error on one line, safe for the terminal.
func errorText(err error) string { return model.OneLine(err.Error(), 300) }
