package tui

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/harness/fork"
	"tine/harness/script"
	"tine/model"
	"tine/store"
)

// A merge shows in its run as a ⇠ line for each fork merged, right
// before the merge's message; → on one goes to that fork's ⑂ line, and
// each merged fork's line says where it went.
func TestMergeLinesInTheTree(t *testing.T) {
	t.Parallel()
	data := sampleTree()
	root := data.runs[0].run()
	data.setMerges([]model.Merge{{RunID: root.ID, At: 4, Forks: []string{"forkbbbb2222", "forkcccc3333"}}})
	ts := newTreeScreen(data)
	ts.setSize(120, 30)
	var lines []int
	for i, r := range ts.rows {
		if r.kind == rowMerge {
			lines = append(lines, i)
		}
	}
	require.Len(t, lines, 2, "a line for each fork merged")
	next := ts.rows[lines[1]+1]
	assert.Equal(t, rowMessage, next.kind)
	assert.Equal(t, int32(4), next.msg, "right before the merge's message")
	assert.Contains(t, ts.rowText(ts.rows[lines[0]], nil), "⇠ merged terse")
	assert.Contains(t, ts.rowText(ts.rows[lines[1]], nil), "⇠ merged nested")
	assert.NotEqual(t, ts.rows[lines[0]].key(), ts.rows[lines[1]].key(), "each line is a row of its own")

	// → on the second goes to nested, even when the fork it is in
	// (ask-again) is folded.
	ts.folded["forkaaaa1111"] = true
	ts.rows = data.flatten(ts.folded)
	for i, r := range ts.rows {
		if r.kind == rowMerge && r.sub == 1 {
			ts.cursor = i
		}
	}
	assert.Empty(t, ts.into())
	r, _ := ts.selected()
	assert.Equal(t, rowFork, r.kind)
	assert.Equal(t, "nested", data.runs[r.run].run().Name)
	assert.Contains(t, ts.rowText(r, nil), "⇢ merged into root0000 at 5")

	// Before any message: here one in the middle of a tool batch's results.
	data.setMerges([]model.Merge{{RunID: root.ID, At: 2, Forks: []string{"forkbbbb2222"}}})
	ts.rows = data.flatten(ts.folded)
	n := 0
	for i, r := range ts.rows {
		if r.kind == rowMerge {
			n++
			assert.Equal(t, rowKey{run: 0, msg: 2, kind: rowMessage}, ts.rows[i+1].key())
		}
	}
	assert.Equal(t, 1, n)

	// A merge whose message is not stored yet shows at its run's end.
	data.setMerges([]model.Merge{{RunID: "forkaaaa1111", At: 3, Forks: []string{"forkbbbb2222"}}})
	ts.rows = data.flatten(ts.folded)
	found := false
	for i, r := range ts.rows {
		if r.kind == rowMerge {
			found = true
			prev := ts.rows[i-1]
			assert.Equal(t, rowMessage, prev.kind)
			assert.Equal(t, "forkaaaa1111", data.runs[prev.run].run().ID)
			assert.Equal(t, int32(2), prev.msg, "after ask-again's last message")
		}
	}
	assert.True(t, found)
}

// M on a fork reads its digest into the merge dialog; what is sent is
// the text as edited, the merge's turn goes where a next turn goes (the
// root here is a session of its own: a fork at its end), and the tree
// then shows the merge line.
func TestMergeFromTheTree(t *testing.T) {
	st, d := mergeApp(t)
	d.keys("M")
	assert.Contains(t, d.a.status.text, "M merges a fork into its parent", "on the root's message")
	require.Nil(t, d.a.merge)

	d.cursorTo("ask-again")
	d.keys("M")
	require.NotNil(t, d.a.merge, d.a.status.text)
	assert.Equal(t, "dialog-merge", d.a.keysNow().id)
	s := d.plain()
	assert.Contains(t, s, "Merge into "+d.a.tree.data.runs[0].run().Label())
	assert.Contains(t, s, "is never written to: a new fork at its end gets it")
	assert.Contains(t, d.a.merge.area.Value(), `Fork "ask-again" (script`)
	assert.Contains(t, d.a.merge.area.Value(), "- Asked:\n  Only Paris, please.")

	// Edit: what is sent is what the dialog holds.
	d.typeText("Note: ")
	d.keys("ctrl+s")
	require.Nil(t, d.a.merge, "sent")
	ctx := context.Background()
	root, err := st.Run(ctx, d.a.tree.data.runs[0].run().ID)
	require.NoError(t, err)
	merges, err := st.TreeMerges(ctx, root.TreeID)
	require.NoError(t, err)
	require.Len(t, merges, 1)
	assert.NotEqual(t, root.ID, merges[0].RunID, "the session is never written to")
	msgs, _, err := st.Messages(ctx, merges[0].RunID)
	require.NoError(t, err)
	require.Greater(t, len(msgs), merges[0].At)
	prompt := msgs[merges[0].At].PlainText()
	assert.True(t, strings.HasPrefix(prompt, "Note: [tine merge] What 1 fork"), prompt)
	assert.Contains(t, d.plain(), "⇠ merged ask-again")
}

// In Compare, M merges the forks compared into their parent (the
// original's column is not one of them); a key that cannot says why.
func TestMergeFromCompare(t *testing.T) {
	st, d := mergeApp(t)
	d.cursorTo("ask-again")
	d.keys("c")
	require.Equal(t, screenCompare, d.a.screen)
	d.keys("M")
	require.NotNil(t, d.a.merge, d.a.status.text)
	assert.Contains(t, d.a.merge.forksLine(), "forks: ask-again")
	assert.NotContains(t, d.a.merge.forksLine(), "root")
	d.keys("esc")
	assert.Nil(t, d.a.merge)
	assert.Contains(t, d.a.status.text, "not merged")
	merges, err := st.TreeMerges(context.Background(), d.a.tree.data.runs[0].run().TreeID)
	require.NoError(t, err)
	assert.Empty(t, merges)
}

// A merge read for a screen the person has left opens nothing.
func TestMergeReadForAScreenLeftIsDropped(t *testing.T) {
	_, d := mergeApp(t)
	d.send(mergePreparedMsg{view: d.a.view - 1})
	assert.Nil(t, d.a.merge)
	assert.Equal(t, "tree", d.a.keysNow().id)
}

// mergeApp is the seed tree open in a program whose forks and turns run
// on the script harness.
func mergeApp(t *testing.T) (*store.Store, *driver) {
	st := seedStore(t, 0)
	drv := &fork.Driver{Store: st, Harnesses: harness.NewRegistry(&script.Harness{}), DefaultHarness: "script"}
	d := newDriverWith(t, st, 140, 40, drv)
	d.keys("enter")
	return st, d
}
