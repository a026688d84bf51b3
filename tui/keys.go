package tui

import "charm.land/bubbles/v2/key"

// KeyMap is every key tine answers, grouped by screen. Each key is defined
// here once, with its help text; the footers and ? read these bindings.
type KeyMap struct {
	Global  GlobalKeys
	Library LibraryKeys
	Tree    TreeKeys
	Compare CompareKeys
	Diff    DiffKeys
	Dialog  DialogKeys
}

// GlobalKeys work on every screen.
type GlobalKeys struct {
	Help, Quit, ForceQuit, Back key.Binding
}

// LibraryKeys are the library screen's.
type LibraryKeys struct {
	NavKeys
	Open, Filter, Search, ClearFilter key.Binding
	Refresh, Import, FoldProject      key.Binding
}

// TreeKeys are the tree screen's.
type TreeKeys struct {
	NavKeys
	Into, Out, NextSibling, PrevSibling key.Binding
	Fold, FoldAll, Focus, Detail        key.Binding
	NextCheckpoint, PrevCheckpoint      key.Binding
	Fork, Cancel, Compare               key.Binding
	Retry, NextTurn                     key.Binding
}

// CompareKeys are the Compare screen's; its NavKeys scroll every column.
type CompareKeys struct {
	NavKeys
	Next, Prev, Best, Open, Diff key.Binding
}

// DiffKeys are the full-screen diff's.
type DiffKeys struct {
	NavKeys
}

// DialogKeys are the Fork and next-turn dialogs'.
type DialogKeys struct {
	NextField, PrevField, Change, Launch, Cancel key.Binding
}

// DefaultKeyMap returns tine's keys.
func DefaultKeyMap() KeyMap {
	b := func(help, desc string, keys ...string) key.Binding {
		return key.NewBinding(key.WithKeys(keys...), key.WithHelp(help, desc))
	}
	navKeys := NavKeys{
		Up:       b("↑/k", "up", "up", "k"),
		Down:     b("↓/j", "down", "down", "j"),
		PageUp:   b("pgup", "page up", "pgup", "ctrl+b", "ctrl+u"),
		PageDown: b("pgdn", "page down", "pgdown", "ctrl+f", "ctrl+d"),
		Top:      b("g", "top", "g", "home"),
		Bottom:   b("G", "bottom", "G", "end"),
	}
	libNav := navKeys
	libNav.PageDown = b("pgdn", "page down", "pgdown", "ctrl+f", "ctrl+d", "space")
	scroll := navKeys
	scroll.Up = b("↑/k", "scroll up", "up", "k")
	scroll.Down = b("↓/j", "scroll down", "down", "j")
	return KeyMap{
		Global: GlobalKeys{
			Help:      b("?", "help", "?"),
			Quit:      b("q", "quit", "q"),
			ForceQuit: b("ctrl+c", "quit", "ctrl+c"),
			Back:      b("esc", "back", "esc", "backspace"),
		},
		Library: LibraryKeys{
			NavKeys:     libNav,
			Open:        b("enter", "open tree", "enter", "l", "right"),
			Filter:      b("/", "filter", "/"),
			Search:      b("s", "search messages", "s"),
			ClearFilter: b("esc", "clear", "esc"),
			Refresh:     b("r", "refresh", "r"),
			Import:      b("i", "import this machine's sessions", "i"),
			FoldProject: b("z", "fold project", "z", "tab"),
		},
		Tree: TreeKeys{
			NavKeys:        navKeys,
			Into:           b("→/l", "into fork", "right", "l"),
			Out:            b("←/h", "out of fork", "left", "h"),
			NextSibling:    b("]", "next sibling fork", "]"),
			PrevSibling:    b("[", "prev sibling fork", "["),
			Fold:           b("space", "fold fork", "space", "z"),
			FoldAll:        b("Z", "fold all forks / unfold all", "Z"),
			Focus:          b("tab", "focus detail", "tab"),
			Detail:         b("enter", "read message", "enter"),
			NextCheckpoint: b("}", "next checkpoint", "}"),
			PrevCheckpoint: b("{", "prev checkpoint", "{"),
			Fork:           b("f", "fork here", "f"),
			Cancel:         b("x", "cancel running fork", "x"),
			Compare:        b("c", "compare forks", "c"),
			Retry:          b("R", "retry failed fork", "R"),
			NextTurn:       b("m", "next turn", "m"),
		},
		Compare: CompareKeys{
			NavKeys: scroll,
			Next:    b("→/l", "next column", "right", "l", "tab"),
			Prev:    b("←/h", "prev column", "left", "h", "shift+tab"),
			Best:    b("b", "mark best", "b"),
			Open:    b("enter", "open in tree", "enter"),
			Diff:    b("d", "files changed (diff)", "d"),
		},
		Diff: DiffKeys{NavKeys: scroll},
		Dialog: DialogKeys{
			NextField: b("↓/tab", "next field", "down", "tab"),
			PrevField: b("↑", "prev field", "up", "shift+tab"),
			Change:    b("←/→", "change", "left", "right", "space", "+", "-"),
			Launch:    b("ctrl+s", "go", "ctrl+s"),
			Cancel:    b("esc", "cancel", "esc"),
		},
	}
}

// libraryHelp is the library's help: a short line and the full table.
type libraryHelp struct{ k KeyMap }

func (h libraryHelp) ShortHelp() []key.Binding {
	l := h.k.Library
	return []key.Binding{l.Open, l.Filter, l.Search, h.k.Global.Help, h.k.Global.Quit}
}

func (h libraryHelp) FullHelp() [][]key.Binding {
	l, g := h.k.Library, h.k.Global
	return [][]key.Binding{
		{l.Up, l.Down, l.PageUp, l.PageDown, l.Top, l.Bottom},
		{l.Open, l.Filter, l.Search, l.ClearFilter, l.Refresh, l.Import, l.FoldProject},
		{g.Help, g.Back, g.Quit, g.ForceQuit},
	}
}

// treeHelp is the tree screen's help.
type treeHelp struct{ k KeyMap }

func (h treeHelp) ShortHelp() []key.Binding {
	t := h.k.Tree
	return []key.Binding{t.Fork, t.Compare, t.NextTurn, t.Into, t.Out, t.Fold, t.Detail, h.k.Global.Back, h.k.Global.Help}
}

func (h treeHelp) FullHelp() [][]key.Binding {
	t, g := h.k.Tree, h.k.Global
	return [][]key.Binding{
		{t.Up, t.Down, t.PageUp, t.PageDown, t.Top, t.Bottom},
		{t.Into, t.Out, t.NextSibling, t.PrevSibling, t.NextCheckpoint, t.PrevCheckpoint},
		{t.Fork, t.Compare, t.NextTurn, t.Retry, t.Cancel},
		{t.Fold, t.FoldAll, t.Detail, t.Focus, g.Back, g.Help, g.Quit},
	}
}

// compareHelp is the Compare screen's help.
type compareHelp struct{ k KeyMap }

func (h compareHelp) ShortHelp() []key.Binding {
	c := h.k.Compare
	return []key.Binding{c.Prev, c.Next, c.Down, c.Diff, c.Best, c.Open, h.k.Global.Back}
}

func (h compareHelp) FullHelp() [][]key.Binding {
	c, g := h.k.Compare, h.k.Global
	return [][]key.Binding{
		{c.Prev, c.Next, c.Up, c.Down, c.PageUp, c.PageDown, c.Top, c.Bottom},
		{c.Diff, c.Best, c.Open},
		{g.Back, g.Help, g.Quit},
	}
}

// diffHelp is the full-screen diff's help.
type diffHelp struct{ k KeyMap }

func (h diffHelp) ShortHelp() []key.Binding {
	d := h.k.Diff
	return []key.Binding{d.Up, d.Down, d.PageDown, d.Top, d.Bottom, h.k.Global.Back}
}

func (h diffHelp) FullHelp() [][]key.Binding {
	d, g := h.k.Diff, h.k.Global
	return [][]key.Binding{{d.Up, d.Down, d.PageUp, d.PageDown, d.Top, d.Bottom}, {g.Back, g.Help, g.Quit}}
}

// dialogHelp is the Fork and next-turn dialogs' help.
type dialogHelp struct{ k KeyMap }

func (h dialogHelp) ShortHelp() []key.Binding {
	d := h.k.Dialog
	return []key.Binding{d.NextField, d.PrevField, d.Change, d.Launch, d.Cancel}
}

func (h dialogHelp) FullHelp() [][]key.Binding { return [][]key.Binding{h.ShortHelp()} }
