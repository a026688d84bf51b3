//go:build agents

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/internal/httpapi"
	"tine/internal/modelserver"
	"tine/internal/service"
)

// TestServeForksClaudeCodeFollowedLive: a fork of a real Claude Code
// session made through POST /api/sessions/{name}/fork runs in the server
// (Claude Code against the scripted server, in a worktree of its own),
// and a client following GET /api/events sees it run, each message as it
// is stored (the prompt, the tool call, its result, the answer), and its
// turn end.
func TestServeForksClaudeCodeFollowedLive(t *testing.T) {
	t.Parallel()
	srv := quietServer(t)
	home := t.TempDir()
	project := filepath.Join(home, "project")
	gitInit(t, project)
	a := setupAgent(t, "claude", home, srv.URL())
	on := replies(srv)
	on("turn-one", modelserver.Reply{Text: "Hello; ready when you are."})
	on("turn-two", modelserver.Reply{Text: "Noted, turn two."})
	session := a.session(t)
	sh := asShell(a.env, "CLAUDE_CONFIG_DIR", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME")
	db := filepath.Join(t.TempDir(), "t.db")
	_, errOut, code := sh.tine(t, db, "import", "--json")
	require.Equal(t, 0, code, errOut)
	on("write live", modelserver.Reply{Text: "Writing it.", ToolCalls: []modelserver.ToolCall{a.write("live.txt")},
		ChunkDelay: 50 * time.Millisecond}, modelserver.Reply{Text: "Wrote live.txt.", ChunkDelay: 50 * time.Millisecond})

	s := sh.serve(t, db, nil)
	events := s.follow("tree=" + session)
	var forked service.ForkStatus
	s.into("POST", "/api/sessions/"+session+"/fork", map[string]any{"message": "write live", "names": []string{"live"}}, &forked)
	require.Len(t, forked.Forks, 1)
	id := forked.Forks[0].ID
	assert.Equal(t, "running", forked.Forks[0].Status, "answered at once: the turn runs in the server")
	var statuses, messages []string
	deadline := time.After(2 * time.Minute)
	for done := false; !done || len(messages) < 4; {
		select {
		case ev, ok := <-events:
			require.True(t, ok, "the stream ended")
			switch ev.kind {
			case "run":
				var r httpapi.RunEvent
				require.NoError(t, json.Unmarshal(ev.data, &r))
				if r.Run == id {
					statuses = append(statuses, r.Status)
					done = r.Status != "running" && r.Status != "pending" && r.Status != "queued"
				}
			case "message":
				var m httpapi.MessageEvent
				require.NoError(t, json.Unmarshal(ev.data, &m))
				if m.Run == id {
					kinds := []string{}
					for _, p := range m.Message.Parts {
						kinds = append(kinds, p.Kind)
					}
					messages = append(messages, m.Message.Role+" "+strings.Join(kinds, ","))
				}
			}
		case <-deadline:
			t.Fatalf("the fork did not end within 2 minutes: statuses %v, messages %v", statuses, messages)
		}
	}
	t.Logf("statuses %v, messages %v", statuses, messages)
	assert.Contains(t, statuses, "running", "seen running, live")
	assert.Equal(t, "completed", statuses[len(statuses)-1])
	assert.Equal(t, "user text", messages[0])
	assert.Equal(t, []string{"user text", "assistant text,tool_call", "tool tool_result", "assistant text"}, messages, "the prompt, the call, its result, the answer, each as stored")
	assert.Contains(t, messages[len(messages)-1], "assistant")

	var fork service.ForkStatus
	s.into("GET", "/api/forks/live", nil, &fork)
	require.Len(t, fork.Forks, 1)
	f := fork.Forks[0]
	assert.Equal(t, "completed", f.Status, f.Error)
	assert.NotEqual(t, session, f.NativeID, "a session of its own")
	require.NotEmpty(t, f.Worktree)
	_, err := os.Stat(filepath.Join(f.Worktree, "live.txt"))
	assert.NoError(t, err, "Claude Code wrote the file in the fork's worktree")
	_, err = os.Stat(filepath.Join(project, "live.txt"))
	assert.True(t, os.IsNotExist(err), "and not in the checkout")
}
