package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
)

// TestHarnessesSaysWhatIsHere: every harness is listed with what it can
// do; an agent whose CLI is missing says which npm package provides it,
// and one that is installed gives its path and version.
func TestHarnessesSaysWhatIsHere(t *testing.T) {
	t.Parallel()
	codex := "/tmp/tine-agents/node_modules/.bin/codex"
	if dir := os.Getenv("TINE_AGENTS_BIN"); dir != "" {
		codex = filepath.Join(dir, "codex")
	}
	sh := asShell([]string{"TINE_CLAUDE_BIN=/nonexistent/claude", "TINE_CODEX_BIN=" + codex}, "TINE_ACP_AGENT")
	out, errOut, code := sh.tine(t, filepath.Join(t.TempDir(), "t.db"), "harnesses", "--json")
	require.Equal(t, 0, code, errOut)
	var hs []harnessJSON
	require.NoError(t, json.Unmarshal([]byte(out), &hs))
	byName := map[string]harnessJSON{}
	for _, h := range hs {
		byName[h.Name] = h
	}
	agents := backends(harness.Setup{}, true)
	require.Len(t, hs, len(agents.Agents()))
	for _, a := range agents.Agents() {
		require.Contains(t, byName, a.Name)
		assert.Equal(t, a.Caps, byName[a.Name].Capabilities, a.Name)
	}
	assert.False(t, byName["claude"].Installed)
	assert.Contains(t, byName["claude"].Problem, "npm install -g @anthropic-ai/claude-code")
	assert.False(t, byName["acp"].Installed)
	assert.Contains(t, byName["acp"].Problem, "TINE_ACP_AGENT")
	assert.True(t, byName["script"].Installed)
	if _, err := os.Stat(codex); err == nil {
		assert.True(t, byName["codex"].Installed)
		assert.Contains(t, byName["codex"].Version, "0.169.0")
	}
	// The table says which harnesses a replay can rebuild: the agents
	// (Claude Code also behind ACP), not the model APIs, which run no tools.
	out, _, code = sh.with("TINE_ACP_AGENT=claude-agent-acp").tine(t, filepath.Join(t.TempDir(), "t.db"), "harnesses")
	require.Equal(t, 0, code)
	lines := strings.Split(out, "\n")
	require.Equal(t, "REPLAY", strings.Fields(lines[0])[8]) // "AT CHECKPOINT" is two fields
	replays := map[string]string{}
	for _, l := range lines[1:] {
		if f := strings.Fields(l); len(f) > 8 && byName[f[0]].Name != "" {
			replays[f[0]] = f[7]
		}
	}
	want := map[string]string{}
	for _, a := range agents.Agents() {
		want[a.Name] = "-"
		if a.Caps.Replayable() || a.Name == "acp" { // Claude Code behind ACP records
			want[a.Name] = "yes"
		}
	}
	assert.Equal(t, want, replays)
	for _, n := range []string{"acp", "claude", "codex", "pi"} {
		assert.Equal(t, "yes", replays[n], n)
	}
	for _, n := range []string{"anthropic", "openai", "script"} {
		assert.Equal(t, "-", replays[n], n)
	}
}
