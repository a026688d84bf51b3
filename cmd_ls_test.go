package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
