package tui

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"tine/model"
)

// treeFind is search within the open tree (/, then n and N): every run's
// own messages, so inherited messages are searched once, where they were
// written, and forks folded away are searched too (a match opens them).
type treeFind struct {
	input  textinput.Model
	typing bool   // the query is being typed
	query  string // the query applied
	// matches are the matching messages in the order of the tree with
	// every fork unfolded; hit says which rows are matches.
	matches []rowKey
	hit     map[rowKey]bool
}

// find runs query over the tree and moves to the first match at or after
// the cursor; it returns what to say.
func (t *treeScreen) find(query string) string {
	t.finder = treeFind{input: t.finder.input, query: query, hit: map[rowKey]bool{}}
	t.invalidate()
	if query == "" {
		return ""
	}
	lq := strings.ToLower(query)
	for _, r := range t.data.flatten(nil) {
		if r.kind != rowMessage {
			continue
		}
		m := t.data.runs[r.run].message(int(r.msg))
		if strings.Contains(strings.ToLower(model.SafeText(m.PlainText())), lq) {
			t.finder.matches = append(t.finder.matches, r.key())
			t.finder.hit[r.key()] = true
		}
	}
	if len(t.finder.matches) == 0 {
		return fmt.Sprintf("no message in this tree has “%s”", harnessLine(query))
	}
	return t.nextMatch(+1, true)
}

// nextMatch moves to the next (dir 1) or previous (dir -1) match from the
// cursor, unfolding the forks it is in; inclusive counts the cursor's own
// row.
func (t *treeScreen) nextMatch(dir int, inclusive bool) string {
	f := &t.finder
	if why := f.off(); why != "" {
		return why
	}
	full := t.data.flatten(nil)
	pos := map[rowKey]int{}
	for i, r := range full {
		pos[r.key()] = i
	}
	cur := -1
	if r, ok := t.selected(); ok {
		cur = pos[r.key()]
	}
	pick := -1
	for i, m := range f.matches {
		p := pos[m]
		if dir > 0 && (p > cur || inclusive && p == cur) {
			pick = i
			break
		}
		if dir < 0 && p < cur {
			pick = i
		}
	}
	wrapped := ""
	if pick < 0 {
		// Around the end (or the start) of the tree.
		pick, wrapped = 0, " (from the top)"
		if dir < 0 {
			pick, wrapped = len(f.matches)-1, " (from the bottom)"
		}
	}
	k := f.matches[pick]
	t.unfoldTo(int(k.run))
	t.moveTo(k)
	return fmt.Sprintf("match %d of %d for “%s”%s · n next, N previous", pick+1, len(f.matches), harnessLine(f.query), wrapped)
}

// unfoldTo unfolds run ri and every fork it is in.
func (t *treeScreen) unfoldTo(ri int) {
	changed := false
	for i := ri; i > 0; i = t.data.runs[i].parent {
		if id := t.data.runs[i].run().ID; t.folded[id] {
			t.folded[id] = false
			changed = true
		}
	}
	if changed {
		t.invalidateForks()
		t.refold()
	}
}

// highlight marks the query's occurrences in s, a plain fitted snippet.
func highlight(s, query string, style lipgloss.Style) string {
	if query == "" {
		return s
	}
	ls, lq := strings.ToLower(s), strings.ToLower(query)
	if len(ls) != len(s) {
		return s // lowering changed the byte offsets: leave it plain
	}
	var b strings.Builder
	for {
		i := strings.Index(ls, lq)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		b.WriteString(style.Render(s[i : i+len(lq)]))
		s, ls = s[i+len(lq):], ls[i+len(lq):]
	}
}

// harnessLine is a query on one short line, safe for the terminal.
func harnessLine(s string) string { return ansi.Truncate(model.SafeText(s), 40, "…") }

// copiedMsg says where a copied message went besides the clipboard.
type copiedMsg struct {
	what, path string
	bytes      int
	err        error
}

// copySelected copies the message under the cursor: to the clipboard with
// OSC 52 (which a terminal may ignore, and tine cannot tell), and to a
// file under the state dir, so it is somewhere for sure.
func (a *App) copySelected() tea.Cmd {
	t := a.tree
	r, _ := t.selected() // on a message: copyOff
	text := t.data.runs[r.run].message(int(r.msg)).PlainText()
	what := fmt.Sprintf("message %d", r.msg+1)
	return tea.Batch(tea.SetClipboard(text), func() tea.Msg {
		path, err := writeCopy(text)
		return copiedMsg{what: what, path: path, bytes: len(text), err: err}
	})
}

// writeCopy writes text to copied.txt next to the log, private.
func writeCopy(text string) (string, error) {
	logPath, err := LogPath()
	if err != nil {
		return "", err
	}
	dir := filepath.Dir(logPath)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	p := filepath.Join(dir, "copied.txt")
	return p, os.WriteFile(p, []byte(text), 0o600)
}

func (a *App) copied(msg copiedMsg) tea.Cmd {
	where := "the clipboard (OSC 52)"
	if msg.err != nil {
		return a.setStatus(fmt.Sprintf("copied %s to %s; could not also write it to a file: %s", msg.what, where, errorText(msg.err)), levelWarn)
	}
	p := msg.path
	if home, err := os.UserHomeDir(); err == nil && strings.HasPrefix(p, home) {
		p = "~" + strings.TrimPrefix(p, home)
	}
	return a.setStatus(fmt.Sprintf("copied %s (%s) to %s, and to %s if your terminal ignores that", msg.what, plural(msg.bytes, "byte"), where, model.SafeText(p)), levelInfo)
}

// findTable is the tree's while a search is typed: keys are text but
// for these.
func findTable(k KeyMap) keyTable {
	l, g := k.Library, k.Global
	return keyTable{id: "tree-find",
		intro: "Find in this tree: the text of every message, in every fork (folded ones open when a match is in them). enter finds, then n and N move between matches; esc cancels.",
		keys: []binding{
			{key: withHelp(l.Apply, "enter", "find"), run: do((*App).applyFind), footer: 1},
			{key: l.CancelInput, run: do(func(a *App) tea.Cmd {
				f := &a.tree.finder
				f.typing = false
				f.input.Blur()
				return nil
			}), footer: 2},
			helpKey(g.HelpTyping).at(3), quitKey(g.ForceQuit).at(4),
		},
		rest: func(a *App, msg tea.KeyPressMsg) tea.Cmd {
			var cmd tea.Cmd
			a.tree.finder.input, cmd = a.tree.finder.input.Update(msg)
			return cmd
		},
	}
}

// applyFind ends typing the query and finds it.
func (a *App) applyFind() tea.Cmd {
	t := a.tree
	f := &t.finder
	f.typing = false
	f.input.Blur()
	before := t.cursor
	cmd := a.setStatus(t.find(strings.TrimSpace(f.input.Value())), levelInfo)
	if t.cursor != before {
		return tea.Batch(cmd, a.syncDetail())
	}
	return cmd
}

// off says why n and N have nothing to move to.
func (f *treeFind) off() string {
	switch {
	case f.query == "":
		return "nothing to find yet: / searches this tree"
	case len(f.matches) == 0:
		return fmt.Sprintf("no message in this tree has “%s”", harnessLine(f.query))
	}
	return ""
}

// startFind opens the search line, holding the last query.
func (a *App) startFind() tea.Cmd {
	f := &a.tree.finder
	if f.input.Placeholder == "" {
		f.input = newInput("words in any message of this tree")
	}
	f.input.SetValue(f.query)
	f.input.SetWidth(max(a.width-8, 4))
	f.typing = true
	return f.input.Focus()
}
