package tui

import (
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
)

// NavKeys move a cursor through a list.
type NavKeys struct {
	Up, Down, PageUp, PageDown, Top, Bottom key.Binding
}

// nav is a cursor in a list of rows shown height at a time: which row is
// selected and which is first on screen.
type nav struct {
	cursor, offset, height int
}

// move handles a navigation key over n rows; it reports whether msg was one.
func (v *nav) move(msg tea.KeyPressMsg, k NavKeys, n int) bool {
	page := max(v.height-1, 1)
	switch {
	case key.Matches(msg, k.Up):
		v.cursor--
	case key.Matches(msg, k.Down):
		v.cursor++
	case key.Matches(msg, k.PageUp):
		v.cursor -= page
	case key.Matches(msg, k.PageDown):
		v.cursor += page
	case key.Matches(msg, k.Top):
		v.cursor = 0
	case key.Matches(msg, k.Bottom):
		v.cursor = n - 1
	default:
		return false
	}
	v.clamp(n)
	return true
}

// clamp keeps the cursor on one of n rows and in view.
func (v *nav) clamp(n int) {
	v.cursor = min(max(v.cursor, 0), max(n-1, 0))
	h := max(v.height, 1)
	if v.cursor < v.offset {
		v.offset = v.cursor
	}
	if v.cursor >= v.offset+h {
		v.offset = v.cursor - h + 1
	}
	v.offset = min(max(v.offset, 0), max(n-h, 0))
}
