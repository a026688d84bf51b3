package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBudgetFlagsThatAreNoBudgetAreUsageErrors: --max-tokens and
// --max-cost that are not a positive amount are usage errors (exit 2) of
// fork, run and replay, said before anything is made.
func TestBudgetFlagsThatAreNoBudgetAreUsageErrors(t *testing.T) {
	db, id := importSeed(t)
	for _, cmd := range [][]string{{"fork", id, "-m", "go"}, {"run", id, "-m", "go"}, {"replay", id, "--at-step", "1"}} {
		for _, tc := range []struct{ flag, value, want string }{
			{"--max-tokens", "0", `--max-tokens is a number of tokens above 0, such as 20000, not "0"`},
			{"--max-tokens", "-100", `not "-100"`},
			{"--max-tokens", "lots", `not "lots"`},
			{"--max-tokens", "1.5", `not "1.5"`},
			{"--max-cost", "0", `--max-cost is an amount of US dollars above 0, such as 0.50, not "0"`},
			{"--max-cost", "-1", `not "-1"`},
			{"--max-cost", "NaN", `not "NaN"`},
			{"--max-cost", "cheap", `not "cheap"`},
		} {
			args := append(append([]string{}, cmd...), "--harness", "script", "--wait", tc.flag, tc.value)
			if cmd[0] == "replay" {
				args = append(append([]string{}, cmd...), "--wait", tc.flag, tc.value)
			}
			_, errOut, code := tine(t, db, args...)
			assert.Equal(t, 2, code, "%v: %s", args, errOut)
			assert.Contains(t, errOut, "tine: "+cmd[0]+": "+tc.flag, "%v", args)
			assert.Contains(t, errOut, tc.want, "%v", args)
		}
	}
	assert.Zero(t, forkCount(t, db), "nothing was made")

	// A cost budget for a model whose price tine does not know is refused,
	// and nothing is made either.
	_, errOut, code := tine(t, db, "fork", id, "--harness", "script", "--model", "script-1", "-m", "go", "--max-cost", "1", "--wait")
	assert.Equal(t, 1, code, errOut)
	assert.Contains(t, errOut, `--max-cost $1.00: tine does not know the price of model "script-1"`)
	assert.Zero(t, forkCount(t, db))
}

// TestAForkStoppedByItsBudget: tine fork --max-tokens stops a fork that
// spends more, records it failed with what it spent and keeps what it
// streamed; the fork keeps its budget (JSON, retry), and a later turn
// needs a larger one.
func TestAForkStoppedByItsBudget(t *testing.T) {
	db, id := importSeed(t)
	// The script harness's first answer to "run the tool" is a tool call
	// of about 450 tokens, then its results, then its reply.
	out, errOut, code := tine(t, db, "fork", id, "--harness", "script", "--name", "tight", "-m", "run the tool", "--max-tokens", "300", "--wait", "--json")
	assert.Equal(t, 1, code, errOut)
	assert.Contains(t, errOut, "fork tight failed: budget: ")
	var res struct {
		Forks []forkJSON `json:"forks"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	require.Len(t, res.Forks, 1)
	f := res.Forks[0]
	assert.Equal(t, "failed", f.Status)
	assert.Regexp(t, `^budget: \d{3} tokens spent, over --max-tokens 300; stopped, and what it had streamed is kept$`, f.Error)
	assert.Equal(t, &budgetJSON{MaxTokens: 300}, f.Budget)
	own := f.Messages - f.ForkAt
	assert.Equal(t, 2, own, "the person's message and the call that went over are kept; nothing after it ran")
	assert.Positive(t, f.Usage.Total())

	out, errOut, code = tine(t, db, "retry", "tight", "--wait", "--json")
	assert.Equal(t, 1, code, errOut)
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	assert.Equal(t, &budgetJSON{MaxTokens: 300}, res.Forks[0].Budget, "the retry keeps the budget")
	assert.True(t, strings.HasPrefix(res.Forks[0].Error, "budget: "), res.Forks[0].Error)

	// Its next turn is refused before it starts, the fork left as it was...
	_, errOut, code = tine(t, db, "run", "tight", "-m", "go on", "--wait")
	assert.Equal(t, 1, code, errOut)
	assert.Contains(t, errOut, "tight: budget: ")
	assert.Contains(t, errOut, "nothing is left for another turn; give it a larger budget with tine run --max-tokens or --max-cost")
	// ...until it is given more, which it keeps.
	out, errOut, code = tine(t, db, "run", "tight", "-m", "go on", "--max-tokens", "100,000", "--wait", "--json")
	require.Equal(t, 0, code, errOut)
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	assert.Equal(t, "completed", res.Forks[0].Status, res.Forks[0].Error)
	assert.Equal(t, &budgetJSON{MaxTokens: 100_000}, res.Forks[0].Budget)
	out, errOut, code = tine(t, db, "show", "tight")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "budget  at most 100,000 tokens of its own")
}
