package tui

import (
	"context"
	"fmt"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/sergi/go-diff/diffmatchpatch"

	"tine/model"
	"tine/store"
)

// minColumn is the narrowest a Compare column gets; more columns than fit
// page sideways.
const minColumn = 28

// compareColumn is one run in the Compare screen, from the fork point on.
type compareColumn struct {
	run     model.Run
	label   string // "original" for the parent's own continuation
	msgs    []model.Message
	tokens  []token
	changed []bool // per token: absent from the baseline column
	lines   []string
}

// token is a word, or a line break, of a column's text.
type token struct {
	text    string
	newline bool
	msg     int // which message it belongs to
}

// compareScreen shows N runs side by side from where they part, scrolling
// together, with the words that differ from the first column marked.
type compareScreen struct {
	forkPoint     int
	cols          []compareColumn
	focus, first  int
	offset        int
	width, height int
	builtFor      [2]int // width and theme the lines were laid out for
}

// compareLoadedMsg carries a loaded comparison.
type compareLoadedMsg struct {
	screen *compareScreen
	err    error
}

// loadCompare reads the runs and diffs their words, off the UI goroutine.
func loadCompare(st *store.Store, runs []model.Run, labels []string, forkPoint int) tea.Cmd {
	return func() tea.Msg {
		c := &compareScreen{forkPoint: forkPoint}
		for i, r := range runs {
			msgs, _, err := st.Messages(context.Background(), r.ID)
			if err != nil {
				return compareLoadedMsg{err: err}
			}
			col := compareColumn{run: r, label: labels[i], msgs: msgs[min(forkPoint, len(msgs)):]}
			col.tokens = tokenize(col.msgs)
			c.cols = append(c.cols, col)
		}
		c.diff()
		return compareLoadedMsg{screen: c}
	}
}

// tokenize splits messages into words and line breaks, made safe.
func tokenize(msgs []model.Message) []token {
	var toks []token
	for i, m := range msgs {
		for _, line := range strings.Split(model.SafeText(m.PlainText()), "\n") {
			for _, w := range strings.Fields(line) {
				toks = append(toks, token{text: w, msg: i})
			}
			toks = append(toks, token{newline: true, msg: i})
		}
	}
	return toks
}

// diff marks, in every column, the words the baseline lacks; the baseline
// (column 0) is marked against column 1.
func (c *compareScreen) diff() {
	if len(c.cols) < 2 {
		return
	}
	for i := range c.cols {
		other := 0
		if i == 0 {
			other = 1
		}
		c.cols[i].changed = changedTokens(c.cols[other].tokens, c.cols[i].tokens)
	}
}

// changedTokens returns, for each token of b, whether it is not part of
// the longest common subsequence of words with a (Myers diff over words).
func changedTokens(a, b []token) []bool {
	ids := map[string]rune{}
	enc := func(ts []token) []rune {
		rs := make([]rune, len(ts))
		for i, t := range ts {
			w := t.text
			if t.newline {
				w = "\n"
			}
			id, ok := ids[w]
			if !ok {
				id = rune(0x10000 + len(ids)) // past the BMP: always valid runes
				ids[w] = id
			}
			rs[i] = id
		}
		return rs
	}
	ra, rb := enc(a), enc(b)
	dmp := diffmatchpatch.New()
	dmp.DiffTimeout = time.Second
	changed := make([]bool, len(b))
	j := 0
	for _, d := range dmp.DiffMainRunes(ra, rb, false) {
		n := len([]rune(d.Text))
		switch d.Type {
		case diffmatchpatch.DiffEqual:
			j += n
		case diffmatchpatch.DiffInsert:
			for k := 0; k < n && j < len(changed); k++ {
				changed[j] = true
				j++
			}
		}
	}
	return changed
}

// layout sets the screen's size and lays the columns out again when the
// width or theme changed.
func (c *compareScreen) layout(w, h int, st *Styles) {
	c.width, c.height = w, max(h-3, 1)
	key := [2]int{c.colWidth(), 0}
	if st.IsDark {
		key[1] = 1
	}
	if key == c.builtFor && c.cols[0].lines != nil {
		return
	}
	c.builtFor = key
	for i := range c.cols {
		c.cols[i].lines = c.renderColumn(i, c.colWidth()-1, st)
	}
	c.clamp()
}

// visible is how many columns fit side by side.
func (c *compareScreen) visible() int {
	return min(max(c.width/minColumn, 1), len(c.cols))
}

func (c *compareScreen) colWidth() int { return max(c.width/c.visible(), 1) }

// renderColumn lays out a column's messages at width w: each message's
// role, then its words, the ones the baseline lacks marked.
func (c *compareScreen) renderColumn(i, w int, st *Styles) []string {
	col := c.cols[i]
	var lines []string
	var cur strings.Builder
	curW := 0
	flush := func() {
		lines = append(lines, cur.String())
		cur.Reset()
		curW = 0
	}
	msg := -1
	for ti, t := range col.tokens {
		if t.msg != msg {
			if cur.Len() > 0 {
				flush()
			}
			msg = t.msg
			m := col.msgs[msg]
			head := fmt.Sprintf("%d %s", c.forkPoint+msg+1, roleLabel(m.Role))
			if calls := m.ToolCalls(); len(calls) > 0 {
				head += " ⚙ " + model.SafeText(calls[0].ToolName)
				if len(calls) > 1 {
					head += fmt.Sprintf(" ×%d", len(calls))
				}
			}
			lines = append(lines, st.role(m.Role).Render(fit(head, w)))
		}
		if t.newline {
			if cur.Len() > 0 {
				flush()
			}
			continue
		}
		word := t.text
		ww := len([]rune(word))
		if ww > w {
			word, ww = string([]rune(word)[:max(w-1, 1)])+"…", w
		}
		if curW > 0 && curW+1+ww > w {
			flush()
		}
		if curW > 0 {
			cur.WriteByte(' ')
			curW++
		}
		if col.changed != nil && col.changed[ti] {
			cur.WriteString(st.Match.Render(word))
		} else {
			cur.WriteString(word)
		}
		curW += ww
	}
	if cur.Len() > 0 {
		flush()
	}
	if len(col.msgs) == 0 {
		lines = append(lines, st.Subtle.Render("(no messages after the fork point yet)"))
	}
	return lines
}

func (c *compareScreen) maxLines() int {
	n := 0
	for _, col := range c.cols {
		n = max(n, len(col.lines))
	}
	return n
}

func (c *compareScreen) clamp() {
	c.focus = min(max(c.focus, 0), len(c.cols)-1)
	v := c.visible()
	if c.focus < c.first {
		c.first = c.focus
	}
	if c.focus >= c.first+v {
		c.first = c.focus - v + 1
	}
	c.first = min(max(c.first, 0), max(len(c.cols)-v, 0))
	c.offset = min(max(c.offset, 0), max(c.maxLines()-c.height, 0))
}

// compareAction is what a key on the Compare screen asks the app to do.
type compareAction struct {
	open string // run to open in the tree
	best *model.Run
	back bool
}

func (c *compareScreen) update(msg tea.KeyPressMsg, k KeyMap) compareAction {
	nk := k.Tree.NavKeys
	switch {
	case key.Matches(msg, k.Global.Back):
		return compareAction{back: true}
	case key.Matches(msg, k.Tree.Into), msg.String() == "tab":
		c.focus++
	case key.Matches(msg, k.Tree.Out), msg.String() == "shift+tab":
		c.focus--
	case key.Matches(msg, k.Tree.Best):
		r := c.cols[c.focus].run
		return compareAction{best: &r}
	case msg.String() == "enter":
		return compareAction{open: c.cols[c.focus].run.ID}
	default:
		v := nav{cursor: c.offset, offset: c.offset, height: 1}
		switch {
		case key.Matches(msg, nk.PageUp):
			c.offset -= max(c.height-1, 1)
		case key.Matches(msg, nk.PageDown):
			c.offset += max(c.height-1, 1)
		case v.move(msg, nk, c.maxLines()):
			c.offset = v.cursor
		}
	}
	c.clamp()
	return compareAction{}
}

// view renders the visible columns: a header each, then their lines.
func (c *compareScreen) view(st *Styles) string {
	v := c.visible()
	cw := c.colWidth()
	var heads [3][]string
	var bodies []string
	for i := c.first; i < c.first+v; i++ {
		col := c.cols[i]
		r := col.run
		name := col.label
		if r.Best {
			name = "★ " + name
		}
		nameStyle := st.ForkName
		if i == c.focus {
			nameStyle = st.HeaderActive
		}
		steps := 0
		for _, m := range col.msgs {
			if m.Role == model.Assistant {
				steps++
			}
		}
		// Spending after the fork point: the original's earlier turns are
		// not part of the comparison.
		stats := []string{plural(steps, "step"), tokens(model.OwnUsage(col.msgs, 0).Total()) + " tok"}
		if cs := cost(r.CostUSD); cs != "" && r.ForkAt == c.forkPoint {
			stats = append(stats, cs)
		}
		if !r.FinishedAt.IsZero() && !r.CreatedAt.IsZero() && r.ForkAt == c.forkPoint {
			stats = append(stats, r.FinishedAt.Sub(r.CreatedAt).Round(100*time.Millisecond).String())
		}
		heads[0] = append(heads[0], fit(nameStyle.Render(model.SafeText(name)), cw-1)+" ")
		heads[1] = append(heads[1], fit(st.status(r.Status).Render(statusGlyph(r.Status)+" "+string(r.Status))+st.Subtle.Render(" · "+strings.Join(stats, " · ")), cw-1)+" ")
		heads[2] = append(heads[2], st.Subtle.Render(strings.Repeat("─", max(cw-1, 0)))+" ")
		end := min(c.offset+c.height, len(col.lines))
		var body []string
		if c.offset < end {
			body = col.lines[c.offset:end]
		}
		bodies = append(bodies, block(strings.Join(body, "\n"), cw-1, c.height))
	}
	var b strings.Builder
	for _, h := range heads {
		b.WriteString(strings.Join(h, ""))
		b.WriteByte('\n')
	}
	out := bodies[0]
	for _, body := range bodies[1:] {
		out = sideBySide(out, " ", body)
	}
	return b.String() + out
}

// comparisonFor picks what to compare from the tree cursor: the fork under
// it (or the forks right below the message under it) with its siblings of
// the same boundary, and the parent's own continuation as "original".
func comparisonFor(t *treeScreen) (runs []model.Run, labels []string, forkPoint int, why string) {
	r, ok := t.selected()
	if !ok {
		return nil, nil, 0, "nothing selected"
	}
	ri := int(r.run)
	if r.kind == rowMessage && t.cursor+1 < len(t.rows) && t.rows[t.cursor+1].kind == rowFork {
		ri = int(t.rows[t.cursor+1].run)
	}
	rd := t.data.runs[ri]
	if rd.parent < 0 || rd.subagent {
		return nil, nil, 0, "put the cursor on a fork (⑂) or on a message with forks below it"
	}
	parent := t.data.runs[rd.parent]
	k := rd.run().ForkAt
	for _, ci := range parent.children {
		c := t.data.runs[ci].run()
		if c.ForkAt == k && !c.Hidden {
			runs = append(runs, c)
			labels = append(labels, c.Label())
		}
	}
	if parent.run().Len() > k {
		runs = append([]model.Run{parent.run()}, runs...)
		labels = append([]string{"original (" + parent.run().Label() + ")"}, labels...)
	}
	if len(runs) < 2 {
		return nil, nil, 0, "only one branch continues from here: fork it (f) to have something to compare"
	}
	if len(runs) > 10 {
		runs, labels = runs[:10], labels[:10]
	}
	return runs, labels, k, ""
}

// bestSetMsg reports that a run was marked (or unmarked) best.
type bestSetMsg struct {
	id   string
	best bool
	err  error
}

func (a *App) compareKey(msg tea.KeyPressMsg) tea.Cmd {
	act := a.compare.update(msg, a.keys)
	switch {
	case act.back:
		a.screen, a.compare = screenTree, nil
		return a.reloadTree()
	case act.open != "":
		a.screen, a.compare = screenTree, nil
		if ri, ok := a.tree.data.index[act.open]; ok {
			rd := a.tree.data.runs[ri]
			a.tree.moveTo(rowKey{run: int32(ri), msg: int32(rd.run().ForkAt), kind: rowMessage})
			if len(rd.own) == 0 {
				a.tree.moveTo(rowKey{run: int32(ri), msg: -1, kind: rowFork})
			}
		}
		return a.syncDetail()
	case act.best != nil:
		st, id, best := a.st, act.best.ID, !act.best.Best
		return func() tea.Msg {
			return bestSetMsg{id: id, best: best, err: st.SetBest(context.Background(), id, best)}
		}
	}
	return nil
}
