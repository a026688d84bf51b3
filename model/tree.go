package model

import (
	"cmp"
	"slices"
)

// Node is a run in its tree, with the forks made from it.
type Node struct {
	Run      Run
	Parent   *Node
	Children []*Node // ordered by fork boundary, then creation
}

// Depth is how many forks lie between n and its root.
func (n *Node) Depth() int {
	d := 0
	for p := n.Parent; p != nil; p = p.Parent {
		d++
	}
	return d
}

// Walk visits n and every run below it, parents before children.
func (n *Node) Walk(visit func(*Node)) {
	visit(n)
	for _, c := range n.Children {
		c.Walk(visit)
	}
}

// Find returns the node of run id in n's subtree, or nil.
func (n *Node) Find(id string) *Node {
	var found *Node
	n.Walk(func(x *Node) {
		if found == nil && x.Run.ID == id {
			found = x
		}
	})
	return found
}

// Ancestors returns the chain from the root down to n, n included.
func (n *Node) Ancestors() []*Node {
	var chain []*Node
	for x := n; x != nil; x = x.Parent {
		chain = append(chain, x)
	}
	slices.Reverse(chain)
	return chain
}

// BuildTrees assembles runs into trees. A run whose parent is missing from
// runs becomes a root of its own, so nothing is dropped. Roots come newest
// first; children by fork boundary, then creation time. Subagents (runs a
// tool call spawned, shown under that call) are no trees: they come after
// the other roots in the order they started, those that no call started
// (a compaction agent) last, so whoever walks them along their spawner's
// messages meets each in turn.
func BuildTrees(runs []Run) []*Node {
	nodes := make(map[string]*Node, len(runs))
	for _, r := range runs {
		nodes[r.ID] = &Node{Run: r}
	}
	var roots []*Node
	for _, r := range runs {
		n := nodes[r.ID]
		if p, ok := nodes[r.ParentID]; ok && r.ParentID != "" && r.ParentID != r.ID {
			n.Parent = p
			p.Children = append(p.Children, n)
		} else {
			roots = append(roots, n)
		}
	}
	for _, n := range nodes {
		slices.SortFunc(n.Children, func(a, b *Node) int {
			if c := cmp.Compare(a.Run.ForkAt, b.Run.ForkAt); c != 0 {
				return c
			}
			if c := a.Run.CreatedAt.Compare(b.Run.CreatedAt); c != 0 {
				return c
			}
			return cmp.Compare(a.Run.ID, b.Run.ID)
		})
	}
	slices.SortFunc(roots, func(a, b *Node) int {
		if c := cmp.Compare(spawnRank(a.Run), spawnRank(b.Run)); c != 0 {
			return c
		}
		c := b.Run.CreatedAt.Compare(a.Run.CreatedAt)
		if a.Run.SpawnedBy != "" {
			c = -c // subagents: oldest first
		}
		if c != 0 {
			return c
		}
		return cmp.Compare(a.Run.ID, b.Run.ID)
	})
	return roots
}

// spawnRank orders roots: trees, then subagents started by a known call,
// then subagents no call started.
func spawnRank(r Run) int {
	switch {
	case r.SpawnedBy == "":
		return 0
	case r.SpawnedCall != "":
		return 1
	}
	return 2
}

// TreeTotals sums the own usage and cost of every run under n. Each run
// counts only what it spent itself, so a shared prefix is never counted twice.
func TreeTotals(n *Node) (Usage, float64) {
	var u Usage
	var cost float64
	n.Walk(func(x *Node) {
		u = u.Add(x.Run.Usage)
		cost += x.Run.CostUSD
	})
	return u, cost
}

// Count returns the runs and the distinct messages under n: a fork adds only
// its own messages.
func Count(n *Node) (runs, messages int) {
	n.Walk(func(x *Node) {
		runs++
		messages += x.Run.OwnMessages
	})
	return runs, messages
}

// SharedPrefix is how many leading messages runs a and b of one tree have
// in common: the messages both read from the same stored rows. Runs of
// different trees share nothing.
func SharedPrefix(a, b *Node) int {
	ca, cb := a.Ancestors(), b.Ancestors()
	i := 0
	for i < len(ca) && i < len(cb) && ca[i] == cb[i] {
		i++
	}
	if i == 0 {
		return 0
	}
	common := ca[i-1].Run.Len()
	keep := func(chain []*Node) int {
		k := common
		for _, n := range chain[i:] {
			k = min(k, n.Run.ForkAt)
		}
		return k
	}
	return min(keep(ca), keep(cb))
}
