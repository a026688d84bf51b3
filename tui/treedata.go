package tui

import (
	"cmp"
	"context"
	"math"
	"slices"

	"tine/model"
)

// treeData is one loaded fork tree: every run, how many messages it has
// of its own and where they can be cut, and the own messages read so far.
// A fork's inherited prefix is not copied: it shows under its parent.
// Opening a tree reads its structure; message bodies are read a page at
// a time for the rows on screen (bodies), so a 200,000-message run opens
// about as fast as a small one (ARCHITECTURE.md, "Reading a tree").
type treeData struct {
	root  *model.Node
	runs  []*runData // parents before children
	index map[string]int
	// replays says how each run that is a replay was made (rule 9).
	replays map[string]model.Replay
	// merges are the merge lines of each run (by index), in the order
	// they show; mergedInto the merges each merged fork went into
	// (setMerges).
	merges     map[int][]mergeLine
	mergedInto map[string][]model.Merge
	// src reads own messages a page at a time; nil when every run's
	// messages are in memory already (newTreeData).
	src bodySource
}

// bodySource reads a run's own messages: those with seq from up to to,
// or each in turn (a search).
type bodySource interface {
	OwnMessagesRange(ctx context.Context, runID string, from, to int) ([]model.Message, error)
	EachOwnMessage(ctx context.Context, runID string, fn func(seq int, m model.Message) error) error
}

// runData is one run of a loaded tree.
type runData struct {
	node *model.Node
	// n is how many messages the run has of its own, ForkAt on (from 0
	// for a subagent, which inherits nothing).
	n int
	// bounds answers where the run's own messages can be cut: K from
	// ForkAt+1 to the run's end (model.BoundariesOf).
	bounds model.Boundaries
	body   *bodies
	// label is the run's first prompt on a line ("" when it has none), what
	// a fork without a name is called; openEnd says its own messages end
	// with calls nobody answered.
	label   string
	openEnd bool
	parent  int // index in treeData.runs, -1 for the root
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

// first is the index of the run's first own message.
func (r *runData) first() int { return r.node.Run.ForkAt }

// placeholder is what a message not read yet shows as.
var placeholder = model.Message{}

// message returns the own message at absolute index i, or an empty
// placeholder while its page is not read yet (loaded says which).
func (r *runData) message(i int) *model.Message {
	if m := r.body.get(i - r.first()); m != nil {
		return m
	}
	p := placeholder
	return &p
}

// loaded reports whether the own message at absolute index i is read.
func (r *runData) loaded(i int) bool { return r.body.get(i-r.first()) != nil }

// ownMessages returns the run's own messages from absolute index from up
// to to: those read already, else read now from src (never in Update).
func (t *treeData) ownMessages(ctx context.Context, ri, from, to int) ([]model.Message, error) {
	r := t.runs[ri]
	from, to = max(from, r.first()), min(to, r.first()+r.n)
	if from >= to {
		return nil, nil
	}
	if msgs, ok := r.body.span(from-r.first(), to-r.first()); ok || t.src == nil {
		return msgs, nil
	}
	return t.src.OwnMessagesRange(ctx, r.run().ID, from, to)
}

// newTreeData builds a tree from its runs and each run's own messages,
// all in memory.
func newTreeData(runs []model.Run, own map[string][]model.Message) *treeData {
	t := buildTree(runs, func(n *model.Node) *runData {
		msgs := own[n.Run.ID]
		return &runData{node: n, n: len(msgs), body: newBodies(msgs), label: firstPrompt(msgs), openEnd: endsOnOpenCalls(msgs)}
	})
	// Boundaries span each run's whole transcript, worked out from its
	// messages and its ancestors'.
	full := map[string][]model.Message{}
	for _, rd := range t.runs {
		msgs := own[rd.run().ID]
		transcript := msgs
		if rd.parent >= 0 && !rd.subagent {
			p := full[t.runs[rd.parent].run().ID]
			transcript = append(slices.Clip(p[:min(rd.run().ForkAt, len(p))]), msgs...)
		}
		full[rd.run().ID] = transcript
		rd.bounds = model.NewBoundaries(transcript)
		if rd.subagent {
			rd.spawnedAt = spawnPoint(t.runs[rd.parent], own[t.runs[rd.parent].run().ID], rd.run().SpawnedCall)
		}
	}
	t.finish()
	return t
}

// buildTree lays runs out as a tree, parents before children, with the
// runData made makes of each node; subagents' spawn points are the
// caller's to set, then finish.
func buildTree(runs []model.Run, made func(*model.Node) *runData) *treeData {
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
	var add func(n *model.Node, parent int, subagent bool)
	add = func(n *model.Node, parent int, subagent bool) {
		rd := made(n)
		rd.parent, rd.subagent = parent, subagent
		// The fork's own message count is what was read, whatever the row says.
		rd.node.Run.OwnMessages = rd.n
		idx := len(t.runs)
		t.index[n.Run.ID] = idx
		t.runs = append(t.runs, rd)
		if parent >= 0 {
			if subagent {
				t.runs[parent].subagents = append(t.runs[parent].subagents, idx)
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
	return t
}

// finish orders each run's subagents by where they were started and
// counts depths and what is below each run.
func (t *treeData) finish() {
	// Each subagent goes right under the call that started it, whenever it
	// was created; those no call started (a compaction) go at the end.
	for _, rd := range t.runs {
		slices.SortStableFunc(rd.subagents, func(x, y int) int {
			return cmp.Compare(t.runs[x].spawnedAt, t.runs[y].spawnedAt)
		})
	}
	if len(t.runs) == 0 {
		return
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
}

// firstPrompt is the first message a person typed of msgs, on a line.
func firstPrompt(msgs []model.Message) string {
	for _, m := range msgs {
		if m.IsPrompt() {
			return model.OneLine(m.PlainText(), 40)
		}
	}
	return ""
}

// omitted reports whether the fork's line is left out of the tree: it was
// replaced by its regenerations (rule 7) and nothing hangs under it.
func (r *runData) omitted() bool {
	return r.run().Hidden && len(r.children) == 0 && len(r.subagents) == 0
}

// spawnPoint is the index of the message of r's own, msgs, that made tool
// call id (the run's last message when there is no such call, or no call
// at all).
func spawnPoint(r *runData, msgs []model.Message, id string) int {
	if id == "" {
		return r.run().ForkAt + len(msgs) - 1
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		for _, p := range msgs[i].Parts {
			if p.Kind == model.ToolCall && p.ToolCallID == id {
				return r.run().ForkAt + i
			}
		}
	}
	return r.run().ForkAt + len(msgs) - 1
}

// rowKind tells a message row from a fork header and a merge line.
type rowKind uint8

const (
	rowMessage rowKind = iota
	rowFork
	// rowMerge is a fork merged into the run (tine merge, M), right
	// before the merge's prompt: msg is the prompt's index, sub which of
	// the forks merged there.
	rowMerge
)

// row is one line of the tree screen.
type row struct {
	kind  rowKind
	sub   uint8 // which merge line at msg, for merge rows
	depth int16
	run   int32 // index in treeData.runs
	msg   int32 // absolute message index, for message and merge rows
}

// rowKey identifies a row across rebuilds, for caches and the cursor.
type rowKey struct {
	run, msg int32
	kind     rowKind
	sub      uint8
}

func (r row) key() rowKey { return rowKey{run: r.run, msg: r.msg, kind: r.kind, sub: r.sub} }

// mergeLine is one fork merged into a run, shown right before the
// merge's prompt, its message at.
type mergeLine struct {
	at   int
	fork string
}

// maxMergeLines bounds the merge lines shown before one message (row.sub).
const maxMergeLines = 255

// setMerges takes the tree's merges (store.TreeMerges): a line for each
// fork merged, in its run, before the merge's prompt; and, for each
// merged fork, where it went.
func (t *treeData) setMerges(merges []model.Merge) {
	t.merges, t.mergedInto = map[int][]mergeLine{}, map[string][]model.Merge{}
	for _, m := range merges {
		ri, ok := t.index[m.RunID]
		if !ok {
			continue
		}
		for _, f := range m.Forks {
			t.merges[ri] = append(t.merges[ri], mergeLine{at: m.At, fork: f})
			t.mergedInto[f] = append(t.mergedInto[f], m)
		}
	}
	for _, lines := range t.merges {
		slices.SortStableFunc(lines, func(x, y mergeLine) int { return cmp.Compare(x.at, y.at) })
	}
}

// mergeAt is the merge line r shows (a rowMerge), false when gone.
func (t *treeData) mergeAt(r row) (mergeLine, bool) {
	n := 0
	for _, l := range t.merges[int(r.run)] {
		if l.at != int(r.msg) {
			continue
		}
		if n == int(r.sub) {
			return l, true
		}
		n++
	}
	return mergeLine{}, false
}

// flatten lays the tree out as rows: a run's own messages, with each fork's
// header after the message at its boundary and, unless folded, the fork's
// own messages under it, one level deeper.
func (t *treeData) flatten(folded map[string]bool) []row {
	if len(t.runs) == 0 {
		return nil
	}
	n := 0
	for _, r := range t.runs {
		n += r.n + 1
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
		// A run's merge lines go right before the merge's prompt.
		merges, mi := t.merges[ri], 0
		mergesBefore := func(i int) {
			sub, at := 0, -1
			for ; mi < len(merges) && merges[mi].at <= i; mi++ {
				if merges[mi].at != at {
					sub, at = 0, merges[mi].at
				}
				if sub < maxMergeLines {
					rows = append(rows, row{kind: rowMerge, sub: uint8(sub), depth: depth, run: int32(ri), msg: int32(merges[mi].at)})
				}
				sub++
			}
		}
		start := r.run().ForkAt
		if r.subagent {
			start = 0
		}
		end := start + r.n
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
			// Up to the next fork or subagent, message after message.
			stop := end
			if si < len(r.subagents) {
				stop = min(stop, max(t.runs[r.subagents[si]].spawnedAt, i))
			}
			if ci < len(r.children) {
				stop = min(stop, max(t.runs[r.children[ci]].run().ForkAt-1, i))
			}
			for ; i < stop; i++ {
				mergesBefore(i)
				rows = append(rows, row{kind: rowMessage, depth: depth, run: int32(ri), msg: int32(i)})
			}
			if i == end {
				break
			}
			mergesBefore(i)
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
		if !r.run().Hidden {
			// A merge whose prompt is not stored (yet): at the run's end.
			mergesBefore(math.MaxInt)
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

// transcript assembles run ri's full transcript from memory: its
// ancestors' prefix and its own messages. It is for trees whose messages
// are all in memory (src nil).
func (t *treeData) transcript(ri int) []model.Message {
	r := t.runs[ri]
	own, _ := r.body.span(0, r.n)
	if r.parent < 0 || r.subagent {
		return own
	}
	prefix := t.transcript(r.parent)
	k := min(r.run().ForkAt, len(prefix))
	return append(slices.Clip(prefix[:k]), own...)
}
