package tui

import (
	"fmt"
	"strings"

	"charm.land/bubbles/v2/key"
	"github.com/charmbracelet/x/ansi"
)

// KeyMap is every key tine answers, grouped by screen. Each key is defined
// here once, with its help text; the footers and ? read these bindings.
type KeyMap struct {
	Global  GlobalKeys
	Help    HelpKeys
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

// HelpKeys scroll the help while it shows; any other key closes it.
type HelpKeys struct {
	NavKeys
	Close key.Binding
}

// LibraryKeys are the library screen's.
type LibraryKeys struct {
	NavKeys
	Open, Filter, Search, ClearFilter key.Binding
	Refresh, Import, FoldProject      key.Binding
	// Apply and CancelInput end typing a filter or a search.
	Apply, CancelInput key.Binding
}

// TreeKeys are the tree screen's.
type TreeKeys struct {
	NavKeys
	Into, Out, NextSibling, PrevSibling key.Binding
	Fold, FoldAll, Focus, Detail        key.Binding
	NextCheckpoint, PrevCheckpoint      key.Binding
	Fork, Cancel, Compare               key.Binding
	Retry, NextTurn                     key.Binding
	// Find searches the tree; NextMatch and PrevMatch move between
	// matches; Copy copies the selected message.
	Find, NextMatch, PrevMatch, Copy key.Binding
	// FoldDepth folds the forks from a depth down (0 unfolds all);
	// NextChanged and PrevChanged jump between forks that did something.
	FoldDepth, NextChanged, PrevChanged key.Binding
	// Pager and Editor read the selected message outside tine; Agent
	// opens the run in its own agent (open.go).
	Pager, Editor, Agent key.Binding
}

// CompareKeys are the Compare screen's; its NavKeys scroll every column.
type CompareKeys struct {
	NavKeys
	Next, Prev, Best, Open, Diff key.Binding
	// Baseline makes the focused column the one the others are diffed
	// against.
	Baseline key.Binding
}

// DiffKeys are the full-screen diff's.
type DiffKeys struct {
	NavKeys
}

// DialogKeys are the Fork and next-turn dialogs'.
type DialogKeys struct {
	NextField, PrevField, Change, Launch, Cancel key.Binding
	// Enter goes to the next field, or launches on the button.
	Enter key.Binding
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
			Help:      b("?", "help", "?", "f1"),
			Quit:      b("q", "quit", "q"),
			ForceQuit: b("ctrl+c", "quit", "ctrl+c"),
			Back:      b("esc", "back", "esc", "backspace"),
		},
		Help: HelpKeys{NavKeys: scroll, Close: b("any key", "closes help")},
		Library: LibraryKeys{
			NavKeys:     libNav,
			Open:        b("enter", "open tree", "enter", "l", "right"),
			Filter:      b("/", "filter", "/"),
			Search:      b("s", "search messages", "s"),
			ClearFilter: b("esc", "clear", "esc"),
			Refresh:     b("r", "refresh", "r"),
			Import:      b("i", "import this machine's sessions", "i"),
			FoldProject: b("z", "fold project", "z", "tab"),
			Apply:       b("enter", "apply", "enter"),
			CancelInput: b("esc", "cancel", "esc"),
		},
		Tree: TreeKeys{
			NavKeys:        navKeys,
			Into:           b("→/l", "into fork", "right", "l"),
			Out:            b("←/h", "out of fork", "left", "h"),
			NextSibling:    b("]", "next sibling fork", "]"),
			PrevSibling:    b("[", "prev sibling fork", "["),
			Fold:           b("space", "fold fork", "space", "z"),
			FoldAll:        b("Z", "fold all forks / unfold all", "Z"),
			FoldDepth:      b("1-9", "fold forks from depth N down (0: unfold all)", "1", "2", "3", "4", "5", "6", "7", "8", "9", "0"),
			NextChanged:    b(">", "next fork with changes", ">"),
			PrevChanged:    b("<", "previous fork with changes", "<"),
			Focus:          b("tab", "focus detail", "tab"),
			Detail:         b("enter", "read message", "enter"),
			NextCheckpoint: b("}", "next checkpoint", "}"),
			PrevCheckpoint: b("{", "prev checkpoint", "{"),
			Fork:           b("f", "fork here", "f"),
			Cancel:         b("x", "cancel running fork", "x"),
			Compare:        b("c", "compare forks", "c"),
			Retry:          b("R", "replay to here (on a failed fork: retry)", "R"),
			NextTurn:       b("m", "next turn", "m"),
			Find:           b("/", "find in this tree", "/"),
			NextMatch:      b("n", "next match", "n"),
			PrevMatch:      b("N", "previous match", "N"),
			Copy:           b("y", "copy the message", "y"),
			Pager:          b("e", "read it in $PAGER", "e"),
			Editor:         b("E", "a copy in $EDITOR", "E"),
			Agent:          b("o", "open the run in its agent", "o"),
		},
		Compare: CompareKeys{
			NavKeys:  scroll,
			Next:     b("→/l", "next column", "right", "l", "tab"),
			Prev:     b("←/h", "prev column", "left", "h", "shift+tab"),
			Best:     b("b", "mark best", "b"),
			Open:     b("enter", "open in tree", "enter"),
			Diff:     b("d", "files changed (diff)", "d"),
			Baseline: b("a", "diff the others against this", "a"),
		},
		Diff: DiffKeys{NavKeys: scroll},
		Dialog: DialogKeys{
			NextField: b("↓/tab", "next field", "down", "tab"),
			PrevField: b("↑", "prev field", "up", "shift+tab"),
			Change:    b("←/→", "change", "left", "right", "space", "+", "-"),
			Launch:    b("ctrl+s", "go", "ctrl+s"),
			Cancel:    b("esc", "cancel", "esc"),
			Enter:     b("enter", "next field (on the button: go)", "enter"),
		},
	}
}

// screenHelp is what the footer and ? say about the screen that has the
// keys now: both read the bindings that handle the keys.
type screenHelp struct {
	id    string // names it for the footer's cache
	short []key.Binding
	full  [][]key.Binding
	intro string
}

// withHelp is b with other help text: the same keys, said for a context.
func withHelp(b key.Binding, keys, desc string) key.Binding {
	b.SetHelp(keys, desc)
	return b
}

func libraryHelp(k KeyMap, mode libMode) screenHelp {
	l, g := k.Library, k.Global
	switch mode {
	case libFilter, libSearch:
		apply := l.Apply
		if mode == libSearch {
			apply = withHelp(l.Apply, "enter", "search")
		}
		return screenHelp{id: fmt.Sprint("lib-typing", mode),
			short: []key.Binding{apply, withHelp(l.Down, "↑/↓", "move"), l.CancelInput, withHelp(g.Help, "f1", "help"), g.ForceQuit},
			full:  [][]key.Binding{{apply, l.CancelInput, withHelp(l.Up, "↑", "up"), withHelp(l.Down, "↓", "down"), withHelp(g.Help, "f1", "help"), g.ForceQuit}},
			intro: "Typing a filter or a search: keys go to the text (f1 is help, ctrl+c quits); ↑/↓ still move the list."}
	case libHits:
		open := withHelp(l.Open, "enter", "open at the hit")
		return screenHelp{id: "lib-hits",
			short: []key.Binding{open, l.Down, l.Search, withHelp(l.ClearFilter, "esc", "back"), g.Help, g.Quit},
			full:  [][]key.Binding{{l.Up, l.Down, l.Top, l.Bottom}, {open, withHelp(l.Search, "s", "search again"), withHelp(l.ClearFilter, "esc", "back to the list")}, {g.Help, g.Quit, g.ForceQuit}},
			intro: "Search hits: every message whose text matched, newest first; enter opens its tree on that message."}
	}
	return screenHelp{id: "lib",
		short: []key.Binding{l.Open, l.Filter, l.Search, l.Import, l.FoldProject, l.Refresh, g.Help, g.Quit},
		full: [][]key.Binding{
			{l.Up, l.Down, l.PageUp, l.PageDown, l.Top, l.Bottom},
			{l.Open, l.Filter, l.Search, l.ClearFilter, l.Refresh, l.Import, l.FoldProject},
			{g.Help, g.Quit, g.ForceQuit},
		},
		intro: "Library: every conversation tree, grouped by project, newest first. / filters by title, project or harness; s searches the text of every message; i imports this machine's Claude Code, Codex and pi sessions (only what changed)."}
}

func treeHelp(k KeyMap) screenHelp {
	t, g := k.Tree, k.Global
	return screenHelp{id: "tree",
		short: []key.Binding{t.Fork, t.Compare, t.NextTurn, t.Into, t.Out, t.Find, t.Fold, t.Detail, t.Copy, t.Pager, t.Agent, g.Back, g.Help, g.Quit},
		full: [][]key.Binding{
			{t.Up, t.Down, t.PageUp, t.PageDown, t.Top, t.Bottom},
			{t.Into, t.Out, t.NextSibling, t.PrevSibling, t.NextChanged, t.PrevChanged, t.NextCheckpoint, t.PrevCheckpoint},
			{t.Find, t.NextMatch, t.PrevMatch, t.Copy, t.Pager, t.Editor, t.Agent},
			{t.Fork, t.Compare, t.NextTurn, t.Retry, t.Cancel},
			{t.Fold, t.FoldAll, t.FoldDepth, t.Detail, t.Focus, g.Back, g.Help, g.Quit, g.ForceQuit},
		},
		intro: "Tree: one line a message. ● marks a checkpoint (a safe place to fork); · a cut that would split a tool batch. ⑂ lines are forks (⎇ their branch, ★ the best): → goes in, ← comes out, [ ] move between siblings, space folds (1-9 fold every fork from that depth down, 0 unfolds all; a folded fork says how many forks it hides); > and < jump to the next or previous fork that has messages of its own. f forks at the cursor; m gives a run its next turn; R on a message replays its run to that step (a Claude Code, Codex or pi run: its world rebuilt in a fresh worktree, then forked there), and on a failed fork's ⑂ line retries it; x stops a running one, whoever runs it; c compares the forks made at a boundary; ⤷ lines are subagents, under the call that started them. e reads the message (on a ⑂ line, the fork's messages) in $PAGER, E a copy in $EDITOR (the variable is split on spaces, no shell quoting); o opens the run in its agent (claude --resume, codex resume, pi --session) in its worktree or directory, and tine comes back when it exits."}
}

// findHelp is the tree's while a search is typed.
func findHelp(k KeyMap) screenHelp {
	l, g := k.Library, k.Global
	apply := withHelp(l.Apply, "enter", "find")
	help := withHelp(g.Help, "f1", "help")
	return screenHelp{id: "tree-find",
		short: []key.Binding{apply, l.CancelInput, help, g.ForceQuit},
		full:  [][]key.Binding{{apply, l.CancelInput, help, g.ForceQuit}},
		intro: "Find in this tree: the text of every message, in every fork (folded ones open when a match is in them). enter finds, then n and N move between matches; esc cancels."}
}

// detailHelp is the tree's while the detail pane has the keys.
func detailHelp(k KeyMap, full bool) screenHelp {
	t, g := k.Tree, k.Global
	focus := withHelp(t.Focus, "tab", "back to the list")
	back := withHelp(g.Back, "esc", "back to the list")
	return screenHelp{id: "detail",
		short: []key.Binding{withHelp(t.Down, "↑/↓", "scroll"), t.PageDown, t.Pager, focus, back, g.Help, g.Quit},
		full:  [][]key.Binding{{withHelp(t.Up, "↑/k", "scroll up"), withHelp(t.Down, "↓/j", "scroll down"), t.PageUp, t.PageDown, t.Top, t.Bottom}, {t.Pager, t.Editor, t.Agent, t.Copy}, {focus, back, g.Help, g.Quit, g.ForceQuit}},
		intro: "The message in full: ↑/↓ scroll it; tab or esc go back to the list."}
}

func compareHelp(k KeyMap) screenHelp {
	c, g := k.Compare, k.Global
	return screenHelp{id: "compare",
		short: []key.Binding{c.Prev, c.Next, withHelp(c.Down, "↑/↓", "scroll"), c.Baseline, c.Diff, c.Best, c.Open, g.Back, g.Help, g.Quit},
		full: [][]key.Binding{
			{c.Prev, c.Next, c.Up, c.Down, c.PageUp, c.PageDown, c.Top, c.Bottom},
			{c.Baseline, c.Diff, c.Best, c.Open},
			{g.Back, g.Help, g.Quit, g.ForceQuit},
		},
		intro: "Compare: the runs side by side from where they part, scrolling together. Each column is diffed against the baseline (◆; the original at first, a picks the focused column): a line that differs is marked ▌ and the words that changed in it are underlined. Each column says its harness, the files it changed, its check and whether it is the best (★, and why). Columns that do not fit page sideways."}
}

func diffHelp(k KeyMap) screenHelp {
	d, g := k.Diff, k.Global
	return screenHelp{id: "diff",
		short: []key.Binding{withHelp(d.Down, "↑/↓", "scroll"), d.PageDown, d.Top, d.Bottom, g.Back, g.Help, g.Quit},
		full:  [][]key.Binding{{d.Up, d.Down, d.PageUp, d.PageDown, d.Top, d.Bottom}, {g.Back, g.Help, g.Quit, g.ForceQuit}},
		intro: "Diff: everything the fork changed in its worktree against the files it started with, untracked files included."}
}

// dialogHelp is the Fork and next-turn dialogs' help; typing says whether
// a text field has the keys (then ? and q are text, and f1 is help).
func dialogHelp(k KeyMap, turn, typing bool) screenHelp {
	d, g := k.Dialog, k.Global
	help, quit := g.Help, g.Quit
	if typing {
		help = withHelp(g.Help, "f1", "help")
		quit = g.ForceQuit
	}
	h := screenHelp{id: fmt.Sprint("dialog", turn, typing),
		short: []key.Binding{d.NextField, d.PrevField, d.Change, d.Launch, d.Cancel, help, quit},
		full:  [][]key.Binding{{d.NextField, d.PrevField, d.Change, d.Enter, d.Launch, d.Cancel}, {help, quit, g.ForceQuit}},
		intro: "Fork: where the forks start, how many, which harness runs them and how, what each is told, and an optional check that scores them (the best is marked ★). An agent that cannot branch this run's session continues it only as a handoff, which you turn on here. In a text field, keys are text: f1 is help, ctrl+c quits."}
	if turn {
		h.intro = "Next turn: a message for the run, answered by its own harness or another. A session tine did not make (an imported one) is never written to: a fork at its end gets the turn. In the text field, keys are text: f1 is help, ctrl+c quits."
	}
	return h
}

// replayHelp is the Replay panel's: its form, then its trials.
func replayHelp(k KeyMap, started bool) screenHelp {
	b := func(help, desc string) key.Binding {
		return key.NewBinding(key.WithKeys(help), key.WithHelp(help, desc))
	}
	g := k.Global
	intro := "Replay: rebuilds the run's world at step N. A fresh worktree at the run's base commit (or --base: the commit you give) holds the files the run started with; the run's own agent is started as it was and answered from the run's tape for steps 1..N, so it runs every tool call again for real, and each request is checked against the tape. The first difference is a divergence: model (the request differs outside tool outputs), tool (a tool output differs), network (it differs and shows a network error: replays get no network) or tree (the files the tools left differ). Then each continuation goes live from step N as a fork of its own; 0 continuations only verifies."
	if started {
		return screenHelp{id: "replay-trials", intro: intro,
			short: []key.Binding{b("↑/↓", "trial"), b("enter", "open in tree"), b("pgup/pgdn", "diff"), b("esc", "back"), g.ForceQuit},
			full:  [][]key.Binding{{b("↑/↓", "choose a trial"), b("enter", "open it in the tree"), b("pgup/pgdn", "scroll its divergence's diff"), b("esc", "back (the replay goes on)")}, {g.ForceQuit}}}
	}
	return screenHelp{id: "replay-form", intro: intro,
		short: []key.Binding{b("tab", "next"), b("←/→", "change"), b("enter", "next/replay"), b("esc", "cancel"), g.ForceQuit},
		full:  [][]key.Binding{{b("tab/↓", "next field"), b("shift+tab/↑", "previous field"), b("←/→", "change the value"), b("0-9", "continuations"), b("enter", "next field; on [ replay ] start"), b("esc", "cancel")}, {b("f1", "help"), g.ForceQuit}}}
}

// helpLines lays the bindings out as "key  what it does", in as many
// columns as fit in width, each binding once.
func helpLines(groups [][]key.Binding, width int, st *Styles) []string {
	type item struct{ k, d string }
	var items []item
	seen := map[item]bool{}
	kw, dw := 0, 0
	for _, g := range groups {
		for _, b := range g {
			h := b.Help()
			it := item{h.Key, h.Desc}
			if !b.Enabled() || it.k == "" || seen[it] {
				continue
			}
			seen[it] = true
			items = append(items, it)
			kw, dw = max(kw, ansi.StringWidth(it.k)), max(dw, ansi.StringWidth(it.d))
		}
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
