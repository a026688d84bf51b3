//go:build agents

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/internal/modelserver"
	"tine/model"
	"tine/store"
)

// TestMergeRealAgents merges forks home with the real Claude Code and
// Codex against the scripted server: two Claude forks into their Claude
// parent (a fork tine made: its next request carries both digests, in
// order, without the escape sequences one fork's answer held, and its
// session id is unchanged); one of them again with --apply (its file
// comes into the parent's worktree); a Codex handoff fork into the same
// Claude parent; one with --summarize (its own agent sums up first, in its
// own session); a merge refused while the parent is mid-turn; and a
// merge into the imported session itself, which lands in a fork at its
// end, the session's file untouched.
func TestMergeRealAgents(t *testing.T) {
	t.Parallel()
	srv := quietServer(t)
	home := t.TempDir()
	gitInit(t, filepath.Join(home, "project"))
	cl := setupAgent(t, "claude", home, srv.URL())
	cx := setupAgent(t, "codex", home, srv.URL())
	on := replies(srv)
	on("turn-one", modelserver.Reply{Text: "Hello; ready when you are."})
	on("turn-two", modelserver.Reply{Text: "Noted, turn two."})
	session := cl.session(t)
	before := cl.own(t, session)
	sh := asShell(append(append([]string{}, cl.env...), cx.env...), "CLAUDE_CONFIG_DIR", "CODEX_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME")
	db := filepath.Join(t.TempDir(), "t.db")
	_, errOut, code := sh.tine(t, db, "import", "--json")
	require.Equal(t, 0, code, errOut)

	// The parent: a fork tine made of the session, that ran a turn.
	on("be-the-parent", modelserver.Reply{Text: "I am the parent."})
	_, errOut, code = sh.tine(t, db, "fork", session, "--name", "parent", "-m", "be-the-parent", "--wait")
	require.Equal(t, 0, code, errOut)
	// Two forks of it: a runs a command that fails and answers with
	// escape sequences; b writes a file.
	evil := "The retry fails on Lima.\x1b]52;c;ZXZpbA==\x07\x1b[2J"
	on("try-retry", modelserver.Reply{Text: "Trying.", ToolCalls: []modelserver.ToolCall{cl.shell("exit 3")}},
		modelserver.Reply{Text: evil})
	on("try-clock", modelserver.Reply{Text: "Writing.", ToolCalls: []modelserver.ToolCall{cl.write("clock.txt")}},
		modelserver.Reply{Text: "The fake clock passed every test."})
	_, errOut, code = sh.tine(t, db, "fork", "parent", "-n", "2", "--name", "a", "--name", "b", "-m", "try-retry", "-m", "try-clock", "--wait")
	require.Equal(t, 0, code, errOut)
	st, err := store.Open(db)
	require.NoError(t, err)
	defer st.Close()
	ctx := context.Background()
	parent, err := st.Resolve(ctx, "parent")
	require.NoError(t, err)
	require.NotEmpty(t, parent.NativeID)
	a, err := st.Resolve(ctx, "a")
	require.NoError(t, err)
	msgs, _, err := st.Messages(ctx, a.ID)
	require.NoError(t, err)
	require.Contains(t, msgs[len(msgs)-1].PlainText(), "\x1b]52;", "the fork's answer holds the escape sequences")

	// has reports whether the request body holds s, without printing
	// the body (tens of kilobytes) when it does not.
	has := func(body, s string) bool { return strings.Contains(body, s) }
	// lastMerge is the body of the parent's last request that carries a merge.
	lastMerge := func(marker string) string {
		t.Helper()
		reqs := srv.ModelRequests()
		for i := len(reqs) - 1; i >= 0; i-- {
			if b := string(reqs[i].Body); strings.Contains(b, marker) {
				return b
			}
		}
		t.Fatalf("no request carries %q", marker)
		return ""
	}

	// Both Claude forks into the parent.
	on("What 2 forks of this conversation found", modelserver.Reply{Text: "Taken in: the clock works, the retry does not."})
	out, errOut, code := sh.tine(t, db, "merge", "a", "b", "--wait", "--json")
	require.Equal(t, 0, code, errOut)
	var res mergeJSON
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	assert.Equal(t, parent.ID, res.Merge.Run, "the parent gets the turn itself")
	require.Len(t, res.Forks, 1)
	require.Equal(t, "completed", res.Forks[0].Status, res.Forks[0].Error)
	assert.Equal(t, parent.NativeID, res.Forks[0].NativeID, "the parent's conversation id is unchanged")
	body := lastMerge("What 2 forks of this conversation found")
	ia, ib := strings.Index(body, "The retry fails on Lima."), strings.Index(body, "The fake clock passed every test.")
	require.GreaterOrEqual(t, ia, 0, "a's digest")
	assert.Greater(t, ib, ia, "b's digest, after a's")
	assert.True(t, has(body, "→ exit 3"), "the command that failed, and how")
	assert.True(t, has(body, "- clock.txt +1 -0"), "the file b changed")
	assert.True(t, has(body, "I am the parent."), "in the parent's own conversation")
	assert.False(t, has(body, `\u001b`), "no escape sequence reaches the parent")
	assert.False(t, has(body, "ZXZpbA=="), "ZXZpbA==")
	after, err := st.Run(ctx, parent.ID)
	require.NoError(t, err)
	assert.Equal(t, parent.NativeID, after.NativeID)
	merges, err := st.TreeMerges(ctx, parent.TreeID)
	require.NoError(t, err)
	require.Len(t, merges, 1)
	assert.Equal(t, parent.Len(), merges[0].At)

	// b again, with its file: it comes into the parent's worktree.
	on("What 1 fork of this conversation found", modelserver.Reply{Text: "I see clock.txt now."})
	out, errOut, code = sh.tine(t, db, "merge", "b", "--apply", "--wait", "--json")
	require.Equal(t, 0, code, errOut)
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	require.NotNil(t, res.Applied)
	require.Len(t, res.Applied.Files, 1)
	assert.Equal(t, "clock.txt", res.Applied.Files[0].Path)
	got, err := os.ReadFile(filepath.Join(parent.Worktree, "clock.txt"))
	require.NoError(t, err, "b's file in the parent's worktree")
	assert.Equal(t, "x\n", string(got))
	assert.True(t, has(lastMerge("What 1 fork of this conversation found"), "were brought into your working directory"), "were brought into your working directory")
	// Applying it again is refused as tine apply refuses it, and nothing is merged.
	_, errOut, code = sh.tine(t, db, "merge", "b", "--apply", "--wait")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "nothing was merged")
	merges, err = st.TreeMerges(ctx, parent.TreeID)
	require.NoError(t, err)
	assert.Len(t, merges, 2)

	// A Codex fork (a handoff) into the Claude parent.
	on("try-codex", modelserver.Reply{Text: "Codex says: keep the clock."})
	_, errOut, code = sh.tine(t, db, "fork", "parent", "--harness", "codex", "--handoff", "--name", "cx", "-m", "try-codex", "--wait")
	require.Equal(t, 0, code, errOut)
	on("What 1 fork of this conversation found", modelserver.Reply{Text: "Codex agrees."})
	out, errOut, code = sh.tine(t, db, "merge", "cx", "--wait", "--json")
	require.Equal(t, 0, code, errOut)
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	assert.Equal(t, parent.ID, res.Merge.Run)
	assert.Equal(t, "claude", res.Forks[0].Harness, "the parent's own agent takes it")
	body = lastMerge("Codex says: keep the clock.")
	assert.True(t, has(body, `(codex, `), `(codex, `)
	assert.True(t, has(body, "a handoff: codex was given the conversation so far as a transcript"), "a handoff: codex was given the conversation so far as a transcript")

	// --summarize: a's own agent sums up first, in a turn of a's.
	on("What you found here goes back", modelserver.Reply{Text: "Summary: Lima has no retry."})
	on("What 1 fork of this conversation found", modelserver.Reply{Text: "Noted the summary."})
	aBefore, err := st.Run(ctx, a.ID)
	require.NoError(t, err)
	_, errOut, code = sh.tine(t, db, "merge", "a", "--summarize", "--wait")
	require.Equal(t, 0, code, errOut)
	aAfter, err := st.Run(ctx, a.ID)
	require.NoError(t, err)
	assert.Equal(t, aBefore.NativeID, aAfter.NativeID, "in a's own session")
	assert.Greater(t, aAfter.Usage.Total(), aBefore.Usage.Total(), "spent by a")
	body = lastMerge("Summary: Lima has no retry.")
	assert.True(t, has(body, "Its own summary (asked by tine merge; it spent "), "shown as a's own")
	assert.True(t, has(body, "The retry fails on Lima."), "and a's final answer, from before the summary")

	// Mid-turn, the parent is refused a merge, and nothing is sent.
	n := len(srv.ModelRequests())
	require.NoError(t, st.SetRunning(ctx, parent.ID))
	_, errOut, code = sh.tine(t, db, "merge", "a", "--wait")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "parent is in the middle of a turn")
	assert.Len(t, srv.ModelRequests(), n, "nothing was sent")
	require.NoError(t, st.SetStatus(ctx, parent.ID, model.Completed, ""))

	// Into the imported session: a fork at its end gets the turn.
	root, err := st.Run(ctx, parent.ParentID)
	require.NoError(t, err)
	on("What 1 fork of this conversation found", modelserver.Reply{Text: "The session heard it."})
	out, errOut, code = sh.tine(t, db, "merge", "parent", "--wait", "--json")
	require.Equal(t, 0, code, errOut)
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	require.NotEqual(t, root.ID, res.Merge.Run)
	assert.Equal(t, root.ID, res.Forks[0].Parent)
	assert.Equal(t, root.Len(), res.Forks[0].ForkAt, "at the session's end")
	require.Equal(t, "completed", res.Forks[0].Status, res.Forks[0].Error)
	assert.NotEqual(t, session, res.Forks[0].NativeID, "a session of its own")
	assert.True(t, has(lastMerge(`Fork \"parent\" (claude`), "Noted, turn two."), "the session's conversation")
	assert.Equal(t, string(before), string(cl.own(t, session)), "the session's own file is never written to")
}
