package tui

import (
	"context"
	"fmt"
	"testing"

	tea "charm.land/bubbletea/v2"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/harness/fork"
	"tine/harness/script"
)

// readMessages counts the messages of a tree read so far.
func readMessages(d *treeData) int {
	n := 0
	for _, rd := range d.runs {
		rd.body.mu.Lock()
		for _, p := range rd.body.pages {
			n += len(p)
		}
		rd.body.mu.Unlock()
	}
	return n
}

// TestALongRunIsReadAsItShows: opening a long run reads its first and
// last screens only; G shows its end; paging through it all keeps about
// maxPages of it.
func TestALongRunIsReadAsItShows(t *testing.T) {
	const n = 40_000
	st := seedStore(t, n)
	d := newDriver(t, st, 160, 40)
	d.keys("j", "enter") // the long run
	tr := d.a.tree
	require.NotNil(t, tr)
	require.Len(t, tr.rows, n)
	assert.LessOrEqual(t, readMessages(tr.data), 4*pageSize, "its first screens")
	s := d.plain()
	assert.Contains(t, s, "step 0: refactor the next file")
	assert.Contains(t, s, "K=1 · ", "the detail pane shows the message")

	d.keys("G")
	s = d.plain()
	assert.Contains(t, s, fmt.Sprintf("Done; tests pass. %d", n/4-1), "the last message, read as G showed it")
	assert.NotContains(t, s, "reading the message")
	assert.LessOrEqual(t, readMessages(tr.data), 8*pageSize)

	for range n / 30 {
		d.keys("pgup")
	}
	assert.Contains(t, d.plain(), "step 0: refactor", "back at the top")
	// Those near the screen, and the first and last screens, are kept.
	assert.LessOrEqual(t, readMessages(tr.data), (maxPages+8)*pageSize, "pages far from the screen were let go")
	assert.Greater(t, readMessages(tr.data), 100*pageSize)
}

// TestPagesOfATreeReadAgainAreDropped: pages asked of the tree as it was
// before it was read again are not put into the new one, whose rows
// may be other messages now.
func TestPagesOfATreeReadAgainAreDropped(t *testing.T) {
	st := seedStore(t, 1_000)
	d := newDriver(t, st, 160, 40)
	d.keys("j", "enter")
	tr := d.a.tree
	tr.cursor = 900
	tr.clamp()
	cmd := d.a.loadBodies()
	require.NotNil(t, cmd, "pages to read around message 901")
	var old []bodiesLoadedMsg
	collect(cmd, &old)
	require.NotEmpty(t, old)
	// Read again, the cursor back at the top.
	tr.cursor = 0
	tr.clamp()
	again, err := LoadTree(context.Background(), st, tr.data.root.Run.ID, nil)
	require.NoError(t, err)
	d.send(treeLoadedMsg{id: tr.data.root.Run.ID, gen: tr.gen, data: again, reload: true})
	require.Same(t, again, d.a.tree.data)
	require.False(t, again.runs[0].loaded(900))
	for _, m := range old {
		d.send(m)
	}
	assert.False(t, again.runs[0].loaded(900), "the old tree's pages are dropped")
}

// collect runs cmd and keeps the pages it reads.
func collect(cmd tea.Cmd, into *[]bodiesLoadedMsg) {
	if cmd == nil {
		return
	}
	switch m := cmd().(type) {
	case tea.BatchMsg:
		for _, c := range m {
			collect(c, into)
		}
	case bodiesLoadedMsg:
		*into = append(*into, m)
	}
}

// TestFindReadsWhatIsNotShown: / finds a message of a long run that was
// never on screen, reading the run from the store, and goes to it.
func TestFindReadsWhatIsNotShown(t *testing.T) {
	st := seedStore(t, 4_000)
	d := newDriver(t, st, 160, 40)
	d.keys("j", "enter")
	d.keys("/")
	d.typeText("tests pass. 777")
	d.keys("enter")
	s := d.plain()
	assert.Contains(t, s, "match 1 of 1")
	assert.Contains(t, s, "Done; tests pass. 777")
	r, ok := d.a.tree.selected()
	require.True(t, ok)
	assert.Equal(t, int32(4*777+3), r.msg)
}

// TestForkScreenOfALongRun: f reads where a long run can be cut from the
// store, in a command, and opens the Fork screen on it; an answer for a
// tree read again since opens nothing.
func TestForkScreenOfALongRun(t *testing.T) {
	st := seedStore(t, 4_000)
	drv := &fork.Driver{Store: st, Harnesses: harness.NewRegistry(&script.Harness{}), DefaultHarness: "script"}
	d := newDriverWith(t, st, 160, 40, drv)
	d.keys("j", "enter")
	tr := d.a.tree
	tr.cursor = 2001 // message 2002: a tool call, its result next
	tr.clamp()
	d.run(d.a.syncDetail())
	d.keys("f")
	require.NotNil(t, d.a.dialog)
	expl, ok := d.a.dialog.explain()
	require.True(t, ok)
	assert.Contains(t, expl, "asked 2002, snapped to 2001: would orphan tool calls")
	assert.Contains(t, expl, "of 4000")
	assert.Contains(t, d.plain(), "from message 2002 of 4000 (assistant)")
	d.keys("esc")
	require.Nil(t, d.a.dialog)

	cmd := d.a.openDialog()
	require.NotNil(t, cmd)
	msg := cmd()
	d.send(treeLoadedMsg{id: tr.data.root.Run.ID, gen: tr.gen, data: tr.data, reload: true})
	d.send(msg)
	assert.Nil(t, d.a.dialog, "the cut read for the tree as it was opens nothing")
}
