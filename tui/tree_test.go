package tui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/model"
)

func press(k string) tea.KeyPressMsg {
	switch k {
	case "up":
		return tea.KeyPressMsg{Code: tea.KeyUp}
	case "down":
		return tea.KeyPressMsg{Code: tea.KeyDown}
	case "left":
		return tea.KeyPressMsg{Code: tea.KeyLeft}
	case "right":
		return tea.KeyPressMsg{Code: tea.KeyRight}
	case "enter":
		return tea.KeyPressMsg{Code: tea.KeyEnter}
	case "esc":
		return tea.KeyPressMsg{Code: tea.KeyEscape}
	case "tab":
		return tea.KeyPressMsg{Code: tea.KeyTab}
	case "space":
		return tea.KeyPressMsg{Code: tea.KeySpace, Text: " "}
	case "pgdown":
		return tea.KeyPressMsg{Code: tea.KeyPgDown}
	case "pgup":
		return tea.KeyPressMsg{Code: tea.KeyPgUp}
	case "ctrl+c":
		return tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl}
	case "ctrl+s":
		return tea.KeyPressMsg{Code: 's', Mod: tea.ModCtrl}
	case "backspace":
		return tea.KeyPressMsg{Code: tea.KeyBackspace}
	}
	r := []rune(k)[0]
	return tea.KeyPressMsg{Code: r, Text: k}
}

// treeKey presses k on ts as the root routes a key to the tree screen's
// table, and returns what the key said.
func treeKey(ts *treeScreen, k string) string {
	a := New(nil, Options{})
	a.tick = func(time.Duration, func(time.Time) tea.Msg) tea.Cmd { return nil }
	a.tree, a.screen = ts, screenTree
	a.key(press(k))
	return a.status.text
}

// describe names the row under the cursor: "run:K" or "fork:name".
func describe(t *treeScreen) string {
	r, _ := t.selected()
	rd := t.data.runs[r.run]
	if r.kind == rowFork {
		return "fork:" + rd.run().Name
	}
	return fmt.Sprintf("%s:%d", rd.run().Label(), r.msg+1)
}

func TestFlattenPlacesForksAtTheirBoundary(t *testing.T) {
	ts := newTreeScreen(sampleTree())
	var got []string
	for _, r := range ts.rows {
		rd := ts.data.runs[r.run]
		if r.kind == rowFork {
			got = append(got, strings.Repeat(" ", int(r.depth))+"⑂"+rd.run().Name)
		} else {
			got = append(got, strings.Repeat(" ", int(r.depth))+rd.run().Label()+"#"+string(rune('0'+r.msg+1)))
		}
	}
	assert.Equal(t, []string{
		"root0000#1",
		" ⑂ask-again",
		" ask-again#2",
		"  ⑂nested",
		" ask-again#3",
		"root0000#2", "root0000#3", "root0000#4", "root0000#5",
		" ⑂terse",
		" terse#6",
		"root0000#6",
	}, got)
}

func TestTreeKeys(t *testing.T) {
	ts := newTreeScreen(sampleTree())
	ts.setSize(80, 20)
	do := func(k string) string { return treeKey(&ts, k) }

	assert.Equal(t, "root0000:1", describe(&ts))
	assert.Empty(t, do("l"), "into the fork that starts after message 1")
	assert.Equal(t, "ask-again:2", describe(&ts))
	do("h")
	assert.Equal(t, "fork:ask-again", describe(&ts), "out lands on the fork's header")
	do("h")
	assert.Equal(t, "root0000:1", describe(&ts), "out of a header lands on the message it branches after")

	do("l")
	do("h")
	do("]")
	assert.Equal(t, "fork:terse", describe(&ts), "next sibling")
	assert.Contains(t, do("]"), "no next sibling")
	do("[")
	assert.Equal(t, "fork:ask-again", describe(&ts))

	do("space")
	assert.Equal(t, "fork:ask-again", describe(&ts))
	assert.Len(t, ts.rows, 9, "folding hides the fork's messages and its own forks")
	do("j")
	assert.Equal(t, "root0000:2", describe(&ts))
	do("k")
	do("l")
	assert.Equal(t, "ask-again:2", describe(&ts), "going into a folded fork unfolds it")
	assert.Len(t, ts.rows, 12)

	do("Z")
	assert.Len(t, ts.rows, 8, "Z folds every fork")
	do("Z")
	assert.Len(t, ts.rows, 12, "and again unfolds them")

	do("g")
	do("}")
	assert.Equal(t, "ask-again:2", describe(&ts), "next checkpoint in view order")
	do("G")
	assert.Equal(t, "root0000:6", describe(&ts))
	do("{")
	assert.Equal(t, "terse:6", describe(&ts))
	do("g")
	assert.Contains(t, do("h"), "already at the root")
	assert.Contains(t, do("["), "root run has no siblings")
	do("j")
	do("j")
	assert.Equal(t, "ask-again:2", describe(&ts))
	assert.Contains(t, do("l"), "has no messages of its own yet", "a message followed by a fork goes into it")
	assert.Equal(t, "fork:nested", describe(&ts))
}

func TestMovingTheCursorRendersNoOffscreenRow(t *testing.T) {
	ts := newTreeScreen(longTree(10_000))
	ts.setSize(120, 48)
	st := NewStyles(true)
	ts.view(&st)
	assert.Equal(t, 48, ts.renders, "the first frame renders exactly the visible rows")
	for i := 0; i < 10; i++ {
		ts.renders = 0
		treeKey(&ts, "j")
		ts.view(&st)
		assert.LessOrEqual(t, ts.renders, 2, "a cursor move renders the old and new cursor rows only")
	}
	ts.renders = 0
	treeKey(&ts, "pgdown")
	ts.view(&st)
	assert.LessOrEqual(t, ts.renders, 48, "a page renders at most one screen")
	assert.Less(t, len(ts.rowCache), 200, "nothing off-screen was cached")
}

func TestRowsFitTheirWidth(t *testing.T) {
	for _, w := range []int{1, 2, 10, 40, 77, 200} {
		ts := newTreeScreen(sampleTree())
		ts.setSize(w, 30)
		st := NewStyles(false)
		for i, line := range strings.Split(ts.view(&st), "\n") {
			assert.LessOrEqual(t, ansi.StringWidth(line), max(w, 1), "width %d row %d: %q", w, i, line)
		}
	}
}

func TestMessageSnippet(t *testing.T) {
	data := sampleTree()
	root := data.runs[0]
	assert.Equal(t, "⚙ bash ×3", messageSnippet(root.message(1)))
	assert.Equal(t, "↳ bash: Paris: 18C", messageSnippet(root.message(2)))
	s := messageSnippet(root.message(3))
	assert.NotContains(t, s, "\x1b")
	assert.NotContains(t, s, "\x07")
}

func TestDetailIsTerminalSafe(t *testing.T) {
	data := sampleTree()
	st := NewStyles(true)
	out := messageDetail(data.runs[0], 3, 60, &st, func(s string) string { return s })
	plain := ansi.Strip(out)
	assert.Contains(t, plain, "Rome: 24C")
	assert.NotContains(t, plain, "\x1b")
	assert.NotContains(t, plain, "\x07")
	assert.NotContains(t, plain, "ZXZpbA==", "the OSC 52 payload is dropped with its sequence")
	assert.Contains(t, plain, "not a checkpoint: mid tool batch")
}

func TestNewTreeDataBoundariesSpanTheInheritedPrefix(t *testing.T) {
	data := sampleTree()
	terse := data.runs[data.index["forkbbbb2222"]]
	require.NotNil(t, terse)
	assert.True(t, terse.bounds.Safe(5))
	assert.True(t, terse.bounds.Safe(6))
	assert.False(t, terse.bounds.Safe(3), "the fork knows its inherited prefix's tool batch")
	nested := data.runs[data.index["forkcccc3333"]]
	assert.Zero(t, nested.n)
	assert.Equal(t, 2, nested.run().Len())
}

func TestSubagentShowsUnderItsCall(t *testing.T) {
	base := sampleTree()
	var runs []model.Run
	own := map[string][]model.Message{}
	for _, rd := range base.runs {
		runs = append(runs, rd.run())
		own[rd.run().ID] = rd.ownMsgs()
	}
	sub := model.Run{ID: "sub00000", TreeID: "sub00000", SpawnedBy: "root0000aaaa", SpawnedCall: "tc2", Title: "look up Rome", Harness: "claude", Status: model.Completed}
	runs = append(runs, sub)
	own[sub.ID] = []model.Message{text(model.User, "weather in Rome?"), text(model.Assistant, "24C")}
	ts := newTreeScreen(newTreeData(runs, own))
	ts.setSize(100, 30)
	var lines []string
	for _, r := range ts.rows {
		lines = append(lines, strings.TrimSpace(ts.rowText(r, nil)))
	}
	joined := strings.Join(lines, "\n")
	assert.Contains(t, joined, "▸⤷ subagent: look up Rome", "folded by default, after the message with its call")
	idx := -1
	for i, l := range lines {
		if strings.Contains(l, "subagent") {
			idx = i
		}
	}
	require.Positive(t, idx)
	assert.Contains(t, lines[idx-1], "⚙ bash ×3", "right under the tool call that started it")
	ts.cursor = idx
	treeKey(&ts, "l")
	assert.Equal(t, "sub00000:1", describe(&ts), "→ opens it")
	treeKey(&ts, "h")
	treeKey(&ts, "h")
	assert.Equal(t, "root0000:2", describe(&ts), "← goes back to the call")
}

func TestRunningForkShowsWhatItWrites(t *testing.T) {
	data := sampleTree()
	ri := data.index["forkcccc3333"]
	data.runs[ri].node.Run.Status = model.Running
	ts := newTreeScreen(data)
	ts.setSize(120, 20)
	ts.streaming["forkcccc3333"] = "a long answer that ends with \x1b[31mthe latest words"
	h := ts.forkRow(int32(ri))
	line := ts.rowText(ts.rows[h], nil)
	assert.Contains(t, line, "running “")
	assert.Contains(t, line, "the latest words”")
	assert.NotContains(t, line, "\x1b")
}

func wheelAt(x, y int, down bool) tea.MouseWheelMsg {
	b := tea.MouseWheelUp
	if down {
		b = tea.MouseWheelDown
	}
	return tea.MouseWheelMsg{X: x, Y: y, Button: b}
}

// TestWheelScrollsWhatIsUnderThePointer: over the detail pane the wheel
// scrolls it, over the list it moves the list (even when the detail has
// focus), and on Compare it scrolls the columns, not the library.
func TestWheelScrollsWhatIsUnderThePointer(t *testing.T) {
	d := newDriver(t, seedStore(t, 0), 120, 12)
	d.keys("enter", "j", "j", "j")
	tr := d.a.tree
	// A detail long enough to scroll.
	tr.detail.lines = strings.Split(strings.Repeat("line\n", 50), "\n")
	l := d.a.layout()
	cursor := tr.cursor
	d.send(wheelAt(l.detail.x+3, 5, true))
	assert.Equal(t, cursor, tr.cursor, "the wheel over the detail leaves the list alone")
	assert.Equal(t, 1, tr.detail.offset, "and scrolls the detail")
	d.keys("tab") // the detail has focus
	d.send(wheelAt(2, 5, true))
	assert.Equal(t, cursor+1, tr.cursor, "the wheel over the list moves the list")

	d.keys("esc")
	d.cursorTo("terse")
	libCursor := d.a.lib.cursor
	d.keys("c")
	require.Equal(t, screenCompare, d.a.screen)
	d.a.compare.cols[0].lines = strings.Split(strings.Repeat("x\n", 60), "\n")
	d.send(wheelAt(5, 5, true))
	assert.Equal(t, libCursor, d.a.lib.cursor, "the hidden library does not move")
	assert.Equal(t, 1, d.a.compare.offset, "the columns scroll")
}

// TestZFoldsEveryForkLine: after Z every fork line on screen shows the
// closed arrow, not a cached open one, and Z says what it did.
func TestZFoldsEveryForkLine(t *testing.T) {
	ts := newTreeScreen(sampleTree())
	ts.setSize(80, 20)
	st := NewStyles(true)
	ts.view(&st) // every row cached, unfolded
	assert.Contains(t, treeKey(&ts, "Z"), "folded every fork")
	plain := ansi.Strip(ts.view(&st))
	assert.NotContains(t, plain, "▾", plain)
	assert.Equal(t, 2, strings.Count(plain, "▸"), plain)
	assert.Contains(t, treeKey(&ts, "Z"), "unfolded every fork")
	plain = ansi.Strip(ts.view(&st))
	assert.NotContains(t, plain, "▸", plain)
}

// TestHiddenRunShowsOnlyWhatItsForksShare: a run hidden when its
// regeneration replaced it shows its messages up to where its forks
// start; its own continuation is not shown.
func TestHiddenRunShowsOnlyWhatItsForksShare(t *testing.T) {
	data := sampleTree()
	data.runs[0].node.Run.Hidden = true // the root, forked at K=1 and K=5
	rows := data.flatten(map[string]bool{})
	for _, r := range rows {
		if r.kind == rowMessage && r.run == 0 {
			assert.Less(t, int(r.msg), 5, "message %d of the hidden root is past its last fork", r.msg+1)
		}
	}
	// A hidden fork with no forks of its own is not shown at all.
	data = sampleTree()
	data.runs[data.index["forkbbbb2222"]].node.Run.Hidden = true
	ts := newTreeScreen(data)
	for _, r := range ts.rows {
		assert.NotEqual(t, int32(data.index["forkbbbb2222"]), r.run, "the hidden fork is gone")
	}
}

// TestStoppedAtToolCalls: a completed run whose last message calls tools
// nobody ran says so instead of "completed".
func TestStoppedAtToolCalls(t *testing.T) {
	base := sampleTree()
	var runs []model.Run
	own := map[string][]model.Message{}
	for _, rd := range base.runs {
		runs = append(runs, rd.run())
		own[rd.run().ID] = rd.ownMsgs()
	}
	own["forkaaaa1111"] = append(own["forkaaaa1111"], callMsg("x1", "x2"), resultMsg("x1", "ok"))
	data := newTreeData(runs, own)
	ri := data.index["forkaaaa1111"]
	ts := newTreeScreen(data)
	ts.setSize(120, 20)
	line := ts.forkText(data.runs[ri], 1, nil)
	assert.Contains(t, line, "stopped at tool calls")
	assert.NotContains(t, line, "completed")
	assert.False(t, endsOnOpenCalls([]model.Message{callMsg("y"), resultMsg("y", "ok")}), "answered calls are done")
	assert.False(t, endsOnOpenCalls([]model.Message{callMsg("y"), resultMsg("y", "ok"), text(model.Assistant, "done")}))
}

// TestMarkdownCache: a message's rendering arrives for the key it was
// asked for and is what the pane then shows; the pane's cache of
// renderings is bounded.
func TestMarkdownCache(t *testing.T) {
	st := NewStyles(true)
	k := mdKey{text: "**bold** and `code`", width: 77, dark: true}
	msg := renderMarkdown(k, st.Markdown)().(markdownMsg)
	require.NoError(t, msg.err)
	assert.Equal(t, k, msg.key)
	assert.Equal(t, "bold and code", ansi.Strip(msg.out))
	assert.Contains(t, msg.out, "\x1b[1mbold\x1b[m", "strong is bold")
	var d detailPane
	for i := range 3 * maxMarkdown {
		d.keepMarkdown(mdKey{text: fmt.Sprint(i), width: 80}, "x")
	}
	assert.LessOrEqual(t, len(d.markdown), maxMarkdown)
	assert.Equal(t, "x", d.markdown[mdKey{text: fmt.Sprint(3*maxMarkdown - 1), width: 80}], "the newest is kept")
}

// TestForkDetailSaysWhereItBranched: a fork at K=0 (a replay of a pi
// session from its start) is not "after message 0".
func TestForkDetailSaysWhereItBranched(t *testing.T) {
	t.Parallel()
	st := NewStyles(true)
	at := func(k int) string {
		rd := &runData{node: &model.Node{Run: model.Run{ID: "f", Name: "f", ParentID: "p", ForkAt: k}}}
		return ansi.Strip(forkDetail(rd, 80, &st))
	}
	assert.Contains(t, at(3), "after message 3 (K=3)")
	assert.Contains(t, at(0), "before its first message (K=0)")
}

// TestForkDetailSaysItsAARate: a run whose replays were measured says how
// many reproduced it; one never replayed says nothing of it.
func TestForkDetailSaysItsAARate(t *testing.T) {
	t.Parallel()
	st := NewStyles(true)
	rd := &runData{node: &model.Node{Run: model.Run{ID: "f", Name: "f", ParentID: "p", ForkAt: 3}}}
	assert.NotContains(t, ansi.Strip(forkDetail(rd, 80, &st)), "A/A")
	rd.aa = model.AARate{Measured: 4, Reproduced: 3}
	assert.Contains(t, ansi.Strip(forkDetail(rd, 80, &st)), "A/A       3 of 4 replays reproduced it")
}
