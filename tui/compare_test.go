package tui

import (
	"context"
	"fmt"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/harness/worktree"
	"tine/model"
)

func TestChangedTokens(t *testing.T) {
	a := tokenize([]modelMsg{textMsg("the bug is in the cache key")})
	b := tokenize([]modelMsg{textMsg("the bug is in the parser, not the cache")})
	changed := changedTokens(a, b)
	var marked []string
	for i, c := range changed {
		if c {
			marked = append(marked, b[i].text)
		}
	}
	assert.Equal(t, []string{"parser,", "not", "the"}, marked)
	assert.Empty(t, trueOnly(changedTokens(a, a)), "a column never differs from itself")
}

func trueOnly(bs []bool) []bool {
	var out []bool
	for _, b := range bs {
		if b {
			out = append(out, b)
		}
	}
	return out
}

func TestCompareScreen(t *testing.T) {
	d := newDriver(t, seedStore(t, 0), 120, 30)
	d.keys("enter")
	// Put the cursor on the message the "terse" fork leaves after (K=5):
	// the comparison is terse against the original's continuation.
	for d.a.tree.cursor = 0; d.a.tree.cursor < len(d.a.tree.rows); d.a.tree.cursor++ {
		r := d.a.tree.rows[d.a.tree.cursor]
		if r.kind == rowFork && d.a.tree.data.runs[r.run].run().Name == "terse" {
			break
		}
	}
	d.keys("c")
	require.Equal(t, screenCompare, d.a.screen)
	s := d.plain()
	assert.Contains(t, s, "compare 2 runs from K=5")
	assert.NotContains(t, s, "columns 1–1", "both columns fit at 120 and the header says so from the first frame")
	assert.Contains(t, s, "original (")
	assert.Contains(t, s, "terse")
	assert.Contains(t, s, "Paris is **18C**")
	assert.Contains(t, s, "18/24/9")
	assert.Contains(t, s, "✗ failed")
	requireFits(t, d.screen(), 120, 30)
	assert.Contains(t, d.screen(), d.a.styles.Match.Render("18/24/9"), "the differing words are marked")

	d.keys("l", "b")
	assert.True(t, d.a.compare.cols[1].run.Best)
	assert.Contains(t, d.plain(), "★ terse")
	// b picks the best of the runs compared: the original's mark takes
	// terse's, in the store too.
	d.keys("h", "b")
	terse, err := d.a.st.Run(context.Background(), d.a.compare.cols[1].run.ID)
	require.NoError(t, err)
	assert.False(t, terse.Best, "the runs compared lose their mark")
	d.keys("l", "b")
	assert.True(t, d.a.compare.cols[1].run.Best)
	d.keys("enter")
	require.Equal(t, screenTree, d.a.screen)
	r, _ := d.a.tree.selected()
	assert.Equal(t, "terse", d.a.tree.data.runs[r.run].run().Name, "enter opens the column's run in the tree")
	assert.Contains(t, d.plain(), "★ terse", "the mark is stored")

	// Nothing to compare at the root's first message without forks below.
	d.keys("G", "c")
	assert.Contains(t, d.plain(), "put the cursor on a fork")
}

func TestCompareColumnsPageSideways(t *testing.T) {
	c := &compareScreen{forkPoint: 1}
	for i := 0; i < 10; i++ {
		c.cols = append(c.cols, compareColumn{tokens: tokenize([]modelMsg{textMsg(strings.Repeat("word ", i+1))}), msgs: []modelMsg{textMsg("x")}})
	}
	c.diffWords()
	st := NewStyles(true)
	for _, w := range []int{120, 200, 300} {
		c.layout(w, 30, &st)
		assert.Equal(t, min(w/minColumn, 10), c.visible(), "width %d", w)
		for _, line := range strings.Split(c.view(&st), "\n") {
			assert.LessOrEqual(t, ansi.StringWidth(line), w)
		}
	}
	c.layout(120, 30, &st)
	for i := 0; i < 9; i++ {
		c.moveFocus(+1)
	}
	assert.Equal(t, 9, c.focus)
	assert.Equal(t, 6, c.first, "the focused column pages into view")
}

func TestFileSummaryGivesWayToNamesThatFit(t *testing.T) {
	st := NewStyles(true)
	files := []worktree.FileStat{
		{Path: "internal/a/very/long/path/to/the/parser_table.go", Added: 10, Deleted: 2},
		{Path: "parser.go", Added: 2, Deleted: 1},
		{Path: "docs/an/even/longer/path/to/a/file/with/a/long/name/README.md", Added: 1},
	}
	assert.Equal(t, "3 files +13 −3 internal/a/very/long/path/to/the/parser_table.go parser.go docs/an/even/longer/path/to/a/file/with/a/long/name/README.md",
		ansi.Strip(fileSummary(files, 200, &st)))
	assert.Equal(t, "3 files +13 −3 …/parser_table.go parser.go …/README.md", ansi.Strip(fileSummary(files, 70, &st)),
		"long paths give way to their file names")
	assert.Equal(t, "3 files +13 −3 …/parser_table.go parser.go +1 more", ansi.Strip(fileSummary(files, 60, &st)))
	assert.Equal(t, "3 files +13 −3 parser.go +2 more", ansi.Strip(fileSummary(files, 40, &st)))
	assert.Equal(t, "no files changed", ansi.Strip(fileSummary(nil, 40, &st)))
}

// A comparison that arrives after the user left the tree is dropped:
// c, then esc before it loads, stays on the library, and keys there do
// not reach a Compare screen over no tree.
func TestCompareArrivingLateIsDropped(t *testing.T) {
	d := newDriver(t, seedStore(t, 0), 120, 30)
	d.keys("enter")
	d.cursorTo("terse")
	_, cmd := d.a.Update(press("c"))
	require.NotNil(t, cmd)
	d.keys("esc")
	require.Equal(t, screenLibrary, d.a.screen)
	d.run(cmd) // the comparison arrives now
	assert.Equal(t, screenLibrary, d.a.screen, "a comparison for a tree the user left is dropped")
	assert.NotContains(t, d.plain(), "comparing…")
	d.keys("enter", "esc", "j")
	assert.Equal(t, screenLibrary, d.a.screen)

}

// TestCompareWidenedOnItsLastColumn: on the last column at 40 cells,
// widened to 80 (two columns of 40: the same column width), Compare shows
// the last two columns, the focus where it was (issue 27: it kept the
// last column first and drew one past it: a panic).
func TestCompareWidenedOnItsLastColumn(t *testing.T) {
	d := newDriver(t, seedStore(t, 0), 160, 45)
	d.keys("enter")
	d.cursorTo("terse")
	d.keys("c")
	require.Equal(t, screenCompare, d.a.screen)
	d.send(tea.WindowSizeMsg{Width: 40, Height: 12})
	d.keys("l")
	d.send(tea.WindowSizeMsg{Width: 80, Height: 24})
	c := d.a.compare
	assert.Equal(t, []int{0, 1, 2}, []int{c.first, c.focus, c.visible()})
	s := d.plain()
	assert.Contains(t, s, "original (")
	assert.Contains(t, s, "terse")
	requireFits(t, d.screen(), 80, 24)
}

// TestCompareFooterNamesItsKeys: at 120 columns Compare's footer names
// every key it has, apply too (A was in no footer, and d, b and enter
// gave way at 120); ? still says each whole.
func TestCompareFooterNamesItsKeys(t *testing.T) {
	t.Parallel()
	st := NewStyles(true)
	kt := compareTable(DefaultKeyMap())
	f := ansi.Strip(footerHelp(kt.short(), 120, &st))
	for _, k := range []string{"←/→ column", "↑/↓ scroll", "d diff", "b best", "A apply", "enter open", "a baseline", "esc back", "? help", "q quit"} {
		assert.Contains(t, f, k)
	}
	var help []string
	for _, b := range kt.full() {
		help = append(help, b.Help().Key+" "+b.Help().Desc)
	}
	assert.Contains(t, help, "A apply into the checkout")
	assert.Contains(t, help, "←/h prev column")
}

// TestBestSaysWhatItDid: b marks the focused run best, and b again takes
// the mark off; each says what it did (taking it off said nothing), and
// the ★ row comes and goes with it.
func TestBestSaysWhatItDid(t *testing.T) {
	d := newDriver(t, seedStore(t, 0), 120, 30)
	d.keys("enter")
	d.cursorTo("terse")
	d.keys("c", "l", "b")
	assert.Equal(t, "marked terse best of the 2 runs compared", d.footer())
	assert.Contains(t, d.plain(), "★ marked best", "the ★ row says it")
	d.keys("b")
	assert.Equal(t, "terse is no longer marked best", d.footer())
	assert.False(t, d.a.compare.cols[1].run.Best)
	assert.NotContains(t, d.plain(), "★")
	r, err := d.a.st.Run(context.Background(), d.a.compare.cols[1].run.ID)
	require.NoError(t, err)
	assert.False(t, r.Best, "the store says so too")
}

func compareOf(texts ...string) *compareScreen {
	c := &compareScreen{}
	for i, s := range texts {
		col := compareColumn{label: fmt.Sprint("col", i), msgs: []modelMsg{textMsg(s)}}
		col.tokens = tokenize(col.msgs)
		c.cols = append(c.cols, col)
	}
	c.diffWords()
	return c
}

func markedWords(col compareColumn) []string {
	var out []string
	for i, t := range col.tokens {
		if col.changed[i] {
			out = append(out, t.text)
		}
	}
	return out
}

// TestCompareDiffsLinesThenWordsAgainstTheBaseline: with four columns each
// is diffed against the baseline (the original, column 0, until another is
// picked): only the lines that differ are marked, and in them only the
// words that changed.
func TestCompareDiffsLinesThenWordsAgainstTheBaseline(t *testing.T) {
	base := "The parser reads the table.\nIt fails on empty rows.\nThe fix is a guard."
	c := compareOf(base,
		"The parser reads the table.\nIt fails on blank rows.\nThe fix is a guard.",
		"The parser reads the table.\nIt fails on empty rows.\nThe fix is a guard.\nAnd a test.",
		"Completely different words here.")
	assert.Nil(t, c.cols[0].changed, "the baseline is not marked")
	assert.Equal(t, []string{"blank"}, markedWords(c.cols[1]), "one word in one line")
	assert.Equal(t, []string{"And", "a", "test."}, markedWords(c.cols[2]), "a new line is marked whole")
	assert.Len(t, markedWords(c.cols[3]), 4)
	lines := 0
	for i, t := range c.cols[1].tokens {
		if c.cols[1].lineChanged[i] && !t.newline {
			lines++
		}
	}
	assert.Equal(t, 5, lines, "the tokens of the one line that differs")

	// Column 2 as the baseline: column 1 now differs from it in two lines.
	c.baseline = 2
	c.diffWords()
	assert.Nil(t, c.cols[2].changed)
	assert.Equal(t, []string{"blank"}, markedWords(c.cols[1]))
	assert.Empty(t, markedWords(c.cols[0]), "the original lacks a line; it has nothing new")

	st := NewStyles(true)
	c.width, c.height = 120, 20
	c.layout(120, 20, &st)
	plain := ansi.Strip(strings.Join(c.cols[1].lines, "\n"))
	assert.Contains(t, plain, "▌It fails on blank rows.", "a changed line is marked in the gutter")
	assert.Contains(t, plain, " The parser reads the table.", "an unchanged one is not")
}

// TestCompareShowsToolCallsAsCode: a batch's label names its tools, code
// keeps its indentation, and an edit's input shows its line breaks.
func TestCompareShowsToolCallsAsCode(t *testing.T) {
	calls := []model.Part{{Kind: model.ToolCall, ToolName: "Read"}, {Kind: model.ToolCall, ToolName: "Bash"}}
	assert.Equal(t, "⚙ Read, Bash", toolBatchLabel(calls))
	assert.Equal(t, "⚙ Read ×2", toolBatchLabel([]model.Part{calls[0], calls[0]}))

	edit := model.Message{Role: model.Assistant, Parts: []model.Part{{Kind: model.ToolCall, ToolName: "Edit",
		ToolInput: `{"file_path":"p.go","old_string":"func f() {\n\treturn 1\n}","new_string":"func f() {\n\treturn 2\n}"}`}}}
	code := textMsg("Here:\nfunc g() {\n    if x {\n        y()\n    }\n}")
	c := &compareScreen{}
	col := compareColumn{label: "x", msgs: []modelMsg{edit, code}}
	col.tokens = tokenize(col.msgs)
	c.cols = []compareColumn{col}
	c.diffWords()
	st := NewStyles(true)
	c.layout(80, 30, &st)
	plain := ansi.Strip(strings.Join(c.cols[0].lines, "\n"))
	assert.NotContains(t, plain, `\n`, "no raw escapes")
	assert.NotContains(t, plain, `\t`)
	assert.Contains(t, plain, "old_string:")
	assert.Contains(t, plain, "\n       return 1", "the edit's own indentation (a tab) under its key")
	assert.Contains(t, plain, "\n         y()", "code keeps its indentation")
	assert.Contains(t, plain, "file_path: p.go")
}

// TestCompareFoldsInjectedContext: the context an agent writes into the
// conversation itself (Codex's <permissions instructions> and
// <environment_context>, as system messages) shows as one line a message,
// as in the tree, not as columns of it; and forks that differ only in it
// (where they ran) do not differ on Compare.
func TestCompareFoldsInjectedContext(t *testing.T) {
	context := func(cwd string) modelMsg {
		body := "<permissions instructions>\n" + strings.Repeat("Filesystem sandboxing defines which files can be read or written.\n", 30) + "</permissions instructions>"
		env := "<environment_context>\n  <cwd>" + cwd + "</cwd>\n  <shell>bash</shell>\n</environment_context>"
		return modelMsg{Role: model.System, Parts: []model.Part{{Kind: model.Text, Text: body}, {Kind: model.Text, Text: env}}}
	}
	col := func(cwd, answer string) compareColumn {
		msgs := []modelMsg{context(cwd), text(model.User, "fix it"), text(model.Assistant, answer)}
		return compareColumn{msgs: msgs, tokens: tokenize(msgs)}
	}
	c := &compareScreen{cols: []compareColumn{col("/wt/fork-1", "done"), col("/wt/fork-2", "done")}}
	c.diffWords()
	st := NewStyles(true)
	c.layout(120, 40, &st)
	out := ansi.Strip(c.view(&st))
	assert.Contains(t, out, "<permissions instructions> ⋯ 35 more lines folded")
	assert.NotContains(t, out, "Filesystem sandboxing", "the instructions are folded")
	assert.NotContains(t, out, "/wt/fork-1", "so is where each ran")
	for _, ch := range c.cols[1].lineChanged {
		assert.False(t, ch, "the forks differ only in the folded context")
	}
}

// TestCompareAndTreeGoBackWhereTheyCameFrom: a tree opened from Compare
// (enter on a column) goes back to Compare on esc, not past it to the
// library; and Compare does not show what the tree's status line said.
func TestCompareAndTreeGoBackWhereTheyCameFrom(t *testing.T) {
	d := newDriver(t, seedStore(t, 0), 120, 30)
	d.keys("enter", "/")
	d.typeText("paris")
	d.keys("enter")
	require.Contains(t, lastLine(d.plain()), "match 1 of")
	d.cursorTo("terse")
	d.keys("c")
	require.Equal(t, screenCompare, d.a.screen)
	assert.NotContains(t, lastLine(d.plain()), "match 1 of", "the tree's status stays with the tree")
	d.keys("l", "enter")
	require.Equal(t, screenTree, d.a.screen)
	d.keys("esc")
	require.Equal(t, screenCompare, d.a.screen, "back to the comparison the tree was opened from")
	assert.Contains(t, d.plain(), "compare 2 runs from K=5")
	d.keys("esc")
	require.Equal(t, screenTree, d.a.screen)
	d.keys("esc")
	assert.Equal(t, screenLibrary, d.a.screen, "then, from a tree not opened from Compare, the library")
}

// TestCompareBestReasonIsWhole: why a fork is the best is wrapped in its
// column's header, never cut, and the columns below give it the room.
func TestCompareBestReasonIsWhole(t *testing.T) {
	why := "the only fork of 3 whose check passed, with the fewest tokens"
	best := compareColumn{run: model.Run{Name: "a", Best: true, BestReason: why}, label: "a", msgs: []modelMsg{textMsg("x")}}
	best.tokens = tokenize(best.msgs)
	other := compareColumn{run: model.Run{Name: "b"}, label: "b", msgs: []modelMsg{textMsg("y")}}
	other.tokens = tokenize(other.msgs)
	c := &compareScreen{cols: []compareColumn{best, other}}
	c.diffWords()
	st := NewStyles(true)
	c.layout(60, 20, &st)
	out := ansi.Strip(c.view(&st))
	lines := strings.Split(out, "\n")
	assert.Len(t, lines, 20, "the header's extra lines come out of the body")
	var said []string
	for _, l := range lines {
		if cell := strings.TrimSpace(ansi.Truncate(l, 30, "")); cell != "" {
			said = append(said, cell)
		}
	}
	assert.Contains(t, strings.Join(said, " "), "★ "+why, "every word of it, in order")
	assert.NotContains(t, out, "…")
	for _, l := range lines {
		assert.LessOrEqual(t, ansi.StringWidth(l), 60)
	}
}

// TestCompareHeadSaysTheAARate: a run whose replays measured A/A shows
// its rate in its column's head; one never replayed shows none.
func TestCompareHeadSaysTheAARate(t *testing.T) {
	st := seedStore(t, 0)
	ctx := context.Background()
	terse, err := st.Resolve(ctx, "terse")
	require.NoError(t, err)
	yes, no := true, false
	for i, aa := range []*bool{&yes, &no, &yes, nil} {
		fk := &model.Run{ParentID: terse.ID, TreeID: terse.TreeID, ForkAt: terse.ForkAt + 1, Harness: "script", Status: model.Completed,
			Hidden: true, CreatedAt: terse.CreatedAt}
		require.NoError(t, st.CreateForks(ctx, []*model.Run{fk}))
		require.NoError(t, st.AddReplay(ctx, model.Replay{RunID: fk.ID, Of: terse.ID, Step: 1, Trial: i + 1, Continuations: 4,
			OnDivergence: "stop", Status: model.ReplayReplaying, CreatedAt: terse.CreatedAt}))
		require.NoError(t, st.UpdateReplay(ctx, fk.ID, model.ReplayForked, 1, "", aa, ""))
	}
	d := newDriver(t, st, 160, 30)
	d.keys("enter")
	for d.a.tree.cursor = 0; d.a.tree.cursor < len(d.a.tree.rows); d.a.tree.cursor++ {
		r := d.a.tree.rows[d.a.tree.cursor]
		if r.kind == rowFork && d.a.tree.data.runs[r.run].run().Name == "terse" {
			break
		}
	}
	d.keys("c")
	require.Equal(t, screenCompare, d.a.screen)
	s := d.plain()
	assert.Contains(t, s, "A/A 2/3", "terse's 3 measured replays, 2 of which reproduced it")
	assert.Equal(t, 1, strings.Count(s, "A/A "), "the original was never replayed")
}

// normAgent is an agent whose tool outputs state a process group id, with
// the rewrite its descriptor gives for it.
type normAgent struct{ fakeAgent }

func (n *normAgent) Descriptor() harness.Agent {
	return harness.Agent{Name: n.name, Record: &harness.Recording{Normalize: harness.Normalization{
		ToolOutput: []harness.Rewrite{{Has: "Process Group PGID: ", Pattern: `(?m)^Process Group PGID: .*$`, With: "Process Group PGID: <pgid>"}}}}}
}

// TestCompareIgnoresWhatAnAgentsToolOutputsStateOfTheMoment: two forks
// whose command printed the same but for the process group id the agent
// adds (Qwen Code, Gemini CLI) are not marked different there; a real
// difference in the output still is.
func TestCompareIgnoresWhatAnAgentsToolOutputsStateOfTheMoment(t *testing.T) {
	t.Parallel()
	reg := harness.NewRegistry(&normAgent{fakeAgent{name: "pgidagent"}})
	rw := toolRewritesOf(reg, "pgidagent")
	require.NotNil(t, rw)
	out := func(pgid, text string) []modelMsg {
		return []modelMsg{{Role: model.Tool, Parts: []model.Part{{Kind: model.ToolResult, ToolCallID: "c",
			Text: "Output: " + text + "\nProcess Group PGID: " + pgid}}}}
	}
	marked := func(a, b []token) []string {
		_, lines := changedLines(a, b)
		var words []string
		for i, c := range lines {
			if c {
				words = append(words, b[i].text)
			}
		}
		return words
	}
	a, b := tokenizeTools(out("4242", "hello"), rw), tokenizeTools(out("11720", "hello"), rw)
	assert.Empty(t, marked(a, b), "only the process group differs")
	assert.NotEmpty(t, marked(tokenize(out("4242", "hello")), tokenize(out("11720", "hello"))), "without the agent's rewrite it is marked")
	c := tokenizeTools(out("11720", "bye"), rw)
	assert.Contains(t, marked(a, c), "bye", "a real difference still is")
	assert.NotContains(t, marked(a, c), "11720")
	assert.Nil(t, toolRewritesOf(reg, "no-such-agent"))
}
