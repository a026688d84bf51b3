package tui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/sergi/go-diff/diffmatchpatch"

	"tine/harness"
	"tine/harness/fork"
	"tine/harness/worktree"
	"tine/model"
	"tine/replay"
	"tine/store"
)

// minColumn is the narrowest a Compare column gets; more columns than fit
// page sideways.
const minColumn = 28

// compareColumn is one run in the Compare screen, from the fork point on.
type compareColumn struct {
	run    model.Run
	label  string // "original" for the parent's own continuation
	msgs   []model.Message
	tokens []token
	// changed marks, per token, a word the baseline lacks; lineChanged a
	// token of a line that differs from the baseline's. Both are nil for
	// the baseline itself.
	changed, lineChanged []bool
	lines                []string
	// files are what the run changed in its worktree against the commit
	// it started from; filesErr says why they could not be read.
	files    []worktree.FileStat
	filesErr string
	// replay says how the run was made when it is a replay (rule 9).
	replay *model.Replay
	// aa sums up the run's own replays (how many reproduced it).
	aa model.AARate
}

// headRow is one line of the columns' header.
type headRow int

const (
	headName headRow = iota
	headStats
	headHarness
	headFiles
	headCheck
	headBest
	headRule
)

// token is a word, a line's indentation (spaces), or a line break, of a
// column's text.
type token struct {
	text    string
	newline bool
	indent  bool
	msg     int // which message it belongs to
	// norm, on a line break, is the line as it is compared when its
	// agent's tool-output rewrites changed it (a process id Qwen Code
	// prints with every command): two lines that differ only there are
	// not marked.
	norm string
}

// compareScreen shows N runs side by side from where they part, scrolling
// together, with the words that differ from the first column marked.
type compareScreen struct {
	forkPoint     int
	cols          []compareColumn
	baseline      int // the column the others are diffed against
	focus, first  int
	offset        int
	width, height int
	builtFor      [2]int // width and theme the lines were laid out for
	// heads are the header rows some column has something to say in;
	// bestLines is how many lines the ★ reason takes, wrapped (at most
	// maxBestLines).
	heads     []headRow
	bestLines int
	// diff, when set, is the focused column's whole diff, full screen.
	diff *diffView
}

// compareLoadedMsg carries a loaded comparison.
type compareLoadedMsg struct {
	view   int // App.view when it was asked for
	screen *compareScreen
	err    error
	// reload: the open comparison read again because the store changed.
	reload bool
}

// loadCompare reads the runs and diffs their words, off the UI goroutine.
func loadCompare(ctx context.Context, st *store.Store, agents *harness.Registry, view int, runs []model.Run, labels []string, forkPoint int) tea.Cmd {
	return func() tea.Msg {
		c := &compareScreen{forkPoint: forkPoint}
		rewrites := map[string]func(string) string{}
		for i, r := range runs {
			if fresh, err := st.Run(ctx, r.ID); err == nil {
				r = fresh // its status and spending as stored now
			}
			msgs, _, err := st.Messages(ctx, r.ID)
			if err != nil {
				return compareLoadedMsg{view: view, err: err}
			}
			col := compareColumn{run: r, label: labels[i], msgs: msgs[min(forkPoint, len(msgs)):]}
			rw, ok := rewrites[r.Harness]
			if !ok {
				rw = toolRewritesOf(agents, r.Harness)
				rewrites[r.Harness] = rw
			}
			col.tokens = tokenizeTools(col.msgs, rw)
			c.cols = append(c.cols, col)
		}
		ids := make([]string, len(c.cols))
		for i, col := range c.cols {
			ids[i] = col.run.ID
		}
		if rs, err := st.Replays(ctx, ids); err == nil {
			for i := range c.cols {
				if r, ok := rs[c.cols[i].run.ID]; ok {
					c.cols[i].replay = &r
				}
			}
		}
		if rates, err := st.AARates(ctx, ids); err == nil {
			for i := range c.cols {
				c.cols[i].aa = rates[c.cols[i].run.ID]
			}
		}
		if len(c.cols) > 0 {
			c.diffWords()
		}
		c.readFiles(ctx)
		return compareLoadedMsg{view: view, screen: c}
	}
}

// updateCompare takes the Compare screen's answers: the comparison read
// (to open it, or again), a run marked best, a column's diff.
func (a *App) updateCompare(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case compareLoadedMsg:
		if msg.reload {
			return a.compareReloaded(msg)
		}
		if msg.view != a.view || a.screen != screenTree || a.tree == nil {
			return nil // asked for from a screen the user has left
		}
		a.loading = ""
		if msg.err != nil {
			return a.errorStatus(fmt.Errorf("could not compare: %w", msg.err))
		}
		a.compare, a.fromCompare = msg.screen, nil
		a.show(screenCompare)
		l := a.layout()
		a.compare.layout(l.body.w, l.body.h, &a.styles)
	case applyDoneMsg:
		if msg.err != nil {
			return a.errorStatus(msg.err)
		}
		return a.setStatus(msg.applied.Summary(), levelInfo)
	case bestSetMsg:
		if msg.err != nil {
			return a.errorStatus(msg.err)
		}
		said := ""
		if a.compare != nil {
			for i := range a.compare.cols {
				c := &a.compare.cols[i]
				c.run.Best = msg.best && c.run.ID == msg.id
				if c.run.ID != msg.id {
					continue
				}
				// b takes a mark off as it puts one on: either way it says so.
				said = model.SafeText(c.label) + " is no longer marked best"
				if msg.best {
					said = fmt.Sprintf("marked %s best of the %d runs compared", model.SafeText(c.label), len(a.compare.cols))
				}
			}
			l := a.layout()
			a.compare.layout(l.body.w, l.body.h, &a.styles) // the ★ row comes or goes
		}
		return tea.Batch(a.setStatus(said, levelInfo), a.reloadTree())
	case diffLoadedMsg:
		if a.compare != nil && a.compare.diff != nil && a.compare.diff.runID == msg.runID {
			a.compare.diff.loaded(msg, &a.styles)
		}
	}
	return nil
}

// reloadCompare reads the open comparison again (the same runs), for a
// store that changed: forks running in another process move on in it.
func (a *App) reloadCompare() tea.Cmd {
	c := a.compare
	if a.screen != screenCompare || c == nil || c.diff != nil || a.compareReloading {
		return nil
	}
	a.compareReloading = true
	runs := make([]model.Run, len(c.cols))
	labels := make([]string, len(c.cols))
	for i, col := range c.cols {
		runs[i], labels[i] = col.run, col.label
	}
	load := loadCompare(a.ctx, a.st, a.agents, a.view, runs, labels, c.forkPoint)
	return func() tea.Msg {
		msg := load().(compareLoadedMsg)
		msg.reload = true
		return msg
	}
}

// compareReloaded puts a comparison read again in place of the open one,
// keeping where the person was: the focused column, the baseline and the
// scroll.
func (a *App) compareReloaded(msg compareLoadedMsg) tea.Cmd {
	a.compareReloading = false
	old := a.compare
	if errors.Is(msg.err, store.ErrNotFound) && msg.view == a.view && a.screen == screenCompare && old != nil {
		// An import read a compared run's file again and replaced its
		// runs: the columns would show runs that are gone.
		a.compare = nil
		a.show(screenTree)
		return a.setStatus("left Compare: a compared run's file was read again and its runs replaced; compare again on the new tree", levelWarn)
	}
	if msg.err != nil || msg.view != a.view || a.screen != screenCompare || old == nil || old.diff != nil || len(msg.screen.cols) != len(old.cols) {
		return nil
	}
	c := msg.screen
	c.baseline, c.focus, c.first, c.offset = old.baseline, old.focus, old.first, old.offset
	if c.baseline != 0 {
		c.diffWords()
	}
	a.compare = c
	l := a.layout()
	c.layout(l.body.w, l.body.h, &a.styles)
	return nil
}

// readFiles reads what each column's run changed in its worktree, all at
// once: a git diff each.
func (c *compareScreen) readFiles(ctx context.Context) {
	var wg sync.WaitGroup
	for i := range c.cols {
		col := &c.cols[i]
		if !fork.HasFiles(col.run) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					logPanic("compare: files changed", r)
					col.filesErr = fmt.Sprintf("could not be read (a bug: %v)", r)
				}
			}()
			ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			files, err := fork.Files(ctx, col.run)
			if err != nil {
				col.filesErr = model.OneLine(err.Error(), 200)
			}
			col.files = files
		}()
	}
	wg.Wait()
}

// tokenize splits messages into words, indentation and line breaks, made
// safe.
func tokenize(msgs []model.Message) []token { return tokenizeTools(msgs, nil) }

// tokenizeTools is tokenize, a tool output's lines compared as
// toolOutput rewrites them (when not nil).
func tokenizeTools(msgs []model.Message, toolOutput func(string) string) []token {
	var toks []token
	for i, m := range msgs {
		for _, line := range strings.Split(compareText(m), "\n") {
			toks = appendLine(toks, line, i)
			br := token{newline: true, msg: i}
			if toolOutput != nil && m.Role == model.Tool {
				if n := toolOutput(line); n != line {
					br.norm = lineKey(n)
				}
			}
			toks = append(toks, br)
		}
	}
	return toks
}

// toolRewritesOf is how Compare reads a tool output of the agent named
// name: as a replay compares it (replay.ToolOutputRewriter); nil when
// tine does not know the agent or it rewrites nothing.
func toolRewritesOf(agents *harness.Registry, name string) func(string) string {
	if agents == nil {
		return nil
	}
	ag, ok := agents.Agent(name)
	if !ok {
		return nil
	}
	return replay.ToolOutputRewriter(ag)
}

// appendLine appends the tokens of one line of message msg: its
// indentation, then its words.
func appendLine(toks []token, line string, msg int) []token {
	if n := indentWidth(line); n > 0 && strings.TrimSpace(line) != "" {
		toks = append(toks, token{text: strings.Repeat(" ", n), indent: true, msg: msg})
	}
	for _, w := range strings.Fields(line) {
		toks = append(toks, token{text: w, msg: msg})
	}
	return toks
}

// keyWord adds a token of a line to the line's key (splitLines).
func keyWord(key *strings.Builder, t token) {
	key.WriteString(t.text)
	key.WriteByte(' ')
}

// lineKey is line's key as splitLines makes it from its tokens.
func lineKey(line string) string {
	var key strings.Builder
	for _, t := range appendLine(nil, line, 0) {
		keyWord(&key, t)
	}
	return key.String()
}

// indentWidth is the width of a line's leading blanks, a tab counting 4.
func indentWidth(line string) int {
	n := 0
	for _, r := range line {
		switch r {
		case ' ':
			n++
		case '\t':
			n += 4
		default:
			return n
		}
	}
	return n
}

// compareText is a message as Compare shows it, made safe: its text, and
// each tool call's name and input, a JSON object's string fields written
// out with their own line breaks (an edit's old and new text read as
// code, not as one line of \n and \t).
func compareText(m model.Message) string {
	if m.Role == model.System {
		return foldedText(m)
	}
	var parts []string
	for _, p := range m.Parts {
		switch p.Kind {
		case model.Text, model.Thinking, model.ToolResult:
			if p.Text != "" {
				parts = append(parts, model.SafeText(p.Text))
			}
		case model.ToolCall:
			parts = append(parts, "⚙ "+model.SafeText(p.ToolName))
			if in := toolInputText(p.ToolInput); in != "" {
				parts = append(parts, in)
			}
		}
	}
	return strings.Join(parts, "\n")
}

// foldedText is a system message folded to its first line, as the tree
// shows it: it is what an agent put in the conversation itself (Codex's
// <permissions instructions> and <environment_context>, a compaction's
// summary), which forks differ in only by where they ran, and which would
// fill the columns. How many lines are folded is said; the tree's detail
// pane reads it whole.
func foldedText(m model.Message) string {
	lines := strings.Split(strings.TrimSpace(model.SafeText(m.PlainText())), "\n")
	first := ansi.Truncate(strings.TrimSpace(lines[0]), 80, "…")
	if len(lines) > 1 {
		first += fmt.Sprintf(" ⋯ %s folded", plural(len(lines)-1, "more line"))
	}
	return first
}

// toolInputText writes a tool call's input out: a JSON object as one
// "key: value" line a field, a string with line breaks under its key,
// indented; anything else as it is.
func toolInputText(in string) string {
	var obj map[string]any
	if json.Unmarshal([]byte(in), &obj) != nil {
		return model.SafeText(in)
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		key := model.SafeText(k)
		switch v := obj[k].(type) {
		case string:
			if !strings.Contains(v, "\n") {
				b.WriteString(key + ": " + model.SafeText(v))
				continue
			}
			b.WriteString(key + ":")
			for _, l := range strings.Split(strings.TrimRight(v, "\n"), "\n") {
				b.WriteString("\n  " + model.SafeText(l))
			}
		default:
			raw, _ := json.Marshal(v)
			b.WriteString(key + ": " + model.SafeText(string(raw)))
		}
	}
	return b.String()
}

// diffWords marks, in every column but the baseline, the lines that
// differ from the baseline's and, within them, the words that changed.
func (c *compareScreen) diffWords() {
	base := c.cols[c.baseline].tokens
	for i := range c.cols {
		col := &c.cols[i]
		if i == c.baseline {
			col.changed, col.lineChanged = nil, nil
			continue
		}
		col.changed, col.lineChanged = changedLines(base, col.tokens)
	}
}

// tokenLine is one line of a column: tokens [start, end), the line break
// excluded, and its text to compare lines by.
type tokenLine struct {
	start, end int
	key        string
}

func splitLines(toks []token) []tokenLine {
	var lines []tokenLine
	start := 0
	var key strings.Builder
	for i, t := range toks {
		if t.newline {
			k := key.String()
			if t.norm != "" {
				k = t.norm
			}
			lines = append(lines, tokenLine{start: start, end: i, key: fmt.Sprint(t.msg, "\x00", k)})
			key.Reset()
			start = i + 1
			continue
		}
		keyWord(&key, t)
	}
	if start < len(toks) {
		lines = append(lines, tokenLine{start: start, end: len(toks), key: key.String()})
	}
	return lines
}

// changedLines diffs b against a line by line; a line of b that a lacks
// is marked, and its words are diffed against the line of a it replaces
// (all of them marked when it replaces none).
func changedLines(a, b []token) (changed, lineChanged []bool) {
	la, lb := splitLines(a), splitLines(b)
	ids := map[string]rune{}
	enc := func(ls []tokenLine) []rune {
		rs := make([]rune, len(ls))
		for i, l := range ls {
			id, ok := ids[l.key]
			if !ok {
				id = rune(0x10000 + len(ids))
				ids[l.key] = id
			}
			rs[i] = id
		}
		return rs
	}
	ra, rb := enc(la), enc(lb)
	dmp := diffmatchpatch.New()
	dmp.DiffTimeout = time.Second
	changed, lineChanged = make([]bool, len(b)), make([]bool, len(b))
	i, j := 0, 0
	var deleted []tokenLine // lines of a waiting for the lines of b that replace them
	for _, d := range dmp.DiffMainRunes(ra, rb, false) {
		n := len([]rune(d.Text))
		switch d.Type {
		case diffmatchpatch.DiffEqual:
			i, j, deleted = i+n, j+n, nil
		case diffmatchpatch.DiffDelete:
			deleted = append(deleted, la[i:i+n]...)
			i += n
		case diffmatchpatch.DiffInsert:
			for k := 0; k < n; k++ {
				l := lb[j]
				j++
				for t := l.start; t < l.end; t++ {
					lineChanged[t] = true
				}
				if len(deleted) == 0 {
					for t := l.start; t < l.end; t++ {
						changed[t] = !b[t].indent
					}
					continue
				}
				old := deleted[0]
				deleted = deleted[1:]
				words := changedTokens(a[old.start:old.end], b[l.start:l.end])
				copy(changed[l.start:l.end], words)
			}
		}
	}
	return changed, lineChanged
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
	c.heads = c.headRows()
	c.width = w
	c.bestLines = 1
	if slices.Contains(c.heads, headBest) {
		for _, col := range c.cols {
			c.bestLines = max(c.bestLines, len(c.bestReason(col, c.colWidth()-1)))
		}
	}
	c.height = max(h-len(c.heads)-(c.bestLines-1), 1)
	if c.diff != nil {
		c.diff.setSize(w, h)
	}
	key := [2]int{c.colWidth(), 0}
	if st.IsDark {
		key[1] = 1
	}
	if key != c.builtFor || c.cols[0].lines == nil {
		c.builtFor = key
		for i := range c.cols {
			c.cols[i].lines = c.renderColumn(i, c.colWidth()-1, st)
		}
	}
	// More columns may fit at the same width (40 cells wide, then 80):
	// the first shown moves back so that they are all columns.
	c.clamp()
}

// visible is how many columns fit side by side.
func (c *compareScreen) visible() int {
	return min(max(c.width/minColumn, 1), len(c.cols))
}

func (c *compareScreen) colWidth() int { return max(c.width/c.visible(), 1) }

// renderColumn lays out a column's messages at width w: each message's
// role, then its lines, each after a one-cell gutter that marks a line
// that differs from the baseline's (▌), the changed words marked within.
func (c *compareScreen) renderColumn(i, w int, st *Styles) []string {
	col := c.cols[i]
	gutter := func(changed bool) string {
		if changed {
			return st.Warn.Render("▌")
		}
		return " "
	}
	w = max(w-1, 1) // the gutter
	var lines []string
	var cur strings.Builder
	curW, indent := 0, 0
	mark := false
	flush := func() {
		lines = append(lines, gutter(mark)+cur.String())
		cur.Reset()
		curW = 0
	}
	msg := -1
	for ti, t := range col.tokens {
		if t.msg != msg {
			if curW > 0 {
				flush()
			}
			msg = t.msg
			m := col.msgs[msg]
			head := fmt.Sprintf("%d %s", c.forkPoint+msg+1, roleLabel(m.Role))
			if calls := m.ToolCalls(); len(calls) > 0 {
				head += " " + toolBatchLabel(calls)
			}
			lines = append(lines, " "+st.role(m.Role).Render(fit(head, w)))
		}
		if t.newline {
			if curW > 0 {
				flush()
			}
			indent = 0
			continue
		}
		if curW == 0 {
			mark = col.lineChanged != nil && col.lineChanged[ti]
		}
		if t.indent {
			// Code keeps its indentation, up to half the column.
			indent = min(len(t.text), w/2)
			cur.WriteString(strings.Repeat(" ", indent))
			curW = indent
			continue
		}
		word := t.text
		ww := ansi.StringWidth(word)
		if ww > w-indent {
			word = ansi.Truncate(word, max(w-indent, 1), "…")
			ww = ansi.StringWidth(word)
		}
		if curW > indent && curW+1+ww > w {
			flush()
			cur.WriteString(strings.Repeat(" ", indent))
			curW = indent
		}
		if curW > indent {
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
	if curW > 0 {
		flush()
	}
	if len(col.msgs) == 0 {
		lines = append(lines, " "+st.Subtle.Render("(no messages after the fork point yet)"))
	}
	return lines
}

// toolBatchLabel names a batch of tool calls: "⚙ Read", "⚙ Read ×2",
// "⚙ Read, Bash", "⚙ Read, Bash, Edit +2".
func toolBatchLabel(calls []model.Part) string {
	var names []string
	count := map[string]int{}
	for _, c := range calls {
		n := model.OneLine(c.ToolName, 30)
		if count[n] == 0 {
			names = append(names, n)
		}
		count[n]++
	}
	if len(names) == 1 {
		if len(calls) > 1 {
			return fmt.Sprintf("⚙ %s ×%d", names[0], len(calls))
		}
		return "⚙ " + names[0]
	}
	shown := names[:min(len(names), 3)]
	s := "⚙ " + strings.Join(shown, ", ")
	if rest := len(names) - len(shown); rest > 0 {
		s += fmt.Sprintf(" +%d", rest)
	}
	return s
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

// moveFocus moves the focus d columns, paging it into view.
func (c *compareScreen) moveFocus(d int) {
	c.focus += d
	c.clamp()
}

// scroll scrolls every column together by a navigation key.
func (c *compareScreen) scroll(msg tea.KeyPressMsg, nk NavKeys) {
	v := nav{cursor: c.offset, offset: c.offset, height: 1}
	switch {
	case key.Matches(msg, nk.PageUp):
		c.offset -= max(c.height-1, 1)
	case key.Matches(msg, nk.PageDown):
		c.offset += max(c.height-1, 1)
	case v.move(msg, nk, c.maxLines()):
		c.offset = v.cursor
	}
	c.clamp()
}

// headRows lists the header rows that some column fills: the name, the
// status and spending, and the harness always; files, check and best only
// when a column has them.
func (c *compareScreen) headRows() []headRow {
	rows := []headRow{headName, headStats, headHarness}
	var files, check, best bool
	for _, col := range c.cols {
		files = files || col.run.Worktree != "" || col.run.InPlace
		check = check || col.run.Check != nil
		best = best || col.run.Best
	}
	if files {
		rows = append(rows, headFiles)
	}
	if check {
		rows = append(rows, headCheck)
	}
	if best {
		rows = append(rows, headBest)
	}
	return append(rows, headRule)
}

// view renders the visible columns: a header each, then their lines.
func (c *compareScreen) view(st *Styles) string {
	v := c.visible()
	cw := c.colWidth()
	heads := make([][]string, len(c.heads))
	var bodies []string
	for i := c.first; i < c.first+v; i++ {
		for j, row := range c.heads {
			if row == headBest {
				// The reason the fork is the best, whole: wrapped, not cut.
				lines := c.bestReason(c.cols[i], cw-1)
				for k := 0; k < c.bestLines; k++ {
					cell := ""
					if k < len(lines) {
						cell = st.Warn.Render(lines[k])
					}
					heads[j] = append(heads[j], fit(cell, cw-1)+" ")
				}
				continue
			}
			heads[j] = append(heads[j], fit(c.headCell(i, row, cw-1, st), cw-1)+" ")
		}
		col := c.cols[i]
		end := min(c.offset+c.height, len(col.lines))
		var body []string
		if c.offset < end {
			body = col.lines[c.offset:end]
		}
		bodies = append(bodies, block(strings.Join(body, "\n"), cw-1, c.height))
	}
	var b strings.Builder
	for j, h := range heads {
		if c.heads[j] == headBest {
			// bestLines cells a column, one line after another.
			for k := 0; k < c.bestLines; k++ {
				for col := 0; col < v; col++ {
					b.WriteString(h[col*c.bestLines+k])
				}
				b.WriteByte('\n')
			}
			continue
		}
		b.WriteString(strings.Join(h, ""))
		b.WriteByte('\n')
	}
	out := bodies[0]
	for _, body := range bodies[1:] {
		out = sideBySide(out, " ", body)
	}
	return b.String() + out
}

// maxBestLines bounds how many lines the ★ reason takes in the header.
const maxBestLines = 4

// bestReason is why col's run is the best, wrapped at w: the lines it
// takes (none for a run that is not the best), at most maxBestLines.
func (c *compareScreen) bestReason(col compareColumn, w int) []string {
	r := col.run
	if !r.Best {
		return nil
	}
	why := "★ marked best"
	if r.BestReason != "" {
		why = "★ " + model.OneLine(r.BestReason, 0)
	}
	lines := strings.Split(wrap(why, w), "\n")
	if len(lines) > maxBestLines {
		lines = lines[:maxBestLines]
		lines[maxBestLines-1] = ansi.Truncate(lines[maxBestLines-1]+" …", w, "…")
	}
	return lines
}

// headCell is one column's header line of one row, at most w cells: parts
// that matter less are left off first.
func (c *compareScreen) headCell(i int, row headRow, w int, st *Styles) string {
	col := c.cols[i]
	r := col.run
	switch row {
	case headName:
		name := model.SafeText(col.label)
		if r.Best {
			name = "★ " + name
		}
		style := st.ForkName
		if i == c.focus {
			style = st.HeaderActive
		}
		if i == c.baseline && len(c.cols) > 1 {
			name = "◆ " + name // the others are diffed against it
		}
		return style.Render(name)
	case headStats:
		steps := 0
		for _, m := range col.msgs {
			if m.Role == model.Assistant {
				steps++
			}
		}
		// Spending after the fork point: the original's earlier turns are
		// not part of the comparison.
		parts := []string{st.status(r.Status).Render(statusText(r, endsOnOpenCalls(col.msgs))),
			st.Subtle.Render(plural(steps, "step")), st.Subtle.Render(tokens(model.OwnUsage(col.msgs, 0).Total()) + " tok")}
		if cs := cost(r.CostUSD); cs != "" && r.ForkAt == c.forkPoint {
			parts = append(parts, st.Subtle.Render(cs))
		}
		if took := r.Took(); took > 0 && !r.FinishedAt.IsZero() && r.ForkAt == c.forkPoint {
			parts = append(parts, st.Subtle.Render(took.Round(100*time.Millisecond).String()))
		}
		return fitParts(parts, st.Subtle.Render(" · "), w)
	case headHarness:
		h := r.Harness
		if h == "" {
			h = "unknown harness"
		}
		parts := []string{st.Bold.Render(model.SafeText(h))}
		if col.replay != nil {
			parts = append(parts, st.Fork.Render("↻ "+replayText(*col.replay)))
		}
		if a := col.aa; a.Measured > 0 {
			parts = append(parts, st.Subtle.Render(fmt.Sprintf("A/A %d/%d", a.Reproduced, a.Measured)))
		}
		if r.Handoff {
			parts = append(parts, st.Warn.Render("handoff"))
		}
		if r.InPlace {
			parts = append(parts, st.Subtle.Render("in place"))
		}
		if r.Worktree != "" && r.Branch != "" {
			parts = append(parts, st.Fork.Render("⎇ "+model.SafeText(r.Branch)))
		}
		if !r.OnThisMachine() {
			parts = append(parts, st.Subtle.Render("▣ "+model.SafeText(r.Place)))
		}
		if r.Model != "" {
			parts = append(parts, st.Subtle.Render(model.SafeText(r.Model)))
		}
		return fitParts(parts, st.Subtle.Render(" · "), w)
	case headFiles:
		switch {
		case col.filesErr != "":
			return st.Error.Render("files: " + model.SafeText(col.filesErr))
		case r.Worktree != "":
			return fileSummary(col.files, w, st)
		case r.InPlace:
			return st.Subtle.Render("in place: its files are not kept apart")
		case worktreeRemoved(r):
			return st.Subtle.Render("worktree removed")
		}
		return st.Subtle.Render("no worktree")
	case headCheck:
		return checkSummary(r, st)
	case headBest:
		return st.Warn.Render(strings.Join(c.bestReason(col, w), " "))
	}
	return st.Subtle.Render(strings.Repeat("─", max(w, 0)))
}

// fitParts joins parts with sep, leaving parts off the end until the line
// fits in w cells; the first part is always kept (and cut if it must be).
func fitParts(parts []string, sep string, w int) string {
	for n := len(parts); n > 1; n-- {
		if s := strings.Join(parts[:n], sep); ansi.StringWidth(s) <= w {
			return s
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return fit(parts[0], w)
}

// fileSummary is a run's changed files in one line: "3 files +12 −4" and
// as many names as fit, then how many more.
func fileSummary(files []worktree.FileStat, w int, st *Styles) string {
	if len(files) == 0 {
		return st.Subtle.Render("no files changed")
	}
	added, deleted := 0, 0
	for _, f := range files {
		added += f.Added
		deleted += f.Deleted
	}
	s := plural(len(files), "file") + " " + st.OK.Render(fmt.Sprintf("+%d", added)) + " " + st.Error.Render(fmt.Sprintf("−%d", deleted))
	// Names that do not fit give way to the ones after them; a long path
	// first gives way to its file name. Room is kept for "+N more".
	room := w - ansi.StringWidth(s) - len(" +10 more")
	left := 0
	for _, f := range files {
		name := model.SafeText(f.Path)
		if ansi.StringWidth(name)+1 > room {
			if j := strings.LastIndexByte(name, '/'); j >= 0 {
				name = "…" + name[j:]
			}
		}
		if n := ansi.StringWidth(name) + 1; n <= room {
			s += " " + name
			room -= n
		} else {
			left++
		}
	}
	if left > 0 {
		s += st.Subtle.Render(fmt.Sprintf(" +%d more", left))
	}
	return s
}

// checkSummary is a run's best-of-N check result in a few words.
func checkSummary(r model.Run, st *Styles) string {
	c := r.Check
	switch {
	case c == nil:
		return st.Subtle.Render("no check")
	case !c.Ran && (r.Status == model.Running || r.Status == model.Pending || r.Status == model.Queued):
		return st.Subtle.Render("check waits for the turn")
	case !c.Ran:
		return st.Subtle.Render("check not run")
	case c.Error != "":
		return st.Error.Render("check error: " + model.SafeText(model.OneLine(c.Error, 80)))
	case c.Number && c.Score != nil:
		return st.Info.Render(fmt.Sprintf("check score %g", *c.Score)) + st.Subtle.Render(fmt.Sprintf(" · exit %d", c.Exit))
	case c.Exit == 0:
		return st.OK.Render("✓ check passed")
	}
	return st.Error.Render(fmt.Sprintf("✗ check failed: exit %d", c.Exit))
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

const compareIntro = "Compare: the runs side by side from where they part, scrolling together. Each column is diffed against the baseline (◆; the original at first, a picks the focused column): a line that differs is marked ▌ and the words that changed in it are underlined. Each column says its harness, the files it changed, its check and whether it is the best (★, and why). Columns that do not fit page sideways."

func compareTable(k KeyMap) keyTable {
	c, g := k.Compare, k.Global
	scroll := func(a *App, msg tea.KeyPressMsg) tea.Cmd {
		a.compare.scroll(msg, c.NavKeys)
		return nil
	}
	focus := func(d int) keyRun {
		return do(func(a *App) tea.Cmd { a.compare.moveFocus(d); return nil })
	}
	// The footer names each key in a word or two, so that all of them,
	// apply too, fit in 120 columns; ? says them whole.
	return keyTable{id: "compare", intro: compareIntro, keys: []binding{
		{key: c.Prev, run: focus(-1)}, {key: c.Next, run: focus(+1), footer: 1, brief: brief("←/→", "column")},
		{key: c.Up, run: scroll}, {key: c.Down, run: scroll, footer: 2, brief: brief("↑/↓", "scroll")},
		{key: c.PageUp, run: scroll}, {key: c.PageDown, run: scroll}, {key: c.Top, run: scroll}, {key: c.Bottom, run: scroll},
		{key: c.Diff, run: do((*App).compareDiff), disabled: compareDiffOff, footer: 3, brief: brief("d", "diff")},
		{key: c.Best, run: do((*App).compareBest), footer: 4, brief: brief("b", "best")},
		{key: c.Apply, run: do((*App).compareAskApply), disabled: compareApplyOff, footer: 5, brief: brief("A", "apply")},
		{key: c.Merge, run: do((*App).compareMerge), disabled: compareMergeOff},
		{key: c.Open, run: do((*App).compareOpen), footer: 6, brief: brief("enter", "open")},
		{key: c.Baseline, run: do((*App).compareBaseline), footer: 7, brief: brief("a", "baseline")},
		{key: g.Back, run: do(func(a *App) tea.Cmd {
			a.compare = nil
			a.show(screenTree)
			return a.reloadTree()
		}), footer: 8},
		helpKey(g.Help).at(9), quitKey(g.Quit).at(10), quitKey(g.ForceQuit),
	}}
}

func diffTable(k KeyMap) keyTable {
	d, g := k.Diff, k.Global
	scroll := func(a *App, msg tea.KeyPressMsg) tea.Cmd {
		a.compare.diff.update(msg, d)
		return nil
	}
	return keyTable{id: "diff",
		intro: "Diff: everything the fork changed in its worktree against the files it started with, untracked files included.",
		keys: []binding{
			{key: d.Up, run: scroll}, {key: d.Down, run: scroll, footer: 1, brief: brief("↑/↓", "scroll")},
			{key: d.PageUp, run: scroll}, {key: d.PageDown, run: scroll, footer: 2},
			{key: d.Top, run: scroll, footer: 3}, {key: d.Bottom, run: scroll, footer: 4},
			{key: g.Back, run: do(func(a *App) tea.Cmd { a.compare.diff = nil; return nil }), footer: 5},
			helpKey(g.Help).at(6), quitKey(g.Quit).at(7), quitKey(g.ForceQuit),
		}}
}

// compareDiff shows everything the focused column's run changed in its
// worktree.
func (a *App) compareDiff() tea.Cmd {
	col := a.compare.cols[a.compare.focus]
	r := col.run
	l := a.layout()
	a.compare.diff = newDiffView(col, l.body.w, l.body.h)
	return loadDiff(a.ctx, r)
}

func compareDiffOff(a *App) string {
	col := a.compare.cols[a.compare.focus]
	label := model.SafeText(col.label)
	switch {
	case fork.HasFiles(col.run):
		return ""
	case col.run.InPlace:
		return label + " ran in place: its files are not kept apart"
	case worktreeRemoved(col.run):
		return label + "'s worktree was removed (tine worktree rm or prune): no files to show"
	}
	return label + " has no worktree of its own: no files to show"
}

// compareBaseline diffs the other columns against the focused one.
func (a *App) compareBaseline() tea.Cmd {
	c := a.compare
	c.baseline = c.focus
	c.diffWords()
	c.builtFor = [2]int{}
	l := a.layout()
	c.layout(l.body.w, l.body.h, &a.styles)
	return a.setStatus("the columns are diffed against "+model.SafeText(c.cols[c.focus].label), levelInfo)
}

// compareOpen goes back to the tree, on the focused column's run.
func (a *App) compareOpen() tea.Cmd {
	id := a.compare.cols[a.compare.focus].run.ID
	a.fromCompare, a.compare = a.compare, nil
	a.show(screenTree)
	if ri, ok := a.tree.data.index[id]; ok {
		rd := a.tree.data.runs[ri]
		a.tree.moveTo(rowKey{run: int32(ri), msg: int32(rd.run().ForkAt), kind: rowMessage})
		if rd.n == 0 {
			a.tree.moveTo(rowKey{run: int32(ri), msg: -1, kind: rowFork})
		}
	}
	return a.syncDetail()
}

// compareBest marks the focused column's run best, or unmarks it.
func (a *App) compareBest() tea.Cmd {
	r := a.compare.cols[a.compare.focus].run
	svc, _ := a.act(nil)
	ctx, id, best := a.ctx, r.ID, !r.Best
	// The best of the runs compared: they lose their mark.
	among := make([]string, len(a.compare.cols))
	for i, col := range a.compare.cols {
		among[i] = col.run.ID
	}
	return func() tea.Msg {
		return bestSetMsg{id: id, best: best, err: svc.Pick(ctx, id, best, among)}
	}
}

// compareApplyOff says why the focused column cannot be applied ("" when
// it can): it is no fork of tine's with a worktree of its own, or it runs.
func compareApplyOff(a *App) string {
	r := a.compare.cols[a.compare.focus].run
	label := model.SafeText(r.Label())
	switch {
	case r.ParentID == "":
		return label + " is no fork: there is no other checkout to bring its work into"
	case r.Worktree == "" && r.InPlace:
		return label + " ran in place: its work is in its checkout already"
	case worktreeRemoved(r):
		return label + "'s worktree was removed (tine worktree rm or prune): nothing to apply"
	case r.Worktree == "":
		return label + " has no worktree of its own: nothing to apply"
	case r.Status == model.Running:
		return label + " is running: apply it when its turn has ended"
	}
	return ""
}

// compareAskApply asks before applying the focused fork (y applies).
func (a *App) compareAskApply() tea.Cmd {
	r := a.compare.cols[a.compare.focus].run
	a.confirmApply = &r
	return a.setStatus(fmt.Sprintf("apply %s's work into %s? y applies it as uncommitted changes; any other key leaves the checkout as it is",
		model.SafeText(r.Label()), model.SafeText(r.Cwd)), levelWarn)
}

// applyDoneMsg says how applying a fork went.
type applyDoneMsg struct {
	applied fork.Applied
	err     error
}

// applyConfirmed applies the fork the question was about, off the UI
// goroutine.
func (a *App) applyConfirmed() tea.Cmd {
	r := a.confirmApply
	a.confirmApply = nil
	if r == nil {
		return nil
	}
	svc, _ := a.act(nil)
	ctx, run := a.ctx, *r
	return tea.Batch(a.setStatus("applying "+model.SafeText(run.Label())+"…", levelInfo), func() tea.Msg {
		ap, err := svc.Apply(ctx, run.ID, false)
		return applyDoneMsg{applied: ap, err: err}
	})
}

// confirmApplyTable is the question before applying: y applies, any other
// key leaves the checkout as it is.
func confirmApplyTable() keyTable {
	return keyTable{id: "confirm-apply",
		keys: []binding{{key: key.NewBinding(key.WithKeys("y"), key.WithHelp("y", "apply the fork's work")), run: do((*App).applyConfirmed)}},
		rest: do(func(a *App) tea.Cmd {
			a.confirmApply = nil
			return a.setStatus("not applied: the checkout is as it was", levelInfo)
		}),
	}
}

// compareHeader is the screen's header line on the Compare screen, fitted
// to the terminal: the tree's title gives way first, then the columns
// note shortens, then the database's name goes.
func (a *App) compareHeader(name string) string {
	st := &a.styles
	c := a.compare
	what := fmt.Sprintf("compare %d runs from K=%d", len(c.cols), c.forkPoint)
	cols, short := "", ""
	if v := c.visible(); v < len(c.cols) {
		cols = fmt.Sprintf("  columns %d–%d of %d", c.first+1, c.first+v, len(c.cols))
		short = fmt.Sprintf("  %d–%d/%d", c.first+1, c.first+v, len(c.cols))
	}
	sep := st.Subtle.Render(" › ")
	title := model.OneLine(a.treeTitle, 60)
	for _, cand := range []struct{ name, cols string }{{name, cols}, {name, short}, {"tine", short}} {
		head := st.Title.Render(cand.name) + sep
		tail := what + st.Subtle.Render(cand.cols)
		room := a.width - ansi.StringWidth(head) - ansi.StringWidth(tail) - ansi.StringWidth(sep)
		if room >= min(ansi.StringWidth(title), 12) {
			return head + fit(title, min(room, ansi.StringWidth(title))) + sep + tail
		}
		if a.width-ansi.StringWidth(head)-ansi.StringWidth(tail) >= 0 {
			return head + tail
		}
	}
	return st.Title.Render("tine") + sep + what
}

// worktreeRemoved reports whether r had a worktree of its own that was
// removed since (tine worktree rm or prune keep its branch and base).
func worktreeRemoved(r model.Run) bool {
	return r.Worktree == "" && !r.InPlace && r.BaseCommit != "" && r.OnThisMachine()
}
