package tui

import (
	"fmt"
)

// A tree with hundreds of forks stays readable: digits fold every fork
// from a depth down, a folded fork says how many forks it hides, and > and
// < jump between the forks that did something.

// foldDepth folds every fork d or more forks deep and unfolds the ones
// above; 0 unfolds them all. The cursor stays on its row, or goes to the
// line of the fork that now hides it.
func (t *treeScreen) foldDepth(d int) string {
	if len(t.data.runs) == 1 {
		return "this tree has no forks to fold"
	}
	folded := 0
	for _, rd := range t.data.runs[1:] {
		f := d > 0 && rd.depth >= d
		t.folded[rd.run().ID] = f
		if f && !rd.omitted() {
			folded++
		}
	}
	t.invalidateForks()
	t.refold()
	if d == 0 {
		return "unfolded every fork (1-9 fold them from that depth down)"
	}
	return fmt.Sprintf("folded %s from depth %d down (0 unfolds them all)", plural(folded, "fork"), d)
}

// changed reports whether a fork did something: it has messages of its
// own, or a worktree a turn ran in (which may hold a diff; git is not
// asked on a key press). Empty pending forks and subagents do not count.
func (r *runData) changed() bool {
	return !r.subagent && r.parent >= 0 && !r.omitted() && (r.n > 0 || r.run().Worktree != "")
}

// nextChanged moves to the line of the next (dir 1) or previous (dir -1)
// fork that did something, in the order of the tree with every fork
// unfolded, unfolding the forks it is in.
func (t *treeScreen) nextChanged(dir int) string {
	type fork struct{ at, run int }
	var order []fork // changed forks, in view order
	pos := -1        // where the cursor is in the unfolded tree
	cur, ok := t.selected()
	for i, r := range t.data.flatten(nil) {
		if ok && r.key() == cur.key() {
			pos = i
		}
		if r.kind == rowFork && t.data.runs[r.run].changed() {
			order = append(order, fork{i, int(r.run)})
		}
	}
	if len(order) == 0 {
		return "no fork in this tree has messages or a worktree of its own yet"
	}
	pick := -1
	for i, f := range order {
		if dir > 0 && f.at > pos {
			pick = i
			break
		}
		if dir < 0 && f.at < pos {
			pick = i
		}
	}
	wrapped := ""
	if pick < 0 {
		pick, wrapped = 0, " (from the top)"
		if dir < 0 {
			pick, wrapped = len(order)-1, " (from the bottom)"
		}
	}
	ri := order[pick].run
	t.unfoldTo(t.data.runs[ri].parent)
	t.cursor = t.forkRow(int32(ri))
	t.clamp()
	return fmt.Sprintf("fork %d of %d with changes%s · > next, < previous", pick+1, len(order), wrapped)
}

// refold rebuilds the rows after folding, keeping the cursor on its row,
// or on the line of the innermost fork that hides it now.
func (t *treeScreen) refold() {
	keep, ok := t.selected()
	t.rows = t.data.flatten(t.folded)
	if !ok {
		t.clamp()
		return
	}
	for i, r := range t.rows {
		if r.key() == keep.key() {
			t.cursor = i
			t.clamp()
			return
		}
	}
	for ri := int(keep.run); ri > 0; ri = t.data.runs[ri].parent {
		if h := t.forkRow(int32(ri)); h >= 0 {
			t.cursor = h
			break
		}
	}
	t.clamp()
}
