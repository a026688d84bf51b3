//go:build agents

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/internal/modelserver"
	"tine/store"
)

// TestARealAgentStoppedByItsBudget: Claude Code, forked with --max-tokens
// against the scripted model server, is stopped as soon as the usage of
// its first model call goes over: its process group ends (nothing is left
// working in the fork's worktree, and the slow second call is never
// waited for), the fork is recorded failed with what it spent, and what it
// streamed is kept.
func TestARealAgentStoppedByItsBudget(t *testing.T) {
	t.Parallel()
	srv := quietServer(t)
	home := t.TempDir()
	gitInit(t, filepath.Join(home, "project"))
	a := setupAgent(t, "claude", home, srv.URL())
	on := replies(srv)
	on("turn-one", modelserver.Reply{Text: "Hello."})
	on("turn-two", modelserver.Reply{Text: "Noted."})
	on("spend it",
		modelserver.Reply{Text: "Looking.", ToolCalls: []modelserver.ToolCall{a.shell("echo looked")},
			Usage: modelserver.Usage{InputTokens: 12_000, OutputTokens: 400}},
		modelserver.Reply{Text: "slow", Fault: &modelserver.Fault{Kind: modelserver.FaultDelay, Delay: 2 * time.Minute}})
	session := a.session(t)
	sh := asShell(a.env, "CLAUDE_CONFIG_DIR")
	db := filepath.Join(t.TempDir(), "t.db")
	_, errOut, code := sh.tine(t, db, "import")
	require.Equal(t, 0, code, errOut)

	start := time.Now()
	out, errOut, code := sh.tine(t, db, "fork", session, "--name", "spender", "-m", "spend it", "--max-tokens", "10000", "--wait", "--json")
	took := time.Since(start)
	t.Logf("stopped after %s", took.Round(time.Millisecond))
	assert.Equal(t, 1, code, errOut)
	assert.Less(t, took, time.Minute, "the slow second call was not waited for")
	var res struct {
		Forks []forkJSON `json:"forks"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	require.Len(t, res.Forks, 1)
	f := res.Forks[0]
	assert.Equal(t, "failed", f.Status)
	assert.Equal(t, "budget: 12,400 tokens spent, over --max-tokens 10,000; stopped, and what it had streamed is kept", f.Error)
	assert.Equal(t, int64(12_400), f.Usage.Total())
	require.NotEmpty(t, f.Worktree)

	st, err := store.Open(db)
	require.NoError(t, err)
	defer st.Close()
	msgs, _, err := st.Messages(context.Background(), f.ID)
	require.NoError(t, err)
	own := msgs[f.ForkAt:]
	require.GreaterOrEqual(t, len(own), 2, "the person's message and the call that went over are kept")
	assert.Equal(t, "spend it", own[0].PlainText())
	assert.Contains(t, own[1].PlainText(), "Looking.")
	require.Len(t, own[1].ToolCalls(), 1)

	// Nothing of the agent's is left working in the fork's worktree.
	wt, err := filepath.EvalSymlinks(f.Worktree)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(processesIn(wt)) == 0 }, 10*time.Second, 100*time.Millisecond,
		"processes still in the worktree: %v", processesIn(wt))
}

// processesIn lists the processes whose working directory is dir or below.
func processesIn(dir string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err == nil && (cwd == dir || strings.HasPrefix(cwd, dir+"/")) {
			comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
			out = append(out, e.Name()+" "+strings.TrimSpace(string(comm)))
		}
	}
	return out
}
