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

// forkTree is a 400-message run with n forks: half made from the root,
// the rest from earlier forks (up to four deep); every seventh fork is
// pending and empty.
func forkTree(n int) *treeData {
	root := model.Run{ID: "root", TreeID: "root", Title: "many forks", Harness: "claude", Status: model.Completed, CreatedAt: t0}
	var msgs []model.Message
	for i := 0; len(msgs) < 400; i++ {
		id := fmt.Sprintf("c%d", i)
		msgs = append(msgs, text(model.User, fmt.Sprintf("step %d", i)), callMsg(id), resultMsg(id, "ok"), text(model.Assistant, "done "+fmt.Sprint(i)))
	}
	runs := []model.Run{root}
	own := map[string][]model.Message{root.ID: msgs}
	depth := map[string]int{root.ID: 0}
	forkAt := map[string]int{}
	for i := 0; i < n; i++ {
		parent, k := root.ID, 4*(i%100)+1
		if i >= n/2 {
			// A fork of an earlier fork (not a pending one: it has no
			// messages to branch after), at most four deep.
			p := runs[len(runs)-1-i%5] // a recent fork, often nested
			if i%3 == 0 {
				p = runs[1+i%100] // one of the root's
			}
			if p.Status != model.Pending && depth[p.ID] < 4 {
				parent, k = p.ID, forkAt[p.ID]+1
			}
		}
		r := model.Run{ID: fmt.Sprintf("fork%03d", i), TreeID: root.ID, ParentID: parent, ForkAt: k, Name: fmt.Sprintf("try-%d", i),
			Harness: "claude", Status: model.Completed, CreatedAt: t0.Add(time.Duration(i) * time.Minute)}
		if i%7 == 3 {
			r.Status = model.Pending
		} else {
			own[r.ID] = []model.Message{text(model.User, fmt.Sprintf("try %d", i)), text(model.Assistant, "ok "+fmt.Sprint(i))}
		}
		depth[r.ID], forkAt[r.ID] = depth[parent]+1, k
		runs = append(runs, r)
	}
	return newTreeData(runs, own)
}

func TestForkTreeFixture(t *testing.T) {
	t.Parallel()
	data := forkTree(200)
	require.Len(t, data.runs, 201)
	deepest := 0
	for _, rd := range data.runs {
		deepest = max(deepest, rd.depth)
	}
	assert.GreaterOrEqual(t, deepest, 3, "forks of forks")
	assert.Equal(t, 200, data.runs[0].below, "every fork is below the root")
}

// TestFoldByDepth: a digit folds every fork from that depth down, and a
// folded fork says how many forks it hides; 0 unfolds them all.
func TestFoldByDepth(t *testing.T) {
	t.Parallel()
	ts := newTreeScreen(forkTree(200))
	ts.setSize(200, 48)
	all := len(ts.data.flatten(nil))
	require.Equal(t, all, len(ts.rows), "everything open at first")

	// Put the cursor deep inside a fork of a fork.
	deep := -1
	for i, r := range ts.rows {
		if r.kind == rowMessage && ts.data.runs[r.run].depth >= 3 {
			deep = i
			break
		}
	}
	require.GreaterOrEqual(t, deep, 0)
	ts.cursor = deep
	deepRun := ts.rows[deep].run

	st := treeKey(&ts, "1")
	assert.Contains(t, st, "folded 200 forks from depth 1 down")
	forks := 0
	for _, r := range ts.rows {
		if r.kind == rowFork {
			forks++
			assert.EqualValues(t, 1, ts.data.runs[r.run].depth, "only the root's forks show")
		} else {
			assert.EqualValues(t, 0, r.run, "and the root's messages")
		}
	}
	assert.Equal(t, len(ts.data.runs[0].children), forks)
	sel, _ := ts.selected()
	assert.Equal(t, rowFork, sel.kind, "the cursor goes to the fork that hides its row")
	for ri := int(deepRun); ; ri = ts.data.runs[ri].parent {
		if ts.data.runs[ri].depth == 1 {
			assert.EqualValues(t, ri, sel.run)
			break
		}
	}
	// The folded fork's line counts what it hides.
	line := ansi.Strip(ts.view(&[]Styles{NewStyles(true)}[0]))
	hides := ts.data.runs[sel.run].below
	require.Positive(t, hides)
	assert.Contains(t, line, fmt.Sprintf("+%d fork", hides))

	treeKey(&ts, "2")
	for _, r := range ts.rows {
		if r.kind == rowFork {
			assert.LessOrEqual(t, ts.data.runs[r.run].depth, 2)
			assert.Equal(t, ts.data.runs[r.run].depth == 2, ts.folded[ts.data.runs[r.run].run().ID])
		}
	}
	assert.Less(t, len(ts.rows), all)

	st = treeKey(&ts, "0")
	assert.Contains(t, st, "unfolded every fork")
	assert.Equal(t, all, len(ts.rows))
}

// TestNextForkWithChanges: > and < visit the forks that have messages
// of their own, in tree order, skipping empty pending ones, opening the
// folded forks they are in.
func TestNextForkWithChanges(t *testing.T) {
	t.Parallel()
	ts := newTreeScreen(forkTree(200))
	ts.setSize(200, 48)
	var want []string
	for _, r := range ts.data.flatten(nil) {
		if rd := ts.data.runs[r.run]; r.kind == rowFork && rd.n > 0 {
			want = append(want, rd.run().Name)
		}
	}
	require.Less(t, len(want), 200, "some forks are empty")
	treeKey(&ts, "1") // everything folded
	ts.cursor = 0
	var got []string
	for range want {
		st := treeKey(&ts, ">")
		require.Contains(t, st, "with changes")
		sel, _ := ts.selected()
		require.Equal(t, rowFork, sel.kind)
		got = append(got, ts.data.runs[sel.run].run().Name)
	}
	assert.Equal(t, want, got)
	st := treeKey(&ts, ">")
	assert.Contains(t, st, "fork 1 of")
	assert.Contains(t, st, "(from the top)")
	st = treeKey(&ts, "<")
	assert.Contains(t, st, "(from the bottom)")
	sel, _ := ts.selected()
	assert.Equal(t, want[len(want)-1], ts.data.runs[sel.run].run().Name)
	treeKey(&ts, "<")
	sel, _ = ts.selected()
	assert.Equal(t, want[len(want)-2], ts.data.runs[sel.run].run().Name)
}

// TestOverviewKeysLeaveOthersFree: the new keys do not take ctrl+r, R or
// p, nor any key the tree already answers.
func TestOverviewKeysLeaveOthersFree(t *testing.T) {
	t.Parallel()
	k := DefaultKeyMap().Tree
	mine := append(append(append([]string{}, k.FoldDepth.Keys()...), k.NextChanged.Keys()...), k.PrevChanged.Keys()...)
	mine = append(mine, k.Pager.Keys()...)
	mine = append(mine, k.Editor.Keys()...)
	mine = append(mine, k.Agent.Keys()...)
	others := [][]string{k.Up.Keys(), k.Down.Keys(), k.PageUp.Keys(), k.PageDown.Keys(), k.Top.Keys(), k.Bottom.Keys(),
		k.Into.Keys(), k.Out.Keys(), k.NextSibling.Keys(), k.PrevSibling.Keys(), k.Fold.Keys(), k.FoldAll.Keys(),
		k.Focus.Keys(), k.Detail.Keys(), k.NextCheckpoint.Keys(), k.PrevCheckpoint.Keys(), k.Fork.Keys(), k.Cancel.Keys(),
		k.Compare.Keys(), k.Retry.Keys(), k.NextTurn.Keys(), k.Find.Keys(), k.NextMatch.Keys(), k.PrevMatch.Keys(), k.Copy.Keys(),
		{"ctrl+r", "R", "p"}}
	for _, m := range mine {
		for _, o := range others {
			assert.NotContains(t, o, m)
		}
	}
}

// TestOverviewInTheApp: the keys work through the program's key handling
// and the help names them.
func TestOverviewInTheApp(t *testing.T) {
	t.Parallel()
	d := newDriver(t, seedStore(t, 0), 120, 35)
	d.keys("enter", "1")
	s := d.plain()
	assert.Contains(t, s, "▸⑂ ask-again +1 fork", "ask-again hides the nested fork")
	assert.Contains(t, s, "folded 3 forks from depth 1 down")
	d.keys("0", "g", ">")
	sel, _ := d.a.tree.selected()
	assert.Equal(t, "ask-again", d.a.tree.data.runs[sel.run].run().Name)
	d.keys(">")
	sel, _ = d.a.tree.selected()
	assert.Equal(t, "terse", d.a.tree.data.runs[sel.run].run().Name, "the empty pending nested fork is skipped")
	d.send(tea.KeyPressMsg{Code: tea.KeyF1})
	var help strings.Builder
	for range 10 {
		help.WriteString(d.plain())
		d.keys("j")
	}
	for _, s := range []string{"1-9", "fold forks from depth N down", "next fork with changes", "previous fork with changes", "read it in $PAGER", "open the run in its agent"} {
		assert.Contains(t, help.String(), s)
	}
}
