package tui

import (
	"charm.land/bubbles/v2/key"
)

// KeyMap is every key tine answers, grouped by screen: which keys, and how
// help names them. Each screen's keyTable (bindings.go) binds them to what
// they do and why they are off; the footers and ? read those tables.
type KeyMap struct {
	Global  GlobalKeys
	Help    HelpKeys
	Library LibraryKeys
	Tree    TreeKeys
	Compare CompareKeys
	Diff    DiffKeys
	Dialog  DialogKeys
	Replay  ReplayKeys
}

// GlobalKeys work on every screen. While text is typed, ? and q are text:
// HelpTyping (f1) is help, and ForceQuit quits.
type GlobalKeys struct {
	Help, HelpTyping, Quit, ForceQuit, Back key.Binding
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
	// Apply and CancelInput end typing a filter or a search; InputNav
	// moves the list meanwhile, by the arrows only (k, j are text).
	Apply, CancelInput key.Binding
	InputNav           NavKeys
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
	// Merge brings the fork's findings home: its parent's next turn
	// carries its digest (merge.go).
	Merge key.Binding
}

// CompareKeys are the Compare screen's; its NavKeys scroll every column.
type CompareKeys struct {
	NavKeys
	Next, Prev, Best, Open, Diff key.Binding
	// Apply brings the focused fork's work into the checkout it was made
	// from, after asking.
	Apply key.Binding
	// Baseline makes the focused column the one the others are diffed
	// against.
	Baseline key.Binding
	// Merge brings the compared forks' findings into their parent.
	Merge key.Binding
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

// ReplayKeys are the Replay panel's: its form, then its trials.
type ReplayKeys struct {
	NextField, PrevField, Change, Continuations, Start, Cancel key.Binding
	// Enter goes to the next field, or starts on the button.
	Enter key.Binding
	// Once started: choose a trial, scroll its divergence's diff, open
	// it in the tree, go back (the replay goes on).
	Trial, Scroll, Open, Back key.Binding
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
			Help:       b("?", "help", "?", "f1"),
			HelpTyping: b("f1", "help", "f1"),
			Quit:       b("q", "quit", "q"),
			ForceQuit:  b("ctrl+c", "quit", "ctrl+c"),
			Back:       b("esc", "back", "esc", "backspace"),
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
			FoldProject: b("z/tab", "fold project", "z", "tab"),
			Apply:       b("enter", "apply", "enter"),
			CancelInput: b("esc", "cancel", "esc"),
			InputNav: NavKeys{
				Up:       b("↑", "up", "up"),
				Down:     b("↓", "down", "down"),
				PageUp:   b("pgup", "page up", "pgup"),
				PageDown: b("pgdn", "page down", "pgdown"),
			},
		},
		Tree: TreeKeys{
			NavKeys:        navKeys,
			Into:           b("→/l", "into fork", "right", "l"),
			Out:            b("←/h", "out of fork", "left", "h"),
			NextSibling:    b("]", "next sibling fork", "]"),
			PrevSibling:    b("[", "prev sibling fork", "["),
			Fold:           b("space/z", "fold fork", "space", "z"),
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
			Merge:          b("M", "merge the fork home", "M"),
		},
		Compare: CompareKeys{
			NavKeys:  scroll,
			Next:     b("→/l", "next column", "right", "l", "tab"),
			Prev:     b("←/h", "prev column", "left", "h", "shift+tab"),
			Best:     b("b", "mark best", "b"),
			Open:     b("enter", "open in tree", "enter"),
			Diff:     b("d", "files changed (diff)", "d"),
			Baseline: b("a", "diff the others against this", "a"),
			Apply:    b("A", "apply into the checkout", "A"),
			Merge:    b("M", "merge the forks home", "M"),
		},
		Diff: DiffKeys{NavKeys: scroll},
		Dialog: DialogKeys{
			NextField: b("↓/tab", "next field", "down", "tab"),
			PrevField: b("↑", "prev field", "up", "shift+tab"),
			Change:    b("←/→/space", "change", "left", "right", "space", "+", "-"),
			Launch:    b("ctrl+s", "go", "ctrl+s"),
			Cancel:    b("esc", "cancel", "esc"),
			Enter:     b("enter", "next field (on the button: go)", "enter"),
		},
		Replay: ReplayKeys{
			NextField:     b("tab/↓", "next field", "tab", "down"),
			PrevField:     b("shift+tab/↑", "previous field", "shift+tab", "up"),
			Change:        b("←/→", "change the value", "left", "h", "-", "right", "l", "+", "space"),
			Continuations: b("0-9", "continuations", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9"),
			Enter:         b("enter", "next field; on [ replay ] start", "enter"),
			Start:         b("ctrl+s", "start the replay", "ctrl+s"),
			Cancel:        b("esc", "cancel", "esc"),
			Trial:         b("↑/↓", "choose a trial", "up", "k", "down", "j"),
			Scroll:        b("pgup/pgdn", "scroll its divergence's diff", "pgup", "K", "pgdown", "space", "J"),
			Open:          b("enter", "open it in the tree", "enter"),
			Back:          b("esc/q", "back (the replay goes on)", "esc", "q"),
		},
	}
}
