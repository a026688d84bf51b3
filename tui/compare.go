package tui

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/sergi/go-diff/diffmatchpatch"

	"tine/harness"
	"tine/harness/worktree"
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
	// files are what the run changed in its worktree against the commit
	// it started from; filesErr says why they could not be read.
	files    []worktree.FileStat
	filesErr string
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
	// heads are the header rows some column has something to say in.
	heads []headRow
	// diff, when set, is the focused column's whole diff, full screen.
	diff *diffView
}

// compareLoadedMsg carries a loaded comparison.
type compareLoadedMsg struct {
	view   int // App.view when it was asked for
	screen *compareScreen
	err    error
}

// loadCompare reads the runs and diffs their words, off the UI goroutine.
func loadCompare(ctx context.Context, st *store.Store, view int, runs []model.Run, labels []string, forkPoint int) tea.Cmd {
	return func() tea.Msg {
		c := &compareScreen{forkPoint: forkPoint}
		for i, r := range runs {
			msgs, _, err := st.Messages(ctx, r.ID)
			if err != nil {
				return compareLoadedMsg{view: view, err: err}
			}
			col := compareColumn{run: r, label: labels[i], msgs: msgs[min(forkPoint, len(msgs)):]}
			col.tokens = tokenize(col.msgs)
			c.cols = append(c.cols, col)
		}
		c.diffWords()
		c.readFiles(ctx)
		return compareLoadedMsg{view: view, screen: c}
	}
}

// readFiles reads what each column's run changed in its worktree, all at
// once: a git diff each.
func (c *compareScreen) readFiles(ctx context.Context) {
	var wg sync.WaitGroup
	for i := range c.cols {
		col := &c.cols[i]
		if col.run.Worktree == "" {
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
			files, err := worktree.DiffStat(ctx, col.run.Worktree, col.run.DiffBase())
			if err != nil {
				col.filesErr = harness.OneLine(err.Error(), 200)
			}
			col.files = files
		}()
	}
	wg.Wait()
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

// diffWords marks, in every column, the words the baseline lacks; the
// baseline (column 0) is marked against column 1.
func (c *compareScreen) diffWords() {
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
	c.heads = c.headRows()
	c.width, c.height = w, max(h-len(c.heads), 1)
	if c.diff != nil {
		c.diff.setSize(w, h)
	}
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
	diff bool // show the focused column's diff
}

func (c *compareScreen) update(msg tea.KeyPressMsg, k KeyMap) compareAction {
	ck := k.Compare
	nk := ck.NavKeys
	switch {
	case key.Matches(msg, k.Global.Back):
		return compareAction{back: true}
	case key.Matches(msg, ck.Next):
		c.focus++
	case key.Matches(msg, ck.Prev):
		c.focus--
	case key.Matches(msg, ck.Best):
		r := c.cols[c.focus].run
		return compareAction{best: &r}
	case key.Matches(msg, ck.Open):
		return compareAction{open: c.cols[c.focus].run.ID}
	case key.Matches(msg, ck.Diff):
		return compareAction{diff: true}
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
		parts := []string{st.status(r.Status).Render(statusText(r, col.msgs)),
			st.Subtle.Render(plural(steps, "step")), st.Subtle.Render(tokens(model.OwnUsage(col.msgs, 0).Total()) + " tok")}
		if cs := cost(r.CostUSD); cs != "" && r.ForkAt == c.forkPoint {
			parts = append(parts, st.Subtle.Render(cs))
		}
		if !r.FinishedAt.IsZero() && !r.CreatedAt.IsZero() && r.ForkAt == c.forkPoint {
			parts = append(parts, st.Subtle.Render(r.FinishedAt.Sub(r.CreatedAt).Round(100*time.Millisecond).String()))
		}
		return fitParts(parts, st.Subtle.Render(" · "), w)
	case headHarness:
		h := r.Harness
		if h == "" {
			h = "unknown harness"
		}
		parts := []string{st.Bold.Render(model.SafeText(h))}
		if r.Handoff {
			parts = append(parts, st.Warn.Render("handoff"))
		}
		if r.InPlace {
			parts = append(parts, st.Subtle.Render("in place"))
		}
		if r.Worktree != "" && r.Branch != "" {
			parts = append(parts, st.Fork.Render("⎇ "+model.SafeText(r.Branch)))
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
		}
		return st.Subtle.Render("no worktree")
	case headCheck:
		return checkSummary(r, st)
	case headBest:
		switch {
		case r.Best && r.BestReason != "":
			return st.Warn.Render("★ " + model.SafeText(r.BestReason))
		case r.Best:
			return st.Warn.Render("★ marked best")
		}
		return ""
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
	case !c.Ran && (r.Status == model.Running || r.Status == model.Pending):
		return st.Subtle.Render("check waits for the turn")
	case !c.Ran:
		return st.Subtle.Render("check not run")
	case c.Error != "":
		return st.Error.Render("check error: " + model.SafeText(harness.OneLine(c.Error, 80)))
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

func (a *App) compareKey(msg tea.KeyPressMsg) tea.Cmd {
	if v := a.compare.diff; v != nil {
		if key.Matches(msg, a.keys.Global.Back) {
			a.compare.diff = nil
			return nil
		}
		v.update(msg, a.keys.Diff)
		return nil
	}
	act := a.compare.update(msg, a.keys)
	switch {
	case act.diff:
		col := a.compare.cols[a.compare.focus]
		r := col.run
		label := model.SafeText(col.label)
		switch {
		case r.Worktree != "":
			l := a.layout()
			a.compare.diff = newDiffView(col, l.body.w, l.body.h)
			return loadDiff(a.ctx, r.ID, r.Worktree, r.DiffBase())
		case r.InPlace:
			return a.setStatus(label+" ran in place: its files are not kept apart", levelWarn)
		}
		return a.setStatus(label+" has no worktree of its own: no files to show", levelWarn)
	case act.back:
		a.compare = nil
		a.show(screenTree)
		return a.reloadTree()
	case act.open != "":
		a.compare = nil
		a.show(screenTree)
		if ri, ok := a.tree.data.index[act.open]; ok {
			rd := a.tree.data.runs[ri]
			a.tree.moveTo(rowKey{run: int32(ri), msg: int32(rd.run().ForkAt), kind: rowMessage})
			if len(rd.own) == 0 {
				a.tree.moveTo(rowKey{run: int32(ri), msg: -1, kind: rowFork})
			}
		}
		return a.syncDetail()
	case act.best != nil:
		ctx, st, id, best := a.ctx, a.st, act.best.ID, !act.best.Best
		return func() tea.Msg {
			return bestSetMsg{id: id, best: best, err: st.SetBest(ctx, id, best)}
		}
	}
	return nil
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
	title := harness.OneLine(a.treeTitle, 60)
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
