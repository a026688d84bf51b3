package tui

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"tine/harness"
	"tine/harness/importer"
	"tine/model"
	"tine/store"
)

// libraryScreen lists every tree, newest first, with a filter and a
// full-text search over message text.
type libraryScreen struct {
	trees  []store.TreeSummary
	loaded bool
	// rows are what the list shows: a header per project, then its trees
	// that pass the filter (unless the project is folded).
	rows      []libRow
	matched   int // trees that pass the filter
	collapsed map[string]bool

	// nav.height counts list rows, below the column header.
	nav
	width int

	filter textinput.Model
	// mode is what the input line is for: browsing, filtering titles, or
	// searching message text.
	mode libMode

	empty emptyState

	hits      []store.Hit
	moreHits  bool // the search found more than it shows
	hitsFor   string
	hitCursor int
}

type libMode int

const (
	libBrowse libMode = iota
	libFilter
	libSearch
	libHits
)

func newLibraryScreen() libraryScreen {
	return libraryScreen{filter: newInput("type to filter")}
}

// setTrees replaces the list, keeping the cursor on the same tree.
func (l *libraryScreen) setTrees(trees []store.TreeSummary) {
	var keep string
	if t, ok := l.selected(); ok {
		keep = t.Root.ID
	}
	// A subagent's run shows under the call that started it, not here.
	l.trees = l.trees[:0]
	for _, t := range trees {
		// Runs of a file that was rewritten stay stored for the forks made
		// from them; alone, they would only repeat the file's new import.
		retired := t.Root.Hidden && strings.HasPrefix(t.Root.Source, store.RetiredPrefix) && t.Forks == 0
		if t.Root.SpawnedBy == "" && !retired {
			l.trees = append(l.trees, t)
		}
	}
	l.loaded = true
	l.refilter()
	l.cursor = 0
	for i, r := range l.rows {
		if r.tree >= 0 && (l.trees[r.tree].Root.ID == keep || (keep == "" && l.cursor == 0)) {
			l.cursor = i // the kept tree, else the first tree
		}
	}
	l.clamp()
}

func (l *libraryScreen) selected() (store.TreeSummary, bool) {
	if l.cursor < 0 || l.cursor >= len(l.rows) || l.rows[l.cursor].tree < 0 {
		return store.TreeSummary{}, false
	}
	return l.trees[l.rows[l.cursor].tree], true
}

// libRow is a line of the library: a project header (tree -1) or a tree.
type libRow struct {
	tree    int
	project string
	count   int // trees under a header
}

// projectOf is the group a tree belongs to: its working folder.
func projectOf(t store.TreeSummary) string { return t.Cwd }

// refilter keeps the trees whose title, project, harness or id hold every
// word of the filter, case-insensitively, grouped by project: projects in
// order of their newest tree, trees newest first within each.
func (l *libraryScreen) refilter() {
	words := strings.Fields(strings.ToLower(l.filter.Value()))
	var order []string
	groups := map[string][]int{}
	l.matched = 0
	for i, t := range l.trees {
		hay := strings.ToLower(strings.Join([]string{t.Title, t.Cwd, t.Harness, t.Root.ID, t.Root.Name}, " "))
		ok := true
		for _, w := range words {
			if !strings.Contains(hay, w) {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		l.matched++
		p := projectOf(t)
		if _, seen := groups[p]; !seen {
			order = append(order, p)
		}
		groups[p] = append(groups[p], i)
	}
	l.rows = l.rows[:0]
	for _, p := range order {
		l.rows = append(l.rows, libRow{tree: -1, project: p, count: len(groups[p])})
		if l.collapsed[p] {
			continue
		}
		for _, ti := range groups[p] {
			l.rows = append(l.rows, libRow{tree: ti, project: p})
		}
	}
	l.clamp()
}

func (l *libraryScreen) clamp() {
	if l.mode == libHits {
		l.hitCursor = min(max(l.hitCursor, 0), max(len(l.hits)-1, 0))
		return
	}
	l.nav.clamp(len(l.rows))
}

// skipHeaders moves the cursor off an unfolded project's header, in
// direction dir (or back, at an end): its trees are right there. A folded
// project's header stays reachable, to unfold it.
func (l *libraryScreen) skipHeaders(dir int) {
	onOpenHeader := func(i int) bool { return l.rows[i].tree < 0 && !l.collapsed[l.rows[i].project] }
	for _, d := range []int{dir, -dir} {
		i := l.cursor
		for i >= 0 && i < len(l.rows) && onOpenHeader(i) {
			i += d
		}
		if i >= 0 && i < len(l.rows) {
			l.cursor = i
			l.clamp()
			return
		}
	}
}

// toggleProject folds or unfolds a project, keeping the cursor on it.
func (l *libraryScreen) toggleProject(p string) {
	if l.collapsed == nil {
		l.collapsed = map[string]bool{}
	}
	l.collapsed[p] = !l.collapsed[p]
	l.refilter()
	for i, r := range l.rows {
		if r.project == p && (r.tree < 0 && l.collapsed[p] || r.tree >= 0 && !l.collapsed[p]) {
			l.cursor = i
			break
		}
	}
	l.clamp()
}

// setSize gives the screen its region: a column header, then rows.
func (l *libraryScreen) setSize(w, h int) {
	l.width, l.height = w, max(h-1, 1)
	l.clamp()
}

// libAction is what a library key asks the app to do.
type libAction struct {
	open     string // tree to open
	focusRun string // run to put the cursor in, with focusSeq
	focusSeq int
	search   string // message-text query to run
	status   string
	cmd      tea.Cmd
}

func (l *libraryScreen) update(msg tea.KeyPressMsg, keys LibraryKeys) libAction {
	switch l.mode {
	case libFilter, libSearch:
		switch {
		case key.Matches(msg, keys.CancelInput):
			if l.mode == libFilter {
				l.filter.SetValue("")
				l.refilter()
			}
			l.mode = libBrowse
			l.filter.Blur()
			return libAction{}
		case key.Matches(msg, keys.Apply):
			l.filter.Blur()
			if l.mode == libSearch {
				q := strings.TrimSpace(l.filter.Value())
				l.mode = libBrowse
				l.filter.SetValue("")
				if q == "" {
					return libAction{}
				}
				return libAction{search: q, status: "searching…"}
			}
			l.mode = libBrowse
			return libAction{}
		case slices.Contains([]string{"up", "down", "pgup", "pgdown"}, msg.String()):
			// Let the list move while typing a filter (the arrows only:
			// k, j and the ctrl keys are the text's).
		default:
			var cmd tea.Cmd
			l.filter, cmd = l.filter.Update(msg)
			if l.mode == libFilter {
				l.refilter()
			}
			return libAction{cmd: cmd}
		}
	case libHits:
		switch {
		case key.Matches(msg, keys.ClearFilter):
			l.mode = libBrowse
			return libAction{}
		case key.Matches(msg, keys.Up):
			l.hitCursor--
		case key.Matches(msg, keys.Down):
			l.hitCursor++
		case key.Matches(msg, keys.Top):
			l.hitCursor = 0
		case key.Matches(msg, keys.Bottom):
			l.hitCursor = len(l.hits) - 1
		case key.Matches(msg, keys.Open):
			if l.hitCursor < len(l.hits) {
				h := l.hits[l.hitCursor]
				return libAction{open: h.TreeID, focusRun: h.RunID, focusSeq: h.Seq}
			}
		case key.Matches(msg, keys.Search):
			return l.startInput(libSearch)
		}
		l.clamp()
		return libAction{}
	}
	before := l.cursor
	if l.move(msg, keys.NavKeys, len(l.rows)) {
		dir := 1
		if l.cursor < before || key.Matches(msg, keys.Top) {
			dir = -1
		}
		l.skipHeaders(dir)
		return libAction{}
	}
	if key.Matches(msg, keys.FoldProject) {
		if len(l.rows) > 0 {
			l.toggleProject(l.rows[l.cursor].project)
		}
		return libAction{}
	}
	switch {
	case key.Matches(msg, keys.Open):
		if t, ok := l.selected(); ok {
			return libAction{open: t.Root.ID}
		}
		if l.cursor < len(l.rows) {
			l.toggleProject(l.rows[l.cursor].project)
			return libAction{}
		}
		return libAction{status: "nothing to open: the list is empty"}
	case key.Matches(msg, keys.Filter):
		return l.startInput(libFilter)
	case key.Matches(msg, keys.Search):
		return l.startInput(libSearch)
	case key.Matches(msg, keys.ClearFilter):
		if l.filter.Value() != "" {
			l.filter.SetValue("")
			l.refilter()
		}
	}
	l.clamp()
	return libAction{}
}

func (l *libraryScreen) startInput(m libMode) libAction {
	l.mode = m
	if m == libSearch {
		l.filter.SetValue("")
		l.filter.Placeholder = "words to find in messages, enter to search"
	} else {
		l.filter.Placeholder = "type to filter by title, project, harness"
	}
	return libAction{cmd: l.filter.Focus()}
}

// showsInput reports whether inputLine has anything to show.
func (l *libraryScreen) showsInput() bool { return l.mode != libBrowse || l.filter.Value() != "" }

// inputLine is the filter or search prompt, or the active filter.
func (l *libraryScreen) inputLine(st *Styles) string {
	switch l.mode {
	case libFilter:
		return st.Key.Render("filter: ") + l.filter.View()
	case libSearch:
		return st.Key.Render("search: ") + l.filter.View()
	case libHits:
		found := plural(len(l.hits), "message") + " found"
		if l.moreHits {
			found = fmt.Sprintf("the best %d messages of more", len(l.hits))
		}
		return st.Key.Render("search: ") + model.SafeText(l.hitsFor) + st.Subtle.Render("  "+found+" · esc back")
	}
	if v := l.filter.Value(); v != "" {
		return st.Key.Render("filter: ") + model.SafeText(v) + st.Subtle.Render(fmt.Sprintf("  %d of %d · esc clears", l.matched, len(l.trees)))
	}
	return ""
}

// view renders the list (or the search hits) into width x height.
func (l *libraryScreen) view(st *Styles, now time.Time) string {
	if !l.loaded {
		return st.Subtle.Render("loading…")
	}
	if len(l.trees) == 0 {
		return l.empty.view(st, l.width)
	}
	if l.mode == libHits {
		return l.hitsView(st)
	}
	cols := libraryColumns(l.width)
	var b strings.Builder
	b.WriteString(st.Header.Render(cols.header()))
	if len(l.rows) == 0 {
		b.WriteString("\n" + st.Subtle.Render("no tree matches the filter; esc clears it"))
		return b.String()
	}
	end := min(l.offset+l.height, len(l.rows))
	for i := l.offset; i < end; i++ {
		r := l.rows[i]
		var line string
		if r.tree < 0 {
			fold := "▾"
			if l.collapsed[r.project] {
				fold = "▸"
			}
			line = fold + " " + projectLabel(r.project) + st.Subtle.Render(fmt.Sprintf("  %s", plural(r.count, "tree")))
			if i != l.cursor {
				line = st.Header.Render(fold+" "+projectLabel(r.project)) + st.Subtle.Render(fmt.Sprintf("  %s", plural(r.count, "tree")))
			}
		} else {
			line = "  " + cols.row(l.trees[r.tree], now)
		}
		b.WriteByte('\n')
		if i == l.cursor {
			b.WriteString(st.CursorMark.Render("▌") + st.Selected.Render(fit(ansi.Strip(line), l.width-1)))
		} else {
			b.WriteString(" " + line)
		}
	}
	return b.String()
}

// projectLabel shows a project folder with ~ for the home folder.
func projectLabel(p string) string {
	if p == "" {
		return "(no project)"
	}
	if home, err := os.UserHomeDir(); err == nil && home != "/" && strings.HasPrefix(p, home) {
		p = "~" + strings.TrimPrefix(p, home)
	}
	return model.OneLine(p, 0)
}

func (l *libraryScreen) hitsView(st *Styles) string {
	if len(l.hits) == 0 {
		return st.Subtle.Render("no message matches; s searches again, esc goes back")
	}
	var b strings.Builder
	h := max(l.height+1, 1) // hits have no column header
	start := min(max(l.hitCursor-h+1, 0), max(len(l.hits)-h, 0))
	for i := start; i < min(start+h, len(l.hits)); i++ {
		hit := l.hits[i]
		title := ""
		for _, t := range l.trees {
			if t.Root.ID == hit.TreeID {
				title = t.Title
			}
		}
		line := fmt.Sprintf("%-9s %s  %s", hit.Role, model.OneLine(hit.Snippet, 200), "— "+model.OneLine(title, 40))
		if i > start {
			b.WriteByte('\n')
		}
		if i == l.hitCursor {
			b.WriteString(st.CursorMark.Render("▌") + st.Selected.Render(fit(line, l.width-1)))
		} else {
			b.WriteString(" " + line)
		}
	}
	return b.String()
}

// sessionsOf names the agents whose sessions an import finds on its own
// ("Claude Code, Codex and pi").
func sessionsOf(agents []harness.Agent) string {
	var names []string
	for _, a := range agents {
		if a.Sessions != nil && a.Sessions.Dirs != nil {
			names = append(names, a.Display)
		}
	}
	if len(names) == 0 {
		return "agent"
	}
	return model.List(names)
}

// emptyState is what the library says before anything is imported.
type emptyState struct {
	found    []importer.Found
	progress *importer.Progress
	// agents say whose sessions an import looks for.
	agents []harness.Agent
}

func (e emptyState) view(st *Styles, width int) string {
	lines := []string{st.Title.Render("No conversations yet."), ""}
	switch {
	case e.progress != nil:
		lines = append(lines, "Importing…", progressLine(*e.progress, width, st))
	case len(e.found) > 0:
		lines = append(lines, "Found "+foundSummary(e.found, e.agents)+" on this machine.",
			"  "+st.Key.Render("i")+" imports them all (later imports read only what changed).")
	default:
		lines = append(lines, "Import a transcript to see it as a tree:",
			"  "+st.Key.Render("tine import")+"                 every "+sessionsOf(e.agents)+" session here",
			"  "+st.Key.Render("tine import chat.json")+"       a file or folder (openai chat format too)")
	}
	lines = append(lines, "", "Or look around with demo data first:", "  "+st.Key.Render("tine demo"), "",
		st.Subtle.Render("Press ? for keys, q to quit."))
	return strings.Join(lines, "\n")
}

// libColumns decides which columns fit a width.
type libColumns struct {
	title                          int
	agent, age, msgs, forks, spent int
}

func libraryColumns(width int) libColumns {
	w := width - 3 // cursor column and the indent under a project
	c := libColumns{agent: 8, age: 5, msgs: 7, forks: 6, spent: 8}
	if w < 70 {
		c.agent, c.spent = 0, 0
	}
	if w < 50 {
		c.forks = 0
	}
	c.title = max(w-c.agent-c.age-c.msgs-c.forks-c.spent, 1)
	return c
}

func (c libColumns) header() string {
	return "   " + c.cells("TREE", "AGENT", "AGE", "MSGS", "FORKS", "COST")
}

func (c libColumns) row(t store.TreeSummary, now time.Time) string {
	title := t.Title
	if title == "" {
		title = "(untitled " + model.ShortID(t.Root.ID) + ")"
	}
	forks := ""
	if t.Forks > 0 {
		forks = fmt.Sprintf("⑂%d", t.Forks)
	}
	return c.cells(model.OneLine(title, 0), model.OneLine(t.Harness, 20),
		age(t.LastActivity, now), fmt.Sprint(t.Messages), forks, cost(t.CostUSD))
}

func (c libColumns) cells(title, agent, ago, msgs, forks, spent string) string {
	s := fit(title, c.title)
	if c.agent > 0 {
		s += fit(" "+agent, c.agent)
	}
	s += fitRight(ago, c.age)
	s += fitRight(msgs, c.msgs)
	if c.forks > 0 {
		s += fitRight(forks, c.forks)
	}
	if c.spent > 0 {
		s += fitRight(spent, c.spent)
	}
	return s
}
