package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/internal/service"
	"tine/model"
)

// TestLsPutsAHiddenRunsForksInItsPlace: a run hidden by regenerating
// with --replace-original is not listed, and its forks are listed where
// it was, not under the sibling listed before it.
func TestLsPutsAHiddenRunsForksInItsPlace(t *testing.T) {
	db, id := importSeed(t)
	for _, name := range []string{"a", "b"} {
		_, errOut, code := tine(t, db, "fork", id, "--name", name, "-m", "hi", "--harness", "script", "--wait")
		require.Equal(t, 0, code, errOut)
	}
	_, errOut, code := tine(t, db, "fork", "b", "--name", "b2", "--regenerate", "--replace-original", "--harness", "script", "--wait")
	require.Equal(t, 0, code, errOut)
	out, _, _ := tine(t, db, "ls")
	indent := map[string]int{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) > 1 {
			indent[f[1]] = len(l) - len(strings.TrimLeft(l, " "))
		}
	}
	require.Contains(t, indent, "b2", out)
	assert.NotContains(t, indent, "b", "the hidden run is not listed")
	assert.Equal(t, indent["a"], indent["b2"], "its fork takes its place:\n"+out)
}

// TestCostIsWrittenOneWay: the same rule as the TUI's.
func TestCostIsWrittenOneWay(t *testing.T) {
	for usd, want := range map[float64]string{0: "-", 0.004: "<$0.01", 0.1234: "$0.12", 12.5: "$12.50", 250.4: "$250"} {
		assert.Equal(t, want, costText(usd), "%v", usd)
	}
}

// TestMoneyInJSONIsRounded: a cost summed in floating point (0.1 + 0.2)
// prints as 0.3 in every JSON that carries money (ls, show, export,
// compare, fork and run), not 0.30000000000000004.
func TestMoneyInJSONIsRounded(t *testing.T) {
	t.Parallel()
	db, st, parent := openSeed(t)
	id, ctx := parent.ID, context.Background()
	a := &model.Run{ParentID: id, TreeID: parent.TreeID, ForkAt: 1, Name: "a", Harness: "script", Status: model.Completed}
	b := &model.Run{ParentID: id, TreeID: parent.TreeID, ForkAt: 1, Name: "b", Harness: "script", Status: model.Completed}
	require.NoError(t, st.CreateForks(ctx, []*model.Run{a, b}))
	for _, f := range []*model.Run{a, b} {
		require.NoError(t, st.AddCost(ctx, f.ID, 0.1))
		require.NoError(t, st.AddCost(ctx, f.ID, 0.2))
	}
	tenth := 0.1
	require.NoError(t, st.SetBudget(ctx, a.ID, model.Budget{USD: tenth + 0.2}))
	fa, err := st.Run(ctx, a.ID)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	require.Equal(t, "0.30000000000000004", fmt.Sprint(fa.CostUSD), "the store holds the sum as summed")

	outs := map[string]string{}
	for what, args := range map[string][]string{
		"ls":      {"ls", "--json"},
		"show":    {"show", "a", "--json"},
		"export":  {"export", "a"},
		"compare": {"compare", "a", "b", "--json"},
	} {
		out, errOut, code := tine(t, db, args...)
		require.Equal(t, 0, code, "%s: %s", what, errOut)
		outs[what] = out
	}
	var fork bytes.Buffer
	require.NoError(t, writeJSON(&fork, service.ToFork(fa)))
	outs["fork"] = fork.String()
	for what, out := range outs {
		assert.NotContains(t, out, "0.30000000000000004", what)
		assert.Regexp(t, `"cost_usd": 0.3[,\n]`, out, what)
	}
	assert.Contains(t, outs["fork"], `"max_cost_usd": 0.3`+"\n")
}
