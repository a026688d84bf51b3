//go:build agents

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/internal/modelserver"
	"tine/store"
)

// TestClaudeCodeForksThroughTineMCP: the real Claude Code, given tine as
// an MCP server, forks a session through fork_session and reads the forks
// back with compare; the model gets tine's answers as the tools' results.
func TestClaudeCodeForksThroughTineMCP(t *testing.T) {
	t.Parallel()
	bin := agentBin(t, "claude")
	db, id := importSeed(t)
	srv := quietServer(t)
	home := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(home, "project"), 0o755))
	tools := true
	at := func(marker string) *modelserver.Match {
		return &modelserver.Match{Tools: &tools, Contains: marker}
	}
	srv.Push(
		modelserver.Reply{Match: at("fork it twice"), ToolCalls: []modelserver.ToolCall{modelserver.Call("mcp__tine__fork_session", map[string]any{
			"session": id, "n": 2, "messages": []string{"Only Paris", "Only Rome"}, "names": []string{"cc-a", "cc-b"},
			"at": "3", "harness": "script", "wait": true})}},
		modelserver.Reply{Match: at("cc-b"), ToolCalls: []modelserver.ToolCall{modelserver.Call("mcp__tine__compare", map[string]any{"runs": []string{"cc-a", "cc-b"}})}},
		modelserver.Reply{Match: at("cc-a"), Text: "Both forks are done."},
	)
	cfg, err := json.Marshal(map[string]any{"mcpServers": map[string]any{"tine": map[string]any{
		"command": os.Args[0], "args": []string{"--db", db, "mcp"}, "env": map[string]string{"TINE_TEST_AS_TINE": "1"}}}})
	require.NoError(t, err)
	lines := agentRun(t, home, []string{"ANTHROPIC_BASE_URL=" + srv.URL(), "ANTHROPIC_API_KEY=test", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1", "MCP_TIMEOUT=60000", "MCP_TOOL_TIMEOUT=120000"},
		bin, "-p", "fork it twice", "--output-format", "stream-json", "--verbose", "--mcp-config", string(cfg),
		"--allowedTools", "mcp__tine__fork_session,mcp__tine__compare")
	result := ""
	for _, l := range lines {
		if l["type"] == "result" {
			result = fmt.Sprint(l["result"])
		}
	}
	assert.Equal(t, "Both forks are done.", result)
	reqs := srv.ModelRequests()
	require.GreaterOrEqual(t, len(reqs), 3)
	var sawForks, sawCompare bool
	for _, r := range reqs {
		b := string(r.Body)
		sawForks = sawForks || (strings.Contains(b, `\"forks\"`) && strings.Contains(b, "cc-b"))
		sawCompare = sawCompare || strings.Contains(b, `\"runs\"`)
	}
	assert.True(t, sawForks, "the model got fork_session's answer")
	assert.True(t, sawCompare, "and compare's")

	st, err := store.Open(db)
	require.NoError(t, err)
	defer st.Close()
	for _, n := range []string{"cc-a", "cc-b"} {
		r, err := st.Resolve(context.Background(), n)
		require.NoError(t, err)
		assert.Equal(t, id, r.ParentID)
	}
}
