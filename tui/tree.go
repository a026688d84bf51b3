package tui

import (
	"fmt"
	"slices"
	"strings"

	"github.com/charmbracelet/x/ansi"

	"tine/model"
)

// treeScreen shows one fork tree, one line a message, with a detail pane.
type treeScreen struct {
	// gen says which read of the tree data is (App.treeGen): work asked
	// for it says the gen it answers, and is dropped once data is newer.
	gen    int
	data   *treeData
	rows   []row
	folded map[string]bool

	nav
	width int // of the list region; nav.height is its height

	// rowCache holds rendered unselected rows for the current width and
	// theme; renders counts row renders, so tests can prove that moving the
	// cursor renders no off-screen row.
	rowCache map[rowKey]string
	renders  int
	// inflight are the pages of messages being read (bodies.go).
	inflight map[pageKey]bool

	spinFrame int // advanced while forks run
	// streaming holds the tail of the text a running fork is writing now,
	// notes the latest note of one this program runs (a retry).
	streaming   map[string]string
	notes       map[string]string
	detail      detailPane
	detailFocus bool
	detailOnly  bool // narrow terminals read a message full-screen
	// finder is / search within the tree (find.go).
	finder treeFind
}

func newTreeScreen(data *treeData) treeScreen {
	t := treeScreen{data: data, folded: map[string]bool{}, rowCache: map[rowKey]string{}, streaming: map[string]string{}, notes: map[string]string{}}
	for _, r := range data.runs {
		if r.subagent {
			t.folded[r.run().ID] = true // a subagent's transcript opens on demand
		}
	}
	t.rows = data.flatten(t.folded)
	return t
}

// selected returns the row under the cursor.
func (t *treeScreen) selected() (row, bool) {
	if t.cursor < 0 || t.cursor >= len(t.rows) {
		return row{}, false
	}
	return t.rows[t.cursor], true
}

// setSize sets the list region and drops cached rows when the width changed.
func (t *treeScreen) setSize(w, h int) {
	if w != t.width {
		clear(t.rowCache)
	}
	t.width, t.height = w, h
	t.clamp()
}

func (t *treeScreen) invalidate() { clear(t.rowCache) }

// invalidateForks drops the cached fork lines only: folding changes
// their arrow and count, never a message line (whose guides come from
// its depth), so the message lines on screen need not be drawn again.
func (t *treeScreen) invalidateForks() {
	for k := range t.rowCache {
		if k.kind == rowFork {
			delete(t.rowCache, k)
		}
	}
}

func (t *treeScreen) moveTo(k rowKey) {
	for i, r := range t.rows {
		if r.key() == k {
			t.cursor = i
			break
		}
	}
	t.clamp()
}

// clamp keeps the cursor on a row and in view.
func (t *treeScreen) clamp() { t.nav.clamp(len(t.rows)) }

// currentRun is the run the cursor is in.
func (t *treeScreen) currentRun() *runData {
	r, ok := t.selected()
	if !ok {
		return nil
	}
	return t.data.runs[r.run]
}

// forkRow returns the row index of run ri's fork header, or -1.
func (t *treeScreen) forkRow(ri int32) int {
	for i, r := range t.rows {
		if r.kind == rowFork && r.run == ri {
			return i
		}
	}
	return -1
}

// into enters the fork under the cursor, or the first fork made right
// after the message under it.
func (t *treeScreen) into() string {
	r, ok := t.selected()
	if !ok {
		return ""
	}
	target := -1
	switch {
	case r.kind == rowMerge:
		return t.toMerged(r)
	case r.kind == rowFork:
		target = int(r.run)
	case t.cursor+1 < len(t.rows) && t.rows[t.cursor+1].kind == rowFork:
		target = int(t.rows[t.cursor+1].run)
	default:
		return "no fork here: forks branch off below the message they start after (marked ⑂)"
	}
	id := t.data.runs[target].run().ID
	if t.folded[id] {
		t.folded[id] = false
		t.invalidateForks()
		t.refold()
	}
	h := t.forkRow(int32(target))
	t.cursor = h
	if h+1 < len(t.rows) && t.rows[h+1].kind == rowMessage && t.rows[h+1].run == int32(target) {
		t.cursor = h + 1
	}
	t.clamp()
	if t.data.runs[target].n == 0 {
		return fmt.Sprintf("%s has no messages of its own yet", t.data.runs[target].run().Label())
	}
	return ""
}

// toMerged goes from merge line r to the ⑂ line of the fork it names,
// unfolding what hides it.
func (t *treeScreen) toMerged(r row) string {
	l, ok := t.data.mergeAt(r)
	fi, in := t.data.index[l.fork]
	if !ok || !in {
		return "the fork merged here is not in this tree any more"
	}
	t.unfoldTo(t.data.runs[fi].parent)
	if h := t.forkRow(int32(fi)); h >= 0 {
		t.cursor = h
	}
	t.clamp()
	return ""
}

// out leaves the fork the cursor is in, landing on its header; on a header,
// on the parent's message at the boundary.
func (t *treeScreen) out() string {
	r, ok := t.selected()
	if !ok {
		return ""
	}
	rd := t.data.runs[r.run]
	if rd.parent < 0 {
		return "already at the root run"
	}
	if r.kind != rowFork {
		t.cursor = t.forkRow(r.run)
		t.clamp()
		return ""
	}
	// On a header: go to the parent's message the fork starts after (or,
	// for a subagent, the message whose tool call started it).
	k := rd.run().ForkAt
	if rd.subagent {
		k = rd.spawnedAt + 1
	}
	for i, x := range t.rows {
		if x.kind == rowMessage && x.run == int32(rd.parent) && int(x.msg) == k-1 {
			t.cursor = i
			t.clamp()
			return ""
		}
	}
	// The boundary lies in the parent's own inherited prefix: go to the
	// parent's header instead.
	if h := t.forkRow(int32(rd.parent)); h >= 0 {
		t.cursor = h
	}
	t.clamp()
	return ""
}

// sibling jumps to the next or previous fork of the same parent.
func (t *treeScreen) sibling(dir int) string {
	r, ok := t.selected()
	if !ok {
		return ""
	}
	rd := t.data.runs[r.run]
	if rd.parent < 0 {
		return "the root run has no siblings; use → on a ⑂ line to go into a fork"
	}
	if rd.subagent {
		return "a subagent has no sibling forks"
	}
	sibs := t.data.runs[rd.parent].children
	at := 0
	for i, s := range sibs {
		if s == int(r.run) {
			at = i
		}
	}
	next := at + dir
	if next < 0 || next >= len(sibs) {
		if len(sibs) == 1 {
			return fmt.Sprintf("no %s sibling: this is the only fork of its parent", map[int]string{1: "next", -1: "previous"}[dir])
		}
		return fmt.Sprintf("no %s sibling: %d forks share this parent", map[int]string{1: "next", -1: "previous"}[dir], len(sibs))
	}
	if h := t.forkRow(int32(sibs[next])); h >= 0 {
		t.cursor = h
	}
	t.clamp()
	return ""
}

// fold folds or unfolds the fork under the cursor (or the one it is in).
func (t *treeScreen) fold() string {
	r, ok := t.selected()
	if !ok {
		return ""
	}
	if r.kind != rowFork && t.data.runs[r.run].parent < 0 {
		if t.cursor+1 < len(t.rows) && t.rows[t.cursor+1].kind == rowFork {
			r = t.rows[t.cursor+1]
		} else {
			return "nothing to fold here: folding works on forks (⑂ lines)"
		}
	}
	id := t.data.runs[r.run].run().ID
	t.folded[id] = !t.folded[id]
	t.invalidateForks()
	t.rows = t.data.flatten(t.folded)
	t.cursor = t.forkRow(r.run)
	t.clamp()
	return ""
}

// foldAll folds every fork, or unfolds them all when all are folded
// already; it says which it did.
func (t *treeScreen) foldAll() string {
	all := true
	for _, r := range t.data.runs[1:] {
		all = all && t.folded[r.run().ID]
	}
	for _, r := range t.data.runs[1:] {
		t.folded[r.run().ID] = !all
	}
	t.invalidateForks()
	t.refold()
	switch {
	case len(t.data.runs) == 1:
		return "this tree has no forks to fold"
	case all:
		return "unfolded every fork (Z again folds them all)"
	}
	return "folded every fork (Z again unfolds them all)"
}

// checkpoint moves to the next or previous pair-safe message in view order.
func (t *treeScreen) checkpoint(dir int) string {
	for i := t.cursor + dir; i >= 0 && i < len(t.rows); i += dir {
		r := t.rows[i]
		if r.kind == rowMessage && t.data.runs[r.run].bounds.Safe(int(r.msg)+1) {
			t.cursor = i
			t.clamp()
			return ""
		}
	}
	return "no more checkpoints that way"
}

// view renders the visible rows of the list region.
func (t *treeScreen) view(st *Styles) string {
	var b strings.Builder
	end := min(t.offset+t.height, len(t.rows))
	for i := t.offset; i < end; i++ {
		if i > t.offset {
			b.WriteByte('\n')
		}
		b.WriteString(t.renderRow(i, st))
	}
	return b.String()
}

func (t *treeScreen) renderRow(i int, st *Styles) string {
	r := t.rows[i]
	if i == t.cursor {
		t.renders++
		return st.CursorMark.Render("▌") + st.Selected.Render(fit(t.rowText(r, nil), t.width-1))
	}
	if s, ok := t.rowCache[r.key()]; ok {
		return s
	}
	t.renders++
	s := " " + t.rowText(r, st)
	// A running fork's spinner moves; a message not read yet is drawn
	// again when it is.
	if (r.kind != rowFork || t.data.runs[r.run].run().Status != model.Running) &&
		(r.kind != rowMessage || t.data.runs[r.run].loaded(int(r.msg))) {
		t.rowCache[r.key()] = s
	}
	return s
}

// rowText renders a row without the cursor column; st nil renders it plain.
func (t *treeScreen) rowText(r row, st *Styles) string {
	w := t.width - 1
	paint := func(s string, pick func(*Styles) string) string {
		if st == nil {
			return s
		}
		return pick(st)
	}
	rd := t.data.runs[r.run]
	switch r.kind {
	case rowFork:
		return fit(t.forkText(rd, int(r.depth), st), w)
	case rowMerge:
		return fit(t.mergeText(r, rd, st), w)
	}
	m := rd.message(int(r.msg))
	k := int(r.msg) + 1
	guides := strings.Repeat("│ ", min(int(r.depth), 8))
	kw := len(fmt.Sprint(rd.run().Len()))
	safe := rd.bounds.Safe(k)
	mark := "●"
	if !safe {
		mark = "·"
	}
	role := roleLabel(m.Role)
	tok := ""
	if u := m.Usage.Total(); u > 0 {
		tok = tokens(u)
	}
	snippet := messageSnippet(m)
	if !rd.loaded(int(r.msg)) {
		role, snippet = "", "…" // read as it comes on screen (bodies.go)
	}
	fixed := ansi.StringWidth(guides) + kw + 3 + 10 + 6
	snipW := max(w-fixed, 0)
	left := fmt.Sprintf("%s%*d %s ", guides, kw, k, mark)
	if st == nil {
		return fit(left+fit(role, 10)+fit(snippet, snipW)+fitRight(tok, 6), w)
	}
	body := st.role(m.Role).Render(fit(role, 10)) + fit(snippet, snipW)
	if t.finder.hit[r.key()] {
		body = st.role(m.Role).Render(fit(role, 10)) + highlight(fit(snippet, snipW), t.finder.query, st.Match)
	}
	if !safe {
		body = st.Unsafe.Render(fit(role, 10) + fit(snippet, snipW))
	}
	markStyled := paint(mark, func(s *Styles) string {
		if safe {
			return s.Checkpoint.Render(mark)
		}
		return s.Unsafe.Render(mark)
	})
	return fit(st.Fork.Render(guides)+st.Subtle.Render(fmt.Sprintf("%*d", kw, k))+" "+markStyled+" "+body+st.Tokens.Render(fitRight(tok, 6)), w)
}

// mergeText is a merge line: a fork merged into rd right before its
// message r.msg (the merge's prompt).
func (t *treeScreen) mergeText(r row, rd *runData, st *Styles) string {
	guides := strings.Repeat("│ ", min(int(r.depth), 8))
	pad := strings.Repeat(" ", len(fmt.Sprint(rd.run().Len())))
	name := "a fork no longer in this tree"
	if l, ok := t.data.mergeAt(r); ok {
		if fi, in := t.data.index[l.fork]; in {
			f := t.data.runs[fi].run()
			name = model.OneLine(f.Label(), 60)
			if f.Best {
				name = "★ " + name
			}
		}
	}
	const hint = "  → goes to it"
	if st == nil {
		return guides + pad + " ⇠ merged " + name + hint
	}
	return st.Fork.Render(guides+pad+" ⇠ merged ") + st.ForkName.Render(name) + st.Subtle.Render(hint)
}

// forkText is a fork header: fold state, name, status, size, cost, boundary.
func (t *treeScreen) forkText(rd *runData, depth int, st *Styles) string {
	run := rd.run()
	fold := "▾"
	if t.folded[run.ID] {
		fold = "▸"
	}
	guides := strings.Repeat("│ ", min(max(depth-1, 0), 8))
	parts := []string{plural(rd.n, "msg")}
	if u := run.Usage.Total(); u > 0 {
		parts = append(parts, tokens(u)+" tok")
	}
	if c := cost(run.CostUSD); c != "" {
		parts = append(parts, c)
	}
	if !rd.subagent {
		at := fmt.Sprintf("at K=%d", run.ForkAt)
		if run.SnapReason != "" {
			at += fmt.Sprintf(" (asked %s: %s)", run.Asked, run.SnapReason)
		}
		parts = append(parts, at)
	}
	if run.Handoff {
		parts = append(parts, "handoff")
	}
	if c := checkMark(run.Check); c != "" {
		parts = append(parts, c)
	}
	status := statusText(run, rd.openEnd)
	if run.Status == model.Running {
		status = spinFrames[t.spinFrame%len(spinFrames)] + " " + string(run.Status)
	}
	if run.Status == model.Failed && run.Error != "" {
		status += ": " + model.OneLine(run.Error, 60)
	}
	if note := t.notes[run.ID]; note != "" && run.Status == model.Running {
		status += ": " + model.OneLine(note, 90)
	}
	if live := t.streaming[run.ID]; live != "" && run.Status == model.Running {
		status += " “" + model.OneLine(lastRunes(live, 40), 40) + "”"
	}
	label := model.SafeText(run.Label())
	if run.Name == "" && rd.label != "" {
		// An agent's fork has no name: its first prompt says what it tried.
		label = rd.label
	}
	mark := "⑂ "
	if rd.subagent {
		mark = "⤷ "
		label = "subagent: " + model.OneLine(run.Title, 60)
	}
	if run.Best {
		label = "★ " + label
	}
	// A replay says so first: to which step, and how it went.
	if r, ok := t.data.replays[run.ID]; ok {
		label += " ↻ " + replayText(r)
	}
	// A folded fork says how many forks it hides.
	hides := ""
	if t.folded[run.ID] && rd.below > 0 {
		hides = " +" + plural(rd.below, "fork")
	}
	if run.Hidden {
		parts = append(parts, "hidden")
	}

	// Where the fork works: its own branch in a worktree, or in place.
	where := ""
	switch {
	case run.Worktree != "" && run.Branch != "":
		where = " ⎇ " + model.OneLine(run.Branch, 30)
	case run.Worktree != "":
		where = " ⎇ worktree"
	case run.InPlace:
		where = " ⌂ in place"
	case !run.OnThisMachine() && run.Branch != "":
		where = " ▣ " + model.OneLine(run.Place, 20) + " ⎇ " + model.OneLine(run.Branch, 30)
	case !run.OnThisMachine():
		where = " ▣ " + model.OneLine(run.Place, 20)
	}
	// Where it was merged, before the status: a long line keeps it.
	if m := t.data.mergedInto[run.ID]; len(m) > 0 {
		where += " " + mergedText(t.data, m)
	}
	if st == nil {
		return fmt.Sprintf("%s%s%s%s%s%s  %s · %s", guides, fold, mark, label, hides, where, status, strings.Join(parts, " · "))
	}
	return st.Fork.Render(guides+fold+mark) + st.ForkName.Render(label) + st.Fork.Render(hides+where) + "  " +
		st.status(run.Status).Render(status) + st.Subtle.Render(" · "+strings.Join(parts, " · "))
}

// checkMark is a fork's check result in a word or two, "" without one.
func checkMark(c *model.Check) string {
	switch {
	case c == nil:
		return ""
	case !c.Ran:
		return "check pending"
	case c.Error != "":
		return "check error"
	case c.Number && c.Score != nil:
		return fmt.Sprintf("score %g", *c.Score)
	case c.Exit == 0:
		return "check ✓"
	}
	return fmt.Sprintf("check ✗ exit %d", c.Exit)
}

// messageSnippet is the one-line summary of a message in the tree.
func messageSnippet(m *model.Message) string {
	var text, thinking string
	var calls []model.Part
	var result *model.Part
	for i := range m.Parts {
		p := &m.Parts[i]
		switch p.Kind {
		case model.Text:
			if text == "" {
				text = p.Text
			}
		case model.Thinking:
			if thinking == "" {
				thinking = p.Text
			}
		case model.ToolCall:
			calls = append(calls, *p)
		case model.ToolResult:
			if result == nil {
				result = p
			}
		}
	}
	switch {
	case len(calls) > 0:
		var names []string
		for _, c := range calls {
			if n := model.OneLine(c.ToolName, 30); !slices.Contains(names, n) && len(names) < 3 {
				names = append(names, n)
			}
		}
		s := "⚙ " + strings.Join(names, ", ")
		if len(calls) > 1 {
			s += fmt.Sprintf(" ×%d", len(calls))
		}
		switch {
		case text != "":
			s += " · " + model.OneLine(text, 160)
		case len(calls) == 1 && calls[0].ToolInput != "":
			s += " " + model.OneLine(calls[0].ToolInput, 160)
		}
		return s
	case result != nil:
		s := "↳ "
		if result.ToolName != "" {
			s += model.OneLine(result.ToolName, 30) + ": "
		}
		if result.IsError {
			s += "error: "
		}
		return s + model.OneLine(result.Text, 200)
	case text != "":
		return model.OneLine(text, 200)
	case thinking != "":
		return "(thinking) " + model.OneLine(thinking, 200)
	}
	for _, p := range m.Parts {
		return "[" + string(p.Kind) + "]"
	}
	return "(empty)"
}

// mergedText says where a fork was merged: "⇢ merged into parent at 7",
// the last of its merges, and how many there were.
func mergedText(t *treeData, merges []model.Merge) string {
	m := merges[len(merges)-1]
	into := model.ShortID(m.RunID)
	if ri, ok := t.index[m.RunID]; ok {
		into = model.OneLine(t.runs[ri].run().Label(), 40)
	}
	s := fmt.Sprintf("⇢ merged into %s at %d", into, m.At+1)
	if len(merges) > 1 {
		s += fmt.Sprintf(" (%d merges)", len(merges))
	}
	return s
}
