package tui

import (
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
)

// helpState is the ? help over the screen: whether it shows, and the
// first of its lines shown.
type helpState struct {
	open   bool
	offset int
}

// scroll moves the help by a scroll key over lines lines shown height at a
// time; it reports whether msg was one.
func (h helpState) scroll(msg tea.KeyPressMsg, k HelpKeys, lines, height int) (helpState, bool) {
	height = max(height, 1)
	v := nav{cursor: h.offset, offset: h.offset, height: 1}
	switch {
	case key.Matches(msg, k.PageUp):
		v.cursor -= max(height-1, 1)
	case key.Matches(msg, k.PageDown):
		v.cursor += max(height-1, 1)
	case !v.move(msg, k.NavKeys, lines):
		return h, false
	}
	h.offset = min(max(v.cursor, 0), max(lines-height, 0))
	return h, true
}

// helpTable is the help's while it shows: scrolling; any other key
// closes it, and ctrl+c then goes on to what is under the help (which
// quits, or asks first in a dialog with typed text).
func helpTable(k KeyMap) keyTable {
	h, g := k.Help, k.Global
	scroll := func(a *App, msg tea.KeyPressMsg) tea.Cmd {
		a.scrollHelp(msg)
		return nil
	}
	return keyTable{id: "help",
		keys: []binding{
			{key: h.Up, run: scroll}, {key: h.Down, run: scroll, footer: 1, brief: brief("↑/↓", "scroll")},
			{key: h.PageUp, run: scroll}, {key: h.PageDown, run: scroll}, {key: h.Top, run: scroll}, {key: h.Bottom, run: scroll},
			{key: g.ForceQuit, run: func(a *App, msg tea.KeyPressMsg) tea.Cmd {
				a.help = helpState{}
				return a.screenKeys().handle(a, msg)
			}, footer: 2},
		},
		rest:     do(func(a *App) tea.Cmd { a.help = helpState{}; return nil }),
		restHelp: &key.Help{Key: h.Close.Help().Key, Desc: h.Close.Help().Desc},
	}
}

func (a *App) openHelp() {
	a.help = helpState{open: true}
}

// helpContent is the whole help: the keys first (so a small terminal
// shows them), then what the screen is for, then where the data is.
func (a *App) helpContent() []string {
	st := &a.styles
	h := a.screenKeys()
	w := max(a.width, 10)
	lines := []string{st.Title.Render("Keys")}
	lines = append(lines, helpLines(h.full(), w, st)...)
	lines = append(lines, "")
	lines = append(lines, strings.Split(wrap(h.intro, w), "\n")...)
	if p := a.dataPath; p != "" {
		lines = append(lines, "", st.Subtle.Render(fit("Data: "+p, w)))
	}
	return lines
}

// scrollHelp scrolls the help; it reports whether msg was for that.
func (a *App) scrollHelp(msg tea.KeyPressMsg) bool {
	var ok bool
	a.help, ok = a.help.scroll(msg, a.keys.Help, len(a.helpContent()), a.layout().body.h)
	return ok
}

func (a *App) helpView() string {
	lines := a.helpContent()
	off := min(a.help.offset, len(lines))
	return strings.Join(lines[off:], "\n")
}
