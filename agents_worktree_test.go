//go:build agents

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/internal/modelserver"
)

// TestAForkWhoseWorktreeIsGoneRunsInItAgain is issue 17's leak, with the
// real agents through tine's command line: a fork's worktree removed
// (prune, then rm --force), then `tine run FORK` with a shell command. The
// command runs in the fork's worktree made again (from its branch, where
// prune committed the fork's work; then from the files it started with),
// and nothing is written into the session's own checkout.
func TestAForkWhoseWorktreeIsGoneRunsInItAgain(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"claude", "codex"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			worktreeGoneEndToEnd(t, name)
		})
	}
}

func worktreeGoneEndToEnd(t *testing.T, name string) {
	srv := quietServer(t)
	home := t.TempDir()
	project := filepath.Join(home, "project")
	gitInit(t, project)
	a := setupAgent(t, name, home, srv.URL())
	on := replies(srv)
	on("turn-one", modelserver.Reply{Text: "Hello; ready when you are."})
	on("turn-two", modelserver.Reply{Text: "Noted, turn two."})
	session := a.session(t)
	sh := asShell(a.env, "CLAUDE_CONFIG_DIR", "CODEX_HOME", "PI_CODING_AGENT_DIR", "PI_CODING_AGENT_SESSION_DIR", "QWEN_HOME", "QWEN_RUNTIME_DIR")
	db := filepath.Join(t.TempDir(), "t.db")
	_, errOut, code := sh.tine(t, db, "import")
	require.Equal(t, 0, code, errOut)

	var res struct {
		Forks []forkJSON `json:"forks"`
	}
	turn := func(args ...string) forkJSON {
		t.Helper()
		out, errOut, code := sh.tine(t, db, append(args, "--wait", "--json")...)
		require.NoError(t, json.Unmarshal([]byte(out), &res), "%s\n%s", out, errOut)
		require.Equal(t, 0, code, errOut)
		require.Len(t, res.Forks, 1)
		require.Equal(t, "completed", res.Forks[0].Status, res.Forks[0].Error)
		return res.Forks[0]
	}
	shell := func(marker, cmd string) {
		on(marker, modelserver.Reply{Text: "Running it.", ToolCalls: []modelserver.ToolCall{a.shell(cmd)}},
			modelserver.Reply{Text: "Done: " + marker})
	}
	leaked := func() {
		t.Helper()
		for _, f := range []string{"first.txt", "leak.txt", "leak2.txt"} {
			assert.NoFileExists(t, filepath.Join(project, f), "nothing is written into the session's checkout")
		}
	}

	shell("first-marker", "echo first > first.txt")
	f := turn("fork", session, "--name", "f", "-m", "write first-marker")
	require.NotEmpty(t, f.Worktree)
	assert.FileExists(t, filepath.Join(f.Worktree, "first.txt"))
	first := f.Worktree

	// prune keeps the fork's uncommitted work on its branch.
	out, errOut, code := sh.tine(t, db, "worktree", "prune")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "f: committed its uncommitted work")
	require.NoDirExists(t, first)

	shell("leak-marker", "echo leak > leak.txt")
	f = turn("run", "f", "-m", "RUN: echo leak > leak.txt leak-marker")
	leaked()
	assert.Equal(t, first, f.Worktree, "made again where it was")
	assert.FileExists(t, filepath.Join(f.Worktree, "leak.txt"), "the command ran in the fork's worktree")
	assert.FileExists(t, filepath.Join(f.Worktree, "first.txt"), "made again from its branch, with its work")
	assert.Contains(t, f.Note, "its worktree was gone; tine made it again from branch main-fork-1")

	// rm --force deletes the work and the branch: the fork starts over
	// from the files it began with, still in a worktree of its own.
	_, errOut, code = sh.tine(t, db, "worktree", "rm", "f")
	assert.Equal(t, 1, code, "its work is in no commit")
	assert.Contains(t, errOut, "commit it there, or --force deletes it")
	_, errOut, code = sh.tine(t, db, "worktree", "rm", "--force", "f")
	require.Equal(t, 0, code, errOut)
	shell("leak2-marker", "echo leak > leak2.txt")
	f = turn("run", "f", "-m", "RUN: echo leak > leak2.txt leak2-marker")
	leaked()
	assert.FileExists(t, filepath.Join(f.Worktree, "leak2.txt"))
	assert.NoFileExists(t, filepath.Join(f.Worktree, "first.txt"))
	_, err := os.Stat(filepath.Join(project, "README.md"))
	require.NoError(t, err)
}
