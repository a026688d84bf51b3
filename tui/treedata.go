package tui

import (
	"cmp"
	"slices"

	"tine/model"
)

// treeData is one loaded fork tree: every run with its own messages and the
// boundaries of its full transcript. A fork's inherited prefix is not
// copied: full transcripts are only assembled to find pair-safe cuts.
type treeData struct {
	root  *model.Node
	runs  []*runData // parents before children
	index map[string]int
	// replays says how each run that is a replay was made (rule 9).
	replays map[string]model.Replay
}

// runData is one run of a loaded tree.
type runData struct {
	node   *model.Node
	own    []model.Message // messages ForkAt.. of the run
	bounds model.Boundaries
	parent int // index in treeData.runs, -1 for the root
	// children are indexes of the forks made from this run, by boundary.
	children []int
	// subagent runs were started by a tool call of the parent, at message
	// spawnedAt; they inherit nothing. subagents lists this run's.
	subagent  bool
	spawnedAt int
	subagents []int
	// depth is how many forks deep the run is (the root 0, its forks 1);
	// below counts the forks and subagents shown under it, at any depth.
	depth, below int
	// aa sums up the run's own replays (how many reproduced it).
	aa model.AARate
}

func (r *runData) run() model.Run { return r.node.Run }

// message returns the message at absolute index i, which must be own.
func (r *runData) message(i int) *model.Message { return &r.own[i-r.node.Run.ForkAt] }

// newTreeData builds a tree from its runs and each run's own messages.
func newTreeData(runs []model.Run, own map[string][]model.Message) *treeData {
	roots := model.BuildTrees(runs)
	t := &treeData{index: map[string]int{}}
	if len(roots) == 0 {
		return t
	}
	// The tree's root is the run without a parent that no tool call
	// spawned; stray roots (forks whose parent is missing) hang under it so
	// nothing is dropped; subagents hang under the run that spawned them.
	t.root = roots[0]
	for _, r := range roots {
		if r.Run.ParentID == "" && r.Run.SpawnedBy == "" {
			t.root = r
			break
		}
	}
	full := map[string][]model.Message{}
	var add func(n *model.Node, parent int, subagent bool)
	add = func(n *model.Node, parent int, subagent bool) {
		rd := &runData{node: n, own: own[n.Run.ID], parent: parent, subagent: subagent}
		// The fork's own message count is what was loaded, whatever the row says.
		rd.node.Run.OwnMessages = len(rd.own)
		var transcript []model.Message
		if parent >= 0 && !subagent {
			p := t.runs[parent].run().ID
			k := min(n.Run.ForkAt, len(full[p]))
			transcript = append(slices.Clip(full[p][:k]), rd.own...)
		} else {
			transcript = rd.own
		}
		full[n.Run.ID] = transcript
		rd.bounds = model.NewBoundaries(transcript)
		idx := len(t.runs)
		t.index[n.Run.ID] = idx
		t.runs = append(t.runs, rd)
		if parent >= 0 {
			if subagent {
				prd := t.runs[parent]
				rd.spawnedAt = spawnPoint(prd, n.Run.SpawnedCall)
				prd.subagents = append(prd.subagents, idx)
			} else {
				t.runs[parent].children = append(t.runs[parent].children, idx)
			}
		}
		for _, c := range n.Children {
			add(c, idx, false)
		}
	}
	add(t.root, -1, false)
	// Subagents come after every run that could have spawned them.
	var later []*model.Node
	for _, r := range roots {
		if r == t.root {
			continue
		}
		if r.Run.SpawnedBy != "" {
			later = append(later, r)
			continue
		}
		r.Parent = t.root
		add(r, 0, false)
	}
	for len(later) > 0 {
		var wait []*model.Node
		for _, r := range later {
			if pi, ok := t.index[r.Run.SpawnedBy]; ok {
				add(r, pi, true)
			} else {
				wait = append(wait, r)
			}
		}
		if len(wait) == len(later) {
			break // spawned by runs outside this tree: not shown here
		}
		later = wait
	}
	// Each subagent goes right under the call that started it, whenever it
	// was created; those no call started (a compaction) go at the end.
	for _, rd := range t.runs {
		slices.SortStableFunc(rd.subagents, func(x, y int) int {
			return cmp.Compare(t.runs[x].spawnedAt, t.runs[y].spawnedAt)
		})
	}
	// Parents come before their forks and subagents: depths go forward,
	// counts of what is below go backward.
	for _, rd := range t.runs[1:] {
		rd.depth = t.runs[rd.parent].depth + 1
	}
	for i := len(t.runs) - 1; i > 0; i-- {
		rd := t.runs[i]
		if !rd.omitted() {
			t.runs[rd.parent].below += 1 + rd.below
		}
	}
	return t
}

// omitted reports whether the fork's line is left out of the tree: it was
// replaced by its regenerations (rule 7) and nothing hangs under it.
func (r *runData) omitted() bool {
	return r.run().Hidden && len(r.children) == 0 && len(r.subagents) == 0
}

// spawnPoint is the index of the message in r that made tool call id (the
// run's last message when there is no such call, or no call at all).
func spawnPoint(r *runData, id string) int {
	if id == "" {
		return r.run().ForkAt + len(r.own) - 1
	}
	for i := len(r.own) - 1; i >= 0; i-- {
		for _, p := range r.own[i].Parts {
			if p.Kind == model.ToolCall && p.ToolCallID == id {
				return r.run().ForkAt + i
			}
		}
	}
	return r.run().ForkAt + len(r.own) - 1
}

// rowKind tells a message row from a fork header.
type rowKind uint8

const (
	rowMessage rowKind = iota
	rowFork
)

// row is one line of the tree screen.
type row struct {
	kind  rowKind
	depth int16
	run   int32 // index in treeData.runs
	msg   int32 // absolute message index, for message rows
}

// rowKey identifies a row across rebuilds, for caches and the cursor.
type rowKey struct {
	run, msg int32
	kind     rowKind
}

func (r row) key() rowKey { return rowKey{run: r.run, msg: r.msg, kind: r.kind} }

// flatten lays the tree out as rows: a run's own messages, with each fork's
// header after the message at its boundary and, unless folded, the fork's
// own messages under it, one level deeper.
func (t *treeData) flatten(folded map[string]bool) []row {
	if len(t.runs) == 0 {
		return nil
	}
	n := 0
	for _, r := range t.runs {
		n += len(r.own) + 1
	}
	rows := make([]row, 0, n)
	var emitRun func(ri int, depth int16)
	emitFork := func(ci int, depth int16) {
		if t.runs[ci].omitted() {
			return // replaced by its regenerations (rule 7): nothing of it is shown
		}
		rows = append(rows, row{kind: rowFork, depth: depth, run: int32(ci), msg: -1})
		if !folded[t.runs[ci].run().ID] {
			emitRun(ci, depth)
		}
	}
	emitRun = func(ri int, depth int16) {
		r := t.runs[ri]
		start := r.run().ForkAt
		if r.subagent {
			start = 0
		}
		end := start + len(r.own)
		if r.run().Hidden {
			// A hidden run was replaced (rule 7 in ARCHITECTURE.md): what its
			// forks share with it stays, its own continuation is not shown.
			last := start
			for _, c := range r.children {
				last = max(last, t.runs[c].run().ForkAt)
			}
			end = min(end, last)
		}
		ci, si := 0, 0
		// Forks made inside the inherited prefix come first.
		for ci < len(r.children) && t.runs[r.children[ci]].run().ForkAt <= start {
			emitFork(r.children[ci], depth+1)
			ci++
		}
		for i := start; i < end; i++ {
			rows = append(rows, row{kind: rowMessage, depth: depth, run: int32(ri), msg: int32(i)})
			for si < len(r.subagents) && t.runs[r.subagents[si]].spawnedAt <= i {
				emitFork(r.subagents[si], depth+1)
				si++
			}
			for ci < len(r.children) && t.runs[r.children[ci]].run().ForkAt <= i+1 {
				emitFork(r.children[ci], depth+1)
				ci++
			}
		}
		for ; si < len(r.subagents); si++ {
			emitFork(r.subagents[si], depth+1)
		}
		for ; ci < len(r.children); ci++ {
			emitFork(r.children[ci], depth+1)
		}
	}
	emitRun(0, 0)
	return rows
}

// transcript assembles run ri's full transcript: its ancestors' prefix and
// its own messages. It copies message headers (not their parts), so it is
// for occasional use, like opening the fork dialog.
func (t *treeData) transcript(ri int) []model.Message {
	r := t.runs[ri]
	if r.parent < 0 || r.subagent {
		return r.own
	}
	prefix := t.transcript(r.parent)
	k := min(r.run().ForkAt, len(prefix))
	return append(slices.Clip(prefix[:k]), r.own...)
}
