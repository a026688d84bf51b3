package model

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBuildTreesAndTotals(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	runs := []Run{
		{ID: "fork-b", TreeID: "root", ParentID: "root", ForkAt: 5, CreatedAt: t0.Add(3 * time.Minute), OwnMessages: 2, Usage: Usage{InputTokens: 10, OutputTokens: 1}, CostUSD: 0.5},
		{ID: "root", TreeID: "root", CreatedAt: t0, OwnMessages: 6, Usage: Usage{InputTokens: 100, OutputTokens: 10}, CostUSD: 1},
		{ID: "fork-a", TreeID: "root", ParentID: "root", ForkAt: 1, CreatedAt: t0.Add(5 * time.Minute), OwnMessages: 3, Usage: Usage{InputTokens: 20, OutputTokens: 2}},
		{ID: "grandchild", TreeID: "root", ParentID: "fork-a", ForkAt: 2, CreatedAt: t0.Add(6 * time.Minute), OwnMessages: 1},
		{ID: "other", TreeID: "other", CreatedAt: t0.Add(time.Hour), OwnMessages: 2},
		{ID: "orphan", TreeID: "gone", ParentID: "gone", ForkAt: 3, CreatedAt: t0.Add(-time.Hour)},
	}
	roots := BuildTrees(runs)
	require.Len(t, roots, 3)
	assert.Equal(t, []string{"other", "root", "orphan"}, []string{roots[0].Run.ID, roots[1].Run.ID, roots[2].Run.ID}, "newest first")

	root := roots[1]
	require.Len(t, root.Children, 2)
	assert.Equal(t, "fork-a", root.Children[0].Run.ID, "children by fork boundary")
	gc := root.Find("grandchild")
	require.NotNil(t, gc)
	assert.Equal(t, 2, gc.Depth())
	var chain []string
	for _, n := range gc.Ancestors() {
		chain = append(chain, n.Run.ID)
	}
	assert.Equal(t, []string{"root", "fork-a", "grandchild"}, chain)

	u, cost := TreeTotals(root)
	assert.Equal(t, Usage{InputTokens: 130, OutputTokens: 13}, u, "each run counts only its own spending")
	assert.InDelta(t, 1.5, cost, 1e-9)
	nruns, nmsgs := Count(root)
	assert.Equal(t, 4, nruns)
	assert.Equal(t, 12, nmsgs, "a shared prefix is counted once")
}

func TestOwnUsageSkipsInherited(t *testing.T) {
	msgs := []Message{{Usage: Usage{InputTokens: 100}}, {Usage: Usage{InputTokens: 50}}, {Usage: Usage{OutputTokens: 7}}}
	assert.Equal(t, Usage{OutputTokens: 7}, OwnUsage(msgs, 2))
	assert.Equal(t, Usage{InputTokens: 150, OutputTokens: 7}, OwnUsage(msgs, 0))
}

func TestSharedPrefix(t *testing.T) {
	runs := []Run{
		{ID: "r", OwnMessages: 10},
		{ID: "a", ParentID: "r", ForkAt: 6, OwnMessages: 4},
		{ID: "b", ParentID: "r", ForkAt: 4, OwnMessages: 2},
		{ID: "a1", ParentID: "a", ForkAt: 8, OwnMessages: 1},
		{ID: "a2", ParentID: "a", ForkAt: 3, OwnMessages: 1},
		{ID: "x", OwnMessages: 3},
	}
	roots := BuildTrees(runs)
	var r, x *Node
	for _, n := range roots {
		if n.Run.ID == "r" {
			r = n
		} else {
			x = n
		}
	}
	get := func(id string) *Node { return r.Find(id) }
	tests := []struct {
		a, b string
		want int
	}{
		{"r", "r", 10},
		{"r", "a", 6},
		{"a", "b", 4},
		{"a", "a1", 8},
		{"a1", "b", 4},
		{"a1", "a2", 3},
		{"a2", "b", 3},
		{"a", "a2", 3},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, SharedPrefix(get(tt.a), get(tt.b)), "%s vs %s", tt.a, tt.b)
		assert.Equal(t, tt.want, SharedPrefix(get(tt.b), get(tt.a)), "%s vs %s", tt.b, tt.a)
	}
	assert.Zero(t, SharedPrefix(r, x))
}

func TestBuildTreesPutsSubagentsInTheOrderTheyStarted(t *testing.T) {
	at := func(min int) time.Time { return time.Date(2026, 1, 2, 3, min, 0, 0, time.UTC) }
	runs := []Run{
		{ID: "old", TreeID: "old", CreatedAt: at(0)},
		{ID: "main", TreeID: "main", CreatedAt: at(1)},
		{ID: "late", TreeID: "late", SpawnedBy: "main", SpawnedCall: "t2", CreatedAt: at(20)},
		{ID: "compact", TreeID: "compact", SpawnedBy: "main", CreatedAt: at(10)},
		{ID: "early", TreeID: "early", SpawnedBy: "main", SpawnedCall: "t1", CreatedAt: at(5)},
		{ID: "new", TreeID: "new", CreatedAt: at(30)},
	}
	var ids []string
	for _, r := range BuildTrees(runs) {
		ids = append(ids, r.Run.ID)
	}
	// Trees newest first; then subagents as they started, the one no call
	// started (a compaction agent) last.
	assert.Equal(t, []string{"new", "main", "old", "early", "late", "compact"}, ids)
}
