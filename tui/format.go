package tui

import (
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"tine/model"
)

// tokens formats a token count briefly: 950, 1.2k, 34k, 1.5M.
func tokens(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprint(n)
	case n < 10_000:
		return fmt.Sprintf("%.1fk", float64(n)/1000)
	case n < 1_000_000:
		return fmt.Sprintf("%dk", n/1000)
	default:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	}
}

// cost formats dollars, empty for nothing spent.
func cost(usd float64) string {
	switch {
	case usd <= 0:
		return ""
	case usd < 0.01:
		return "<$0.01"
	case usd < 100:
		return fmt.Sprintf("$%.2f", usd)
	default:
		return fmt.Sprintf("$%.0f", usd)
	}
}

// age says how long ago t was, briefly.
func age(t, now time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return "now"
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	case d < 60*24*time.Hour:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	case d < 730*24*time.Hour:
		return fmt.Sprintf("%dmo", int(d.Hours()/24/30))
	default:
		return fmt.Sprintf("%dy", int(d.Hours()/24/365))
	}
}

// statusText is a run's status in words, its glyph first. A completed run
// whose last message calls tools that nobody ran did not finish its work:
// it stopped at those calls (openEnd: its own messages end on calls
// nobody answered).
func statusText(r model.Run, openEnd bool) string {
	if r.Status == model.Completed && openEnd {
		return "◌ stopped at tool calls"
	}
	return statusGlyph(r.Status) + " " + string(r.Status)
}

// endsOnOpenCalls reports whether msgs end with tool calls some of which
// have no result after them.
func endsOnOpenCalls(msgs []model.Message) bool {
	answered := map[string]bool{}
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if calls := m.ToolCalls(); len(calls) > 0 {
			for _, c := range calls {
				if !answered[c.ToolCallID] {
					return true
				}
			}
			return false
		}
		if m.Role != model.Tool {
			return false
		}
		for _, p := range m.Parts {
			if p.Kind == model.ToolResult {
				answered[p.ToolCallID] = true
			}
		}
	}
	return false
}

// statusGlyph marks a run's status so it reads without colour.
func statusGlyph(st model.Status) string {
	switch st {
	case model.Pending:
		return "○"
	case model.Queued:
		return "◌"
	case model.Running:
		return "◐"
	case model.Completed:
		return "✓"
	case model.Failed:
		return "✗"
	case model.Cancelled:
		return "⊘"
	}
	return "?"
}

// fit cuts s to width cells (with an ellipsis) and pads it to exactly width.
func fit(s string, width int) string {
	if width <= 0 {
		return ""
	}
	if w := ansi.StringWidth(s); w > width {
		s = ansi.Truncate(s, width, "…")
	}
	if w := ansi.StringWidth(s); w < width {
		s += strings.Repeat(" ", width-w)
	}
	return s
}

// fitRight cuts s to width cells and pads it on the left.
func fitRight(s string, width int) string {
	if width <= 0 {
		return ""
	}
	if w := ansi.StringWidth(s); w > width {
		return ansi.Truncate(s, width, "…")
	} else if w < width {
		return strings.Repeat(" ", width-w) + s
	}
	return s
}

// block fits text to exactly w by h cells: each line cut or padded, missing
// lines blank, extra lines dropped. Every screen region goes through it, so
// no frame ever has a line too long or too many lines.
func block(text string, w, h int) string {
	if w <= 0 || h <= 0 {
		return ""
	}
	lines := strings.Split(text, "\n")
	if len(lines) > h {
		lines = lines[:h]
	}
	var b strings.Builder
	for i := 0; i < h; i++ {
		if i > 0 {
			b.WriteByte('\n')
		}
		if i < len(lines) {
			b.WriteString(fit(lines[i], w))
		} else {
			b.WriteString(strings.Repeat(" ", w))
		}
	}
	return b.String()
}

// sideBySide joins two blocks of equal height line by line, putting sep
// between them; cheaper than a general layout join, which matters per frame.
func sideBySide(left, sep, right string) string {
	ls, rs := strings.Split(left, "\n"), strings.Split(right, "\n")
	var b strings.Builder
	b.Grow(len(left) + len(right) + len(ls)*len(sep))
	for i, l := range ls {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(l)
		b.WriteString(sep)
		if i < len(rs) {
			b.WriteString(rs[i])
		}
	}
	return b.String()
}

// roleLabel is a role's name padded for the role column.
func roleLabel(r model.Role) string {
	switch r {
	case model.Assistant:
		return "assistant"
	case model.User:
		return "user"
	case model.Tool:
		return "tool"
	case model.System:
		return "system"
	}
	return string(r)
}

// plural says "1 msg", "2 msgs".
func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// lastRunes keeps the last n runes of s.
func lastRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[len(r)-n:])
}
