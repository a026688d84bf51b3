package tui

import (
	"fmt"

	tea "charm.land/bubbletea/v2"

	"tine/model"
)

// The tree screen's keys: the list's (treeTable), and the detail pane's
// while it has them (detailTable), which scrolls with the arrows and
// keeps every other key of the list. Moves are treeScreen methods that
// return what to say; the rest start work through the App.

const treeIntro = "Tree: one line a message. ● marks a checkpoint (a safe place to fork); · a cut that would split a tool batch. ⑂ lines are forks (⎇ their branch, ★ the best): → goes in, ← comes out, [ ] move between siblings, space folds (1-9 fold every fork from that depth down, 0 unfolds all; a folded fork says how many forks it hides); > and < jump to the next or previous fork that has messages of its own. f forks at the cursor; m gives a run its next turn; R on a message replays its run to that step (a run of an agent tine records, as tine harnesses lists them: its world rebuilt in a fresh worktree, then forked there), and on a failed fork's ⑂ line retries it; x stops a running one, whoever runs it; c compares the forks made at a boundary; M merges a fork home (its parent gets a turn whose message carries what it found; a ⇠ line shows each fork merged, right before the merge's message, and → on it goes to the fork); ⤷ lines are subagents, under the call that started them. e reads the message (on a ⑂ line, the fork's messages) in $PAGER, E a copy in $EDITOR (the variable is split on spaces, no shell quoting); o opens the run in its own agent (as its CLI resumes a session) in its worktree or directory, and tine comes back when it exits."

func treeTable(k KeyMap) keyTable {
	t, g := k.Tree, k.Global
	nav := treeMoveKey(func(ts *treeScreen, msg tea.KeyPressMsg) string {
		ts.move(msg, t.NavKeys, len(ts.rows))
		return ""
	})
	keys := []binding{
		{key: t.Up, run: nav}, {key: t.Down, run: nav}, {key: t.PageUp, run: nav},
		{key: t.PageDown, run: nav}, {key: t.Top, run: nav}, {key: t.Bottom, run: nav},
	}
	keys = append(keys, treeActions(k, false)...)
	keys = append(keys,
		binding{key: t.Detail, run: do((*App).readDetail), footer: 8},
		binding{key: t.Focus, run: do((*App).toggleDetail)},
		binding{key: g.Back, run: do((*App).treeBack), footer: 12},
		helpKey(g.Help).at(13), quitKey(g.Quit).at(14), quitKey(g.ForceQuit),
	)
	return keyTable{id: "tree", intro: treeIntro, keys: keys}
}

// detailTable is the tree's while the detail pane has the keys (tab, or
// a terminal too narrow for the pane beside the list): the arrows scroll
// the message, esc and tab go back to the list, the rest are the list's.
func detailTable(k KeyMap) keyTable {
	t, g := k.Tree, k.Global
	scroll := func(a *App, msg tea.KeyPressMsg) tea.Cmd {
		a.tree.detail.update(msg, t)
		return nil
	}
	keys := []binding{
		{key: withHelp(t.Up, "↑/k", "scroll up"), run: scroll},
		{key: withHelp(t.Down, "↓/j", "scroll down"), run: scroll, footer: 1, brief: brief("↑/↓", "scroll")},
		{key: t.PageUp, run: scroll}, {key: t.PageDown, run: scroll, footer: 2},
		{key: t.Top, run: scroll}, {key: t.Bottom, run: scroll},
	}
	keys = append(keys, treeActions(k, true)...)
	keys = append(keys,
		binding{key: withHelp(t.Focus, "tab", "back to the list"), run: do((*App).toggleDetail), footer: 4},
		binding{key: withHelp(g.Back, "esc", "back to the list"), run: do(func(a *App) tea.Cmd {
			if a.tree.detailOnly {
				a.tree.detailOnly = false
			} else {
				a.tree.detailFocus = false
			}
			return nil
		}), footer: 5},
		helpKey(g.Help).at(6), quitKey(g.Quit).at(7), quitKey(g.ForceQuit),
	)
	return keyTable{id: "detail", keys: keys, intro: "The message in full: ↑/↓ scroll it; tab or esc go back to the list. The list's other keys work here too."}
}

// treeActions are the keys the list and the detail pane share: moving
// between forks, finding, reading and forking. detail orders them as the
// pane's help does (reading first), with its own footer.
func treeActions(k KeyMap, detail bool) []binding {
	t := k.Tree
	// place is a binding's place in the list's footer (tree) or the
	// pane's (pane).
	place := func(tree, pane int) int {
		if detail {
			return pane
		}
		return tree
	}
	moves := []binding{
		{key: t.Into, run: treeMoveKey(skip((*treeScreen).into)), footer: place(4, 0)},
		{key: t.Out, run: treeMoveKey(skip((*treeScreen).out)), footer: place(5, 0)},
		{key: t.NextSibling, run: treeMoveKey(skip(func(ts *treeScreen) string { return ts.sibling(+1) }))},
		{key: t.PrevSibling, run: treeMoveKey(skip(func(ts *treeScreen) string { return ts.sibling(-1) }))},
		{key: t.NextChanged, run: treeMoveKey(skip(func(ts *treeScreen) string { return ts.nextChanged(+1) }))},
		{key: t.PrevChanged, run: treeMoveKey(skip(func(ts *treeScreen) string { return ts.nextChanged(-1) }))},
		{key: t.NextCheckpoint, run: treeMoveKey(skip(func(ts *treeScreen) string { return ts.checkpoint(+1) }))},
		{key: t.PrevCheckpoint, run: treeMoveKey(skip(func(ts *treeScreen) string { return ts.checkpoint(-1) }))},
	}
	find := []binding{
		{key: t.Find, run: do((*App).startFind), footer: place(6, 0)},
		{key: t.NextMatch, run: treeMoveKey(skip(func(ts *treeScreen) string { return ts.nextMatch(+1, false) })), disabled: findOff},
		{key: t.PrevMatch, run: treeMoveKey(skip(func(ts *treeScreen) string { return ts.nextMatch(-1, false) })), disabled: findOff},
	}
	copyKey := binding{key: t.Copy, run: do((*App).copySelected), disabled: copyOff, footer: place(9, 0)}
	read := []binding{
		{key: t.Pager, run: do(func(a *App) tea.Cmd { return a.readSelected(false) }), footer: place(10, 3)},
		{key: t.Editor, run: do(func(a *App) tea.Cmd { return a.readSelected(true) })},
		{key: t.Agent, run: do((*App).openAgent), footer: place(11, 0)},
	}
	work := []binding{
		{key: t.Fork, run: do((*App).openDialog), disabled: forkOff, footer: place(1, 0)},
		{key: t.Compare, run: do((*App).compareSelected), disabled: compareOff, footer: place(2, 0)},
		{key: t.NextTurn, run: do((*App).openTurnDialog), disabled: nextTurnOff, footer: place(3, 0)},
		{key: t.Retry, run: do((*App).replayOrRetry), disabled: replayOrRetryOff},
		{key: t.Cancel, run: do((*App).cancelSelected), disabled: cancelOff},
	}
	folds := []binding{
		{key: t.Fold, run: treeMoveKey(skip((*treeScreen).fold)), footer: place(7, 0)},
		{key: t.FoldAll, run: treeMoveKey(skip((*treeScreen).foldAll))},
		{key: t.FoldDepth, run: treeMoveKey(func(ts *treeScreen, msg tea.KeyPressMsg) string { return ts.foldDepth(int(msg.Code - '0')) })},
	}
	// Last, so help's first screen keeps what it showed before M.
	merges := []binding{{key: t.Merge, run: do((*App).mergeSelected), disabled: mergeOff}}
	if detail {
		return concat(read, []binding{copyKey}, moves, find, work, folds, merges)
	}
	return concat(moves, find, []binding{copyKey}, read, work, folds, merges)
}

func concat(groups ...[]binding) []binding {
	var out []binding
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

// treeMoveKey is a key's run that moves in the tree: it says what the
// move said, and lays out the message the cursor landed on.
func treeMoveKey(f func(ts *treeScreen, msg tea.KeyPressMsg) string) keyRun {
	return func(a *App, msg tea.KeyPressMsg) tea.Cmd {
		t := a.tree
		before := t.cursor
		cmd := a.setStatus(f(t, msg), levelWarn)
		if t.cursor != before {
			return tea.Batch(cmd, a.syncDetail())
		}
		return cmd
	}
}

// skip is a move that does not look at the key.
func skip(f func(*treeScreen) string) func(*treeScreen, tea.KeyPressMsg) string {
	return func(ts *treeScreen, _ tea.KeyPressMsg) string { return f(ts) }
}

// readDetail reads the message full-screen, or gives the pane beside the
// list the keys.
func (a *App) readDetail() tea.Cmd {
	if a.layout().detail.w == 0 {
		a.tree.detailOnly = true
	} else {
		a.tree.detailFocus = true
	}
	return a.syncDetail()
}

// toggleDetail gives the keys to the detail pane, or back to the list.
func (a *App) toggleDetail() tea.Cmd {
	t := a.tree
	if a.layout().detail.w == 0 {
		t.detailOnly = !t.detailOnly
	} else {
		t.detailFocus = !t.detailFocus
	}
	return a.syncDetail()
}

// compareSelected opens Compare on the forks at the cursor.
func (a *App) compareSelected() tea.Cmd {
	runs, labels, k, _ := comparisonFor(a.tree)
	a.loading = "comparing…"
	return loadCompare(a.ctx, a.st, a.agents, a.view, runs, labels, k)
}

// Why a key of the tree does nothing now; "" when it applies.

func findOff(a *App) string { return a.tree.finder.off() }

func copyOff(a *App) string {
	if r, ok := a.tree.selected(); !ok || r.kind != rowMessage {
		return "y copies a message: put the cursor on one"
	}
	return ""
}

func forkOff(a *App) string {
	if a.opts.Driver == nil {
		return "forking is not available here: this program was started without a fork driver"
	}
	if r, ok := a.tree.selected(); ok && r.kind == rowMerge {
		return "f forks after a message: this line is a merge (→ goes to the fork merged; the next line is the merge's message)"
	}
	return ""
}

func compareOff(a *App) string {
	_, _, _, why := comparisonFor(a.tree)
	return why
}

func nextTurnOff(a *App) string {
	rd := a.tree.currentRun()
	switch {
	case rd == nil:
		return ""
	case a.opts.Driver == nil:
		return "running turns is not available here: this program was started without a fork driver"
	case rd.run().Status == model.Running:
		return model.SafeText(rd.run().Label()) + " is running: wait for it, or stop it with x"
	}
	return ""
}

func cancelOff(a *App) string {
	rd := a.tree.currentRun()
	if rd == nil {
		return ""
	}
	run := rd.run()
	if run.Status != model.Running && run.Status != model.Pending && run.Status != model.Queued {
		return fmt.Sprintf("%s is not running (%s)", model.SafeText(run.Label()), run.Status)
	}
	return ""
}

// replaysHere reports whether R replays (on a message of a run that is
// not a failed or cancelled fork) rather than retries.
func (a *App) replaysHere() bool {
	t := a.tree
	r, ok := t.selected()
	if !ok || r.kind != rowMessage {
		return false
	}
	run := t.data.runs[r.run].run()
	return run.ParentID == "" || (run.Status != model.Failed && run.Status != model.Cancelled)
}

// replayOrRetry: on a message R replays its run to there; on a failed or
// cancelled fork's ⑂ line (or anywhere in one) it retries the fork.
func (a *App) replayOrRetry() tea.Cmd {
	if a.replaysHere() {
		return a.openReplay()
	}
	return a.retrySelected()
}

func replayOrRetryOff(a *App) string {
	if a.replaysHere() {
		return a.replayOff()
	}
	return a.retryOff()
}

// treeBack leaves the tree: to the comparison it was opened from (read
// again, as the tree may have moved on), else to the library.
func (a *App) treeBack() tea.Cmd {
	if c := a.fromCompare; c != nil {
		a.fromCompare, a.compare = nil, c
		a.show(screenCompare)
		l := a.layout()
		c.layout(l.body.w, l.body.h, &a.styles)
		return a.reloadCompare()
	}
	a.tree = nil
	a.show(screenLibrary)
	return a.loadTrees()
}
