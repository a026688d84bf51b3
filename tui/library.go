package tui

import (
	"context"
	"fmt"
	"os"
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

	// filter narrows the list; query is the search being typed, its own
	// field, so that a search leaves the filter as it was.
	filter, query textinput.Model
	// mode is what the input line is for: browsing, filtering titles, or
	// searching message text.
	mode libMode

	empty emptyState

	// hits are the answer to the search for hitsFor, the latest answered.
	hits      []store.Hit
	moreHits  bool // the search found more than it shows
	hitsFor   string
	hitCursor int
	search    liveSearch
}

// liveSearch is the search of message text as it is typed: every change
// of the words stops the search running and starts one for the new words,
// in a command, never in Update; only the answer to the latest (gen) is
// taken. A search that stops early answers too, and is dropped the same.
type liveSearch struct {
	gen     int
	cancel  context.CancelFunc
	pending string // the words being searched; "" when none are
}

// stop drops the search running, if any: it is cancelled, and its answer
// will not be taken.
func (s *liveSearch) stop() {
	if s.cancel != nil {
		s.cancel()
	}
	s.gen++
	s.cancel, s.pending = nil, ""
}

// searchWords is what the search line asks for.
func (l *libraryScreen) searchWords() string { return strings.TrimSpace(l.query.Value()) }

// showsHits says the list is search hits: a search's, or the one being typed.
func (l *libraryScreen) showsHits() bool {
	return l.mode == libHits || l.mode == libSearch && l.searchWords() != ""
}

type libMode int

const (
	libBrowse libMode = iota
	libFilter
	libSearch
	libHits
)

func newLibraryScreen() libraryScreen {
	return libraryScreen{filter: newInput("type to filter by title, project, harness"),
		query: newInput("words to find in messages (found as you type)")}
}

// input is the field being typed in: the search's or the filter's.
func (l *libraryScreen) input() *textinput.Model {
	if l.mode == libSearch {
		return &l.query
	}
	return &l.filter
}

// typed gives msg (a key, a paste, a cursor's blink) to the field being
// typed in; the filter narrows the list as it is typed.
func (l *libraryScreen) typed(msg tea.Msg) tea.Cmd {
	in := l.input()
	var cmd tea.Cmd
	*in, cmd = in.Update(msg)
	if l.mode == libFilter {
		l.refilter()
	}
	return cmd
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
		retired := t.Root.Hidden && strings.HasPrefix(t.Root.Source, store.RetiredPrefix) && t.Runs == 1
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
	if l.showsHits() {
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

// browse moves the list's cursor by a navigation key, off the headers of
// unfolded projects; it reports whether msg was one.
func (l *libraryScreen) browse(msg tea.KeyPressMsg, k NavKeys) bool {
	before := l.cursor
	if !l.move(msg, k, len(l.rows)) {
		return false
	}
	dir := 1
	if l.cursor < before || key.Matches(msg, k.Top) {
		dir = -1
	}
	l.skipHeaders(dir)
	return true
}

// moveHit moves the cursor through the search hits.
func (l *libraryScreen) moveHit(msg tea.KeyPressMsg, k NavKeys) {
	switch {
	case key.Matches(msg, k.Up):
		l.hitCursor--
	case key.Matches(msg, k.Down):
		l.hitCursor++
	case key.Matches(msg, k.PageUp):
		l.hitCursor -= max(l.height, 1)
	case key.Matches(msg, k.PageDown):
		l.hitCursor += max(l.height, 1)
	case key.Matches(msg, k.Top):
		l.hitCursor = 0
	case key.Matches(msg, k.Bottom):
		l.hitCursor = len(l.hits) - 1
	}
	l.clamp()
}

func (l *libraryScreen) startInput(m libMode) tea.Cmd {
	l.mode = m
	if m == libSearch {
		l.search.stop()
		l.query.SetValue("")
		l.hits, l.hitsFor, l.moreHits, l.hitCursor = nil, "", false, 0
	}
	return l.input().Focus()
}

// The library's keys: browsing, typing a filter or a search, and the
// search hits. Each leaves the list laid out for its mode.

const libraryIntro = "Library: every conversation tree, grouped by project, newest first. / filters by title, project or harness; s searches the text of every message; i imports this machine's agent sessions (only what changed)."

func libraryTable(k KeyMap) keyTable {
	l, g := k.Library, k.Global
	move := libKey(func(a *App, msg tea.KeyPressMsg) tea.Cmd { a.lib.browse(msg, l.NavKeys); return nil })
	return keyTable{id: "lib", intro: libraryIntro, keys: []binding{
		{key: l.Up, run: move}, {key: l.Down, run: move}, {key: l.PageUp, run: move},
		{key: l.PageDown, run: move}, {key: l.Top, run: move}, {key: l.Bottom, run: move},
		{key: l.Open, run: libKey(libOpen), disabled: libOpenOff, footer: 1},
		{key: l.Filter, run: libKey(func(a *App, _ tea.KeyPressMsg) tea.Cmd { return a.lib.startInput(libFilter) }), footer: 2},
		{key: l.Search, run: libKey(func(a *App, _ tea.KeyPressMsg) tea.Cmd { return a.lib.startInput(libSearch) }), footer: 3},
		{key: l.ClearFilter, run: libKey(func(a *App, _ tea.KeyPressMsg) tea.Cmd {
			if a.lib.filter.Value() != "" {
				a.lib.filter.SetValue("")
				a.lib.refilter()
			}
			return nil
		})},
		{key: l.Refresh, run: do((*App).loadTrees), footer: 6},
		{key: l.Import, run: do((*App).startImport), footer: 4},
		{key: l.FoldProject, run: libKey(func(a *App, _ tea.KeyPressMsg) tea.Cmd {
			if len(a.lib.rows) > 0 {
				a.lib.toggleProject(a.lib.rows[a.lib.cursor].project)
			}
			return nil
		}), footer: 5},
		helpKey(g.Help).at(7), quitKey(g.Quit).at(8), quitKey(g.ForceQuit),
	}}
}

// libraryEmptyTable is the library's while it holds no tree: only the
// keys that act on something; any other says how to get some.
func libraryEmptyTable(k KeyMap) keyTable {
	l, g := k.Library, k.Global
	return keyTable{id: "lib-empty",
		intro: "The library is empty: i imports the agent sessions in the folders the library lists, or tine import PATH a file or folder; tine demo shows demo data.",
		keys: []binding{
			{key: l.Import, run: do((*App).startImport), footer: 1},
			{key: l.Refresh, run: do((*App).loadTrees), footer: 2},
			helpKey(g.Help).at(3), quitKey(g.Quit).at(4), quitKey(g.ForceQuit),
		},
		rest: func(a *App, msg tea.KeyPressMsg) tea.Cmd {
			if key.Matches(msg, l.Open, l.Filter, l.Search, l.FoldProject, l.Up, l.Down) {
				return a.setStatus("the library is empty: i imports this machine's agent sessions (or tine import PATH)", levelWarn)
			}
			return nil
		},
	}
}

// libKey is a library key's run, which leaves the list laid out for what
// it changed (the input line comes and goes with the mode).
func libKey(f keyRun) keyRun {
	return func(a *App, msg tea.KeyPressMsg) tea.Cmd {
		cmd := f(a, msg)
		a.layoutLibrary()
		return cmd
	}
}

// libOpen opens the tree under the cursor, or folds the project whose
// header it is on.
func libOpen(a *App, _ tea.KeyPressMsg) tea.Cmd {
	if t, ok := a.lib.selected(); ok {
		a.loading = "opening…"
		return a.loadTree(t.Root.ID, "", 0)
	}
	a.lib.toggleProject(a.lib.rows[a.lib.cursor].project)
	return nil
}

func libOpenOff(a *App) string {
	if a.lib.cursor >= len(a.lib.rows) {
		return "nothing to open: the list is empty"
	}
	return ""
}

// libInputTable is the library's while a filter (or, search set, a
// search) is typed: keys are text but for these.
func libInputTable(k KeyMap, search bool) keyTable {
	l, g := k.Library, k.Global
	id, apply := "lib-filter", l.Apply
	if search {
		id, apply = "lib-search", withHelp(l.Apply, "enter", "to the hits")
	}
	move := libKey(func(a *App, msg tea.KeyPressMsg) tea.Cmd {
		if a.lib.showsHits() {
			a.lib.moveHit(msg, l.InputNav)
		} else {
			a.lib.browse(msg, l.InputNav)
		}
		return nil
	})
	return keyTable{id: id,
		intro: "Typing a filter or a search: keys go to the text (f1 is help, ctrl+c quits); ↑/↓ still move the list. A search runs as you type, newest messages first.",
		keys: []binding{
			{key: apply, run: libKey(libApply), footer: 1},
			{key: l.CancelInput, run: libKey(func(a *App, _ tea.KeyPressMsg) tea.Cmd {
				a.lib.input().Blur()
				switch a.lib.mode {
				case libFilter:
					a.lib.filter.SetValue("")
					a.lib.refilter()
				case libSearch:
					a.lib.search.stop()
				}
				a.lib.mode = libBrowse
				return nil
			}), footer: 3},
			{key: l.InputNav.Up, run: move}, {key: l.InputNav.Down, run: move, footer: 2, brief: brief("↑/↓", "move")},
			{key: l.InputNav.PageUp, run: move}, {key: l.InputNav.PageDown, run: move},
			helpKey(g.HelpTyping).at(4), quitKey(g.ForceQuit).at(5),
		},
		rest: libKey(func(a *App, msg tea.KeyPressMsg) tea.Cmd { return a.typed(msg) }),
	}
}

// libApply ends the typing: a filter stays applied; a search's hits
// take the keys (its answer, when it is still running, arrives there).
func libApply(a *App, _ tea.KeyPressMsg) tea.Cmd {
	l := &a.lib
	l.input().Blur()
	if l.mode != libSearch {
		l.mode = libBrowse
		return nil
	}
	q := l.searchWords()
	l.query.SetValue("")
	if q == "" {
		l.search.stop()
		l.mode = libBrowse
		return nil
	}
	l.mode = libHits
	if q != l.hitsFor && q != l.search.pending {
		return a.search(q) // not asked for yet, or it failed
	}
	return nil
}

func libHitsTable(k KeyMap) keyTable {
	l, g := k.Library, k.Global
	move := libKey(func(a *App, msg tea.KeyPressMsg) tea.Cmd { a.lib.moveHit(msg, l.NavKeys); return nil })
	return keyTable{id: "lib-hits",
		intro: "Search hits: every message whose text matched, newest first; enter opens its tree on that message.",
		keys: []binding{
			{key: l.Up, run: move}, {key: l.Down, run: move, footer: 2}, {key: l.Top, run: move}, {key: l.Bottom, run: move},
			{key: l.PageUp, run: move}, {key: l.PageDown, run: move},
			{key: withHelp(l.Open, "enter", "open at the hit"), run: libKey(func(a *App, _ tea.KeyPressMsg) tea.Cmd {
				h := a.lib.hits[a.lib.hitCursor]
				a.loading = "opening…"
				return a.loadTree(h.TreeID, h.RunID, h.Seq)
			}), disabled: func(a *App) string {
				if a.lib.hitCursor >= len(a.lib.hits) {
					return "no message matched: s searches again"
				}
				return ""
			}, footer: 1},
			{key: withHelp(l.Search, "s", "search again"), run: libKey(func(a *App, _ tea.KeyPressMsg) tea.Cmd { return a.lib.startInput(libSearch) }),
				footer: 3, brief: brief("s", "search messages")},
			{key: withHelp(l.ClearFilter, "esc", "back to the list"), run: libKey(func(a *App, _ tea.KeyPressMsg) tea.Cmd {
				a.lib.search.stop()
				a.lib.mode = libBrowse
				return nil
			}),
				footer: 4, brief: brief("esc", "back")},
			helpKey(g.Help).at(5), quitKey(g.Quit).at(6), quitKey(g.ForceQuit),
		},
	}
}

// showsInput reports whether inputLine has anything to show.
func (l *libraryScreen) showsInput() bool { return l.mode != libBrowse || l.filter.Value() != "" }

// inputLine is the filter or search prompt, or the active filter.
func (l *libraryScreen) inputLine(st *Styles) string {
	switch l.mode {
	case libFilter:
		return st.Key.Render("filter: ") + l.filter.View()
	case libSearch:
		line := st.Key.Render("search: ") + l.query.View()
		if f := l.found(); f != "" && l.searchWords() != "" {
			line += st.Subtle.Render("  " + f)
		}
		return line
	case libHits:
		words := l.hitsFor
		if l.search.pending != "" {
			words = l.search.pending
		}
		return st.Key.Render("search: ") + model.OneLine(words, 0) + st.Subtle.Render("  "+l.found()+" · esc back")
	}
	if v := l.filter.Value(); v != "" {
		return st.Key.Render("filter: ") + model.SafeText(v) + st.Subtle.Render(fmt.Sprintf("  %d of %d · esc clears", l.matched, len(l.trees)))
	}
	return ""
}

// found says what the search hits are: how many, whether more match, or
// that the words typed last are still being searched.
func (l *libraryScreen) found() string {
	switch {
	case l.search.pending != "":
		return "searching…"
	case l.hitsFor == "":
		return ""
	case l.moreHits:
		return fmt.Sprintf("the newest %d messages of more", len(l.hits))
	}
	return plural(len(l.hits), "message") + " found"
}

// view renders the list (or the search hits) into width x height.
func (l *libraryScreen) view(st *Styles, now time.Time) string {
	if !l.loaded {
		return st.Subtle.Render("loading…")
	}
	if len(l.trees) == 0 {
		return l.empty.view(st, l.width)
	}
	if l.showsHits() {
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
		switch {
		case l.search.pending != "" || l.hitsFor == "":
			return st.Subtle.Render("searching…")
		case l.mode == libSearch:
			return st.Subtle.Render("no message holds these words")
		}
		return st.Subtle.Render("no message matches; s searches again, esc goes back")
	}
	var b strings.Builder
	h := max(l.height+1, 1) // hits have no column header
	start := min(max(l.hitCursor-h+1, 0), max(len(l.hits)-h, 0))
	for i := start; i < min(start+h, len(l.hits)); i++ {
		hit := l.hits[i]
		line := fmt.Sprintf("%-9s %s  %s", hit.Role, model.OneLine(hit.Snippet, 200), "— "+model.OneLine(hit.Title, 40))
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
	// looked is where discovery looked, err why it could not look.
	looked []lookedIn
	err    error
	// agents say whose sessions an import looks for.
	agents []harness.Agent
	// made is the database's path when it was made just now.
	made string
}

func (e emptyState) view(st *Styles, width int) string {
	lines := []string{st.Title.Render("No conversations yet.")}
	if e.made != "" {
		lines = append(lines, st.Subtle.Render(wrap("This database is new: there was none at "+e.made+", so tine made it. A mistyped --db or TINE_DB? Quit (q) and start again with the right one.", width)))
	}
	lines = append(lines, "")
	switch {
	case e.progress != nil:
		lines = append(lines, "Importing…", progressLine(*e.progress, width, st))
	case len(e.found) > 0:
		lines = append(lines, "Found "+foundSummary(e.found, e.agents)+" on this machine.",
			"  "+st.Key.Render("i")+" imports them all (later imports read only what changed).")
	case e.err != nil:
		lines = append(lines, st.Error.Render(wrap("Could not look for sessions: "+errorText(e.err), width)),
			"  "+st.Key.Render("i")+" looks again and imports what it finds.")
	case len(e.looked) > 0:
		lines = append(lines, wrap("No agent sessions are on this machine; tine looked in:", width))
		nameW := 0
		for _, l := range e.looked {
			nameW = max(nameW, ansi.StringWidth(l.agent))
		}
		for _, l := range e.looked {
			var dirs []string
			for _, d := range l.dirs {
				dirs = append(dirs, homeShort(d))
			}
			lines = append(lines, "  "+fit(l.agent, nameW)+"  "+st.Subtle.Render(strings.Join(dirs, " or ")))
		}
		lines = append(lines, "  "+st.Key.Render("i")+" looks there again and imports what it finds;",
			"  "+st.Key.Render("tine import PATH")+" imports a file or folder (openai chat format too).")
	default:
		lines = append(lines, "Import a transcript to see it as a tree:",
			"  "+st.Key.Render("i")+"                           this machine's agent sessions",
			"  "+st.Key.Render("tine import chat.json")+"       a file or folder (openai chat format too)",
			wrap("tine reads the sessions of "+sessionsOf(e.agents)+".", width))
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

// libraryColumns: the agent column holds the longest harness name
// ("anthropic", "opencode") after its space.
func libraryColumns(width int) libColumns {
	w := width - 3 // cursor column and the indent under a project
	c := libColumns{agent: 10, age: 5, msgs: 7, forks: 6, spent: 8}
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
