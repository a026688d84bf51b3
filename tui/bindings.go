package tui

import (
	"cmp"
	"slices"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// keyRun does what a key is for; msg is the key as pressed (which digit,
// which arrow).
type keyRun func(a *App, msg tea.KeyPressMsg) tea.Cmd

// binding is one key of a screen, said once: the keys it answers with the
// help that names them (key), what it does (run), and why it does nothing
// now (disabled, "" when it applies). The router, the footer and ? all
// read the same bindings, so a key cannot do one thing and be described
// as another, and a key that does not apply says why in the status line
// (as lazygit's Binding and k9s's KeyAction do).
type binding struct {
	key      key.Binding
	run      keyRun
	disabled func(a *App) string
	// footer is its place in the footer, 1 first; 0 leaves it to ?.
	// brief, when set, is how the footer names it (one "↑/↓" for a pair).
	footer int
	brief  *key.Help
}

// why is what pressing the key would say instead of doing it.
func (b *binding) why(a *App) string {
	if b.disabled == nil {
		return ""
	}
	return b.disabled(a)
}

// keyTable is the keys of whatever has them now: a screen, the detail
// pane, a field being typed in, a dialog, the help.
type keyTable struct {
	id    string // names it (the footer's cache, tests)
	intro string // what ? says it is for, after the keys
	keys  []binding
	// rest takes a key no binding answers: text for the field being typed
	// in, or closing the help. nil drops it.
	rest keyRun
	// restHelp names what rest does, when a person should know it ("any
	// key closes help"); the footer shows it before its last binding.
	restHelp *key.Help
}

// find is the binding that answers msg, nil for none.
func (kt *keyTable) find(msg tea.KeyPressMsg) *binding {
	for i := range kt.keys {
		if key.Matches(msg, kt.keys[i].key) {
			return &kt.keys[i]
		}
	}
	return nil
}

// handle runs the binding msg is for, or says why it does nothing now;
// a key no binding answers goes to rest.
func (kt *keyTable) handle(a *App, msg tea.KeyPressMsg) tea.Cmd {
	b := kt.find(msg)
	if b == nil {
		if kt.rest != nil {
			return kt.rest(a, msg)
		}
		return nil
	}
	if why := b.why(a); why != "" {
		return a.setStatus(why, levelWarn)
	}
	return b.run(a, msg)
}

// short is the footer's bindings, in their places.
func (kt *keyTable) short() []key.Binding {
	var in []*binding
	for i := range kt.keys {
		if kt.keys[i].footer > 0 {
			in = append(in, &kt.keys[i])
		}
	}
	slices.SortStableFunc(in, func(x, y *binding) int { return cmp.Compare(x.footer, y.footer) })
	out := make([]key.Binding, 0, len(in)+1)
	for _, b := range in {
		k := b.key
		if b.brief != nil {
			k.SetHelp(b.brief.Key, b.brief.Desc)
		}
		out = append(out, k)
	}
	if kt.restHelp != nil {
		rest := key.NewBinding(key.WithHelp(kt.restHelp.Key, kt.restHelp.Desc))
		out = slices.Insert(out, max(len(out)-1, 0), rest)
	}
	return out
}

// full is every binding, in the table's order, as ? lists them.
func (kt *keyTable) full() []key.Binding {
	out := make([]key.Binding, 0, len(kt.keys))
	for _, b := range kt.keys {
		out = append(out, b.key)
	}
	return out
}

// keysNow is the table of whatever has the keys now.
func (a *App) keysNow() *keyTable {
	switch {
	case a.quitting != nil && a.quitting.ended() != "":
		return &a.tables.quitEnded
	case a.quitting != nil:
		return &a.tables.quitForks
	case a.confirmQuit:
		return &a.tables.confirm
	case a.confirmApply != nil:
		return &a.tables.confirmApply
	case a.help.open:
		return &a.tables.help
	}
	return a.screenKeys()
}

// key routes a key to whatever has the keys now. What the status line
// said was of what was done before: the key's own answer, if any, takes
// its place.
func (a *App) key(msg tea.KeyPressMsg) tea.Cmd {
	kt := a.keysNow()
	a.confirmQuit = false // the question takes one key
	a.status.text = ""
	return kt.handle(a, msg)
}

// screenKeys is the table of what has the keys under the help: a
// dialog, the Replay panel, the diff, Compare, the tree's find line,
// its detail pane, the tree, or the library in its mode.
func (a *App) screenKeys() *keyTable {
	k := &a.tables
	t := a.tree
	switch {
	case a.dialog != nil:
		return &k.forkDialog[boolIndex(a.dialog.input(a.dialog.cur) != nil)]
	case a.turn != nil:
		return &k.turnDialog[boolIndex(a.turn.cur == turnMessage)]
	case a.merge != nil:
		return &k.mergeDialog
	case a.replay != nil && a.replay.started:
		return &k.replayTrials
	case a.replay != nil && a.replay.cur == replayBase:
		return &k.replayTyping
	case a.replay != nil:
		return &k.replayForm
	case a.screen == screenCompare && a.compare != nil && a.compare.diff != nil:
		return &k.diff
	case a.screen == screenCompare && a.compare != nil:
		return &k.compare
	case a.screen == screenTree && t != nil && t.finder.typing:
		return &k.find
	case a.screen == screenTree && t != nil && (t.detailOnly || t.detailFocus):
		return &k.detail
	case a.screen == screenTree && t != nil:
		return &k.tree
	}
	if a.lib.loaded && len(a.lib.trees) == 0 {
		return &k.libEmpty
	}
	switch a.lib.mode {
	case libFilter:
		return &k.libFilter
	case libSearch:
		return &k.libSearch
	case libHits:
		return &k.libHits
	}
	return &k.library
}

func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

// keyTables is every table, built once from the key map.
type keyTables struct {
	library, libEmpty                      keyTable
	libFilter, libSearch, libHits          keyTable
	tree, detail, find                     keyTable
	compare, diff                          keyTable
	replayForm, replayTyping, replayTrials keyTable
	// The Fork and next-turn dialogs', on a choice [0] and in a text field [1].
	forkDialog, turnDialog      [2]keyTable
	mergeDialog                 keyTable
	help, confirm, confirmApply keyTable
	// quitForks asks what becomes of running forks before quitting;
	// quitEnded, once they have all ended, whether to quit.
	quitForks, quitEnded keyTable
}

func newKeyTables(k KeyMap) keyTables {
	return keyTables{
		library:      libraryTable(k),
		libEmpty:     libraryEmptyTable(k),
		libFilter:    libInputTable(k, false),
		libSearch:    libInputTable(k, true),
		libHits:      libHitsTable(k),
		tree:         treeTable(k),
		detail:       detailTable(k),
		find:         findTable(k),
		compare:      compareTable(k),
		diff:         diffTable(k),
		replayForm:   replayFormTable(k, false),
		replayTyping: replayFormTable(k, true),
		replayTrials: replayTrialsTable(k),
		forkDialog:   [2]keyTable{dialogTable(k, false, false), dialogTable(k, false, true)},
		turnDialog:   [2]keyTable{dialogTable(k, true, false), dialogTable(k, true, true)},
		mergeDialog:  mergeTable(k),
		help:         helpTable(k),
		confirm:      confirmTable(),
		confirmApply: confirmApplyTable(),
		quitForks:    quitTable(k),
		quitEnded:    quitEndedTable(),
	}
}

// all lists every table, for tests that walk them.
func (k *keyTables) all() []*keyTable {
	return []*keyTable{&k.library, &k.libEmpty, &k.libFilter, &k.libSearch, &k.libHits, &k.tree, &k.detail, &k.find,
		&k.compare, &k.diff, &k.replayForm, &k.replayTyping, &k.replayTrials,
		&k.forkDialog[0], &k.forkDialog[1], &k.turnDialog[0], &k.turnDialog[1], &k.mergeDialog, &k.help, &k.confirm, &k.confirmApply, &k.quitForks, &k.quitEnded}
}

// do is a key's run that needs no more than the App.
func do(f func(a *App) tea.Cmd) keyRun {
	return func(a *App, _ tea.KeyPressMsg) tea.Cmd { return f(a) }
}

// at puts b at place n in the footer.
func (b binding) at(n int) binding {
	b.footer = n
	return b
}

// Keys every screen has, each as that screen says it.
func helpKey(b key.Binding) binding {
	return binding{key: b, run: do(func(a *App) tea.Cmd { a.openHelp(); return nil })}
}

// quitKey quits, asking first what becomes of the forks this program
// started when some still run (quit.go).
func quitKey(b key.Binding) binding {
	return binding{key: b, run: do((*App).quit)}
}

// helpLines lays the bindings out as "key  what it does", in as many
// columns as fit in width, each binding once.
func helpLines(bindings []key.Binding, width int, st *Styles) []string {
	type item struct{ k, d string }
	var items []item
	seen := map[item]bool{}
	kw, dw := 0, 0
	for _, b := range bindings {
		h := b.Help()
		it := item{h.Key, h.Desc}
		if !b.Enabled() || it.k == "" || seen[it] {
			continue
		}
		seen[it] = true
		items = append(items, it)
		kw, dw = max(kw, ansi.StringWidth(it.k)), max(dw, ansi.StringWidth(it.d))
	}
	colW := kw + 2 + dw + 3
	cols := max(min(width/max(colW, 1), 3), 1)
	rows := (len(items) + cols - 1) / cols
	var lines []string
	for r := 0; r < rows; r++ {
		var b strings.Builder
		for c := 0; c < cols; c++ {
			i := c*rows + r
			if i >= len(items) {
				break
			}
			cell := st.Key.Render(fitRight(items[i].k, kw)) + "  " + st.Subtle.Render(items[i].d)
			if cols > 1 {
				cell = fit(cell, colW)
			}
			b.WriteString(cell)
		}
		lines = append(lines, fit(b.String(), width))
	}
	return lines
}

// footerHelp is the footer's key hints in width cells: help and quit are
// always there (they are last in short); the others give way from the end.
func footerHelp(short []key.Binding, width int, st *Styles) string {
	part := func(b key.Binding) string {
		h := b.Help()
		return st.Key.Render(h.Key) + " " + st.Subtle.Render(h.Desc)
	}
	sep := st.Subtle.Render(" · ")
	var keep []string
	n := len(short)
	tail := []string{}
	// The last two (help, quit) stay; the rest are added while they fit.
	fixed := min(2, n)
	for _, b := range short[n-fixed:] {
		tail = append(tail, part(b))
	}
	used := ansi.StringWidth(strings.Join(tail, sep))
	for _, b := range short[:n-fixed] {
		p := part(b)
		if used+ansi.StringWidth(p)+ansi.StringWidth(sep) > width {
			break
		}
		keep = append(keep, p)
		used += ansi.StringWidth(p) + ansi.StringWidth(sep)
	}
	return fit(strings.Join(append(keep, tail...), sep), width)
}

// withHelp is b with other help text: the same keys, said for a context.
func withHelp(b key.Binding, keys, desc string) key.Binding {
	b.SetHelp(keys, desc)
	return b
}

// brief is a footer's way of naming a binding.
func brief(keys, desc string) *key.Help { return &key.Help{Key: keys, Desc: desc} }
