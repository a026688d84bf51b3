package tui

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
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
// The search runs in a command (findIn), never in Update: on a long tree
// it reads every message, from the store one at a time, keeping none.
type treeFind struct {
	input  textinput.Model
	typing bool   // the query is being typed
	query  string // the query applied: its matches show
	// pending is the query being searched now, "" for none: only its
	// answer is taken; refreshing says that search only marks matches.
	pending    string
	refreshing bool
	// matches are the matching messages in the order of the tree with
	// every fork unfolded, and at their places in that order; hit says
	// which rows are matches; order is every row's place, as the search
	// saw the tree.
	matches []rowKey
	at      []int
	hit     map[rowKey]bool
	order   map[rowKey]int
}

// findDoneMsg answers a search of the tree screen's data of generation
// gen (treeScreen.gen) for query. refresh: the tree was read again, so
// its matches are marked anew without moving the cursor.
type findDoneMsg struct {
	gen     int
	query   string
	refresh bool
	matches []rowKey
	at      []int
	order   map[rowKey]int
	err     error
}

// findIn searches data for query. It runs off the UI goroutine: a tree's
// runs are never changed once read (a reload reads a new one), and its
// messages are read from the store as they are searched.
func findIn(ctx context.Context, data *treeData, query string) (matches []rowKey, at []int, order map[rowKey]int, err error) {
	lq := strings.ToLower(query)
	has := func(m *model.Message) bool {
		return strings.Contains(strings.ToLower(model.SafeText(m.PlainText())), lq)
	}
	// Which own messages of each run match: read whole from the store,
	// or from memory.
	hits := make([]map[int]bool, len(data.runs))
	for ri, rd := range data.runs {
		hits[ri] = map[int]bool{}
		if data.src == nil {
			for i := rd.first(); i < rd.first()+rd.n; i++ {
				if has(rd.message(i)) {
					hits[ri][i] = true
				}
			}
			continue
		}
		err := data.src.EachOwnMessage(ctx, rd.run().ID, func(seq int, m model.Message) error {
			if seq >= rd.first() && seq < rd.first()+rd.n && has(&m) {
				hits[ri][seq] = true
			}
			return ctx.Err()
		})
		if err != nil {
			return nil, nil, nil, err
		}
	}
	rows := data.flatten(nil)
	order = make(map[rowKey]int, len(rows))
	for i, r := range rows {
		order[r.key()] = i
		if r.kind == rowMessage && hits[r.run][int(r.msg)] {
			matches = append(matches, r.key())
			at = append(at, i)
		}
	}
	return matches, at, order, nil
}

// find searches the open tree for query in a command; its answer (found)
// moves to the first match at or after the cursor, or, refresh set, only
// marks the matches.
func (a *App) find(query string, refresh bool) tea.Cmd {
	t := a.tree
	t.finder.pending, t.finder.refreshing = query, refresh
	ctx, data, gen := a.ctx, t.data, t.gen
	return func() tea.Msg {
		matches, at, order, err := findIn(ctx, data, query)
		return findDoneMsg{gen: gen, query: query, refresh: refresh, matches: matches, at: at, order: order, err: err}
	}
}

// found takes a search's answer. One for a tree read again since, for a
// query other than the one asked last, or after the screen was left
// (show abandons the search) is dropped: it would move the cursor on a
// tree that is no longer the one searched.
func (a *App) found(msg findDoneMsg) tea.Cmd {
	t := a.tree
	if t == nil || msg.gen != t.gen || msg.query != t.finder.pending {
		return nil
	}
	f := &t.finder
	if msg.err != nil {
		f.pending = ""
		return a.setStatus(fmt.Sprintf("could not search the tree: %s", errorText(msg.err)), levelWarn)
	}
	f.pending, f.query = "", msg.query
	f.matches, f.at, f.order = msg.matches, msg.at, msg.order
	f.hit = make(map[rowKey]bool, len(msg.matches))
	for _, k := range msg.matches {
		f.hit[k] = true
	}
	t.invalidate()
	if msg.refresh {
		return nil
	}
	if len(f.matches) == 0 {
		return a.setStatus(f.off(), levelInfo)
	}
	before := t.cursor
	cmd := a.setStatus(t.nextMatch(+1, true), levelInfo)
	if t.cursor != before {
		return tea.Batch(cmd, a.syncDetail())
	}
	return cmd
}

// refind searches the tree read again for the query shown, or the one
// being searched: matches are rows of the tree as it was read.
func (a *App) refind() tea.Cmd {
	f := &a.tree.finder
	switch {
	case f.pending != "":
		return a.find(f.pending, f.refreshing)
	case f.query != "":
		return a.find(f.query, true)
	}
	return nil
}

// nextMatch moves to the next (dir 1) or previous (dir -1) match from the
// cursor, unfolding the forks it is in; inclusive counts the cursor's own
// row. It looks the cursor's row up in the order the search saw (the
// search itself does not run again).
func (t *treeScreen) nextMatch(dir int, inclusive bool) string {
	f := &t.finder
	if why := f.off(); why != "" {
		return why
	}
	cur := -1
	if r, ok := t.selected(); ok {
		if p, ok := f.order[r.key()]; ok {
			cur = p
		}
	}
	var pick int
	if dir > 0 {
		if inclusive {
			pick = sort.SearchInts(f.at, cur) // the first at or after cur
		} else {
			pick = sort.SearchInts(f.at, cur+1)
		}
	} else {
		pick = sort.SearchInts(f.at, cur) - 1 // the last before cur
	}
	wrapped := ""
	switch {
	case pick >= len(f.matches):
		pick, wrapped = 0, " (from the top)" // around the end of the tree
	case pick < 0:
		pick, wrapped = len(f.matches)-1, " (from the bottom)"
	}
	k := f.matches[pick]
	if int(k.run) >= len(t.data.runs) {
		return "" // a match in a run gone since: its new search comes next
	}
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

// copiedMsg says what was copied and where it went besides the clipboard.
type copiedMsg struct {
	what, path string
	text       string
	err        error
	// unread is why the message could not be read to copy it.
	unread error
}

// copySelected copies the message under the cursor: to the clipboard with
// OSC 52 (which a terminal may ignore, and tine cannot tell), and to a
// file under the state dir, so it is somewhere for sure. What is copied is
// what the screen shows, through model.SafeText (ARCHITECTURE.md, terminal
// safety): a transcript's escape sequences, C1 and bidi controls would run
// or lie again wherever the copy is pasted. A message whose page is not
// read yet (a long run's, far from where it was read) is read by the
// command, off Update, never copied as the empty row it shows meanwhile.
func (a *App) copySelected() tea.Cmd {
	t := a.tree
	r, _ := t.selected() // on a message: copyOff
	ri, i := int(r.run), int(r.msg)
	what := fmt.Sprintf("message %d", i+1)
	var m *model.Message
	if rd := t.data.runs[ri]; rd.loaded(i) {
		c := *rd.message(i)
		m = &c
	}
	data, ctx := t.data, a.ctx
	return func() tea.Msg {
		if m == nil {
			ms, err := data.ownMessages(ctx, ri, i, i+1)
			if err == nil && len(ms) != 1 {
				err = fmt.Errorf("the store has no %s in this run", what)
			}
			if err != nil {
				return copiedMsg{what: what, unread: err}
			}
			m = &ms[0]
		}
		text := model.SafeText(m.PlainText())
		path, err := writeCopy(text)
		return copiedMsg{what: what, path: path, text: text, err: err}
	}
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
	if msg.unread != nil {
		return a.setStatus(fmt.Sprintf("could not copy %s: reading it failed: %s", msg.what, errorText(msg.unread)), levelError)
	}
	where := "the clipboard (OSC 52)"
	clip := tea.SetClipboard(msg.text)
	if msg.err != nil {
		return tea.Batch(clip, a.setStatus(fmt.Sprintf("copied %s to %s; could not also write it to a file: %s", msg.what, where, errorText(msg.err)), levelWarn))
	}
	p := msg.path
	if home, err := os.UserHomeDir(); err == nil && strings.HasPrefix(p, home) {
		p = "~" + strings.TrimPrefix(p, home)
	}
	return tea.Batch(clip, a.setStatus(fmt.Sprintf("copied %s (%s) to %s, and to %s if your terminal ignores that", msg.what, plural(len(msg.text), "byte"), where, model.SafeText(p)), levelInfo))
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

// applyFind ends typing the query and searches for it; an empty query
// clears the matches.
func (a *App) applyFind() tea.Cmd {
	t := a.tree
	f := &t.finder
	f.typing = false
	f.input.Blur()
	q := strings.TrimSpace(f.input.Value())
	if q == "" {
		had := f.query
		t.finder = treeFind{input: f.input, hit: map[rowKey]bool{}}
		t.invalidate()
		if had != "" {
			return a.setStatus(fmt.Sprintf("cleared the matches of “%s”", harnessLine(had)), levelInfo)
		}
		return nil
	}
	return tea.Batch(a.setStatus(fmt.Sprintf("finding “%s”…", harnessLine(q)), levelInfo), a.find(q, false))
}

// off says why n and N have nothing to move to.
func (f *treeFind) off() string {
	switch {
	case f.pending != "" && f.pending != f.query:
		return fmt.Sprintf("finding “%s”…", harnessLine(f.pending))
	case f.query == "":
		return "nothing to find yet: / searches this tree"
	case len(f.matches) == 0:
		return fmt.Sprintf("no message in this tree has “%s”", harnessLine(f.query))
	}
	return ""
}

// startFind opens the search line empty, for a new query (as / in less
// or vim does); the last one is named in its placeholder.
func (a *App) startFind() tea.Cmd {
	f := &a.tree.finder
	if f.input.Placeholder == "" {
		f.input = newInput("")
	}
	f.input.Placeholder = "words in any message of this tree"
	if f.query != "" {
		f.input.Placeholder = fmt.Sprintf("a new search (enter alone clears “%s”)", harnessLine(f.query))
	}
	f.input.SetValue("")
	f.input.SetWidth(max(a.width-8, 4))
	f.typing = true
	return f.input.Focus()
}
