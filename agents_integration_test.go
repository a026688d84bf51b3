package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness/importer"
	"tine/internal/modelserver"
	"tine/model"
	"tine/store"
)

// agentBin is where the real agent CLIs are installed (.ci/run installs
// them there with npm); tests that need them skip when they are missing.
func agentBin(t *testing.T, name string) string {
	dir := os.Getenv("TINE_AGENTS_BIN")
	if dir == "" {
		dir = "/tmp/tine-agents/node_modules/.bin"
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("%s is not installed in %s (npm install --prefix /tmp/tine-agents the pinned version, or set TINE_AGENTS_BIN)", name, dir)
	}
	return p
}

// agentRun runs a real agent CLI with a private home against the scripted
// server, with a timeout, and returns its stdout as JSON lines.
func agentRun(t *testing.T, home string, env []string, argv ...string) []map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	node, _ := exec.LookPath("node")
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = filepath.Join(home, "project")
	cmd.Env = append([]string{"HOME=" + home, "PATH=" + filepath.Dir(argv[0]) + ":" + filepath.Dir(node) + ":/usr/local/bin:/usr/bin:/bin",
		"TZ=UTC", "LANG=C.UTF-8", "TERM=dumb", "NO_COLOR=1", "SHELL=/bin/bash"}, env...)
	out, err := cmd.Output()
	var stderr string
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = string(ee.Stderr)
	}
	require.NoError(t, err, "%s: %s", strings.Join(argv, " "), stderr)
	var lines []map[string]any
	for _, l := range strings.Split(string(out), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			lines = append(lines, m)
		}
	}
	return lines
}

func field(lines []map[string]any, key, val, want string) string {
	for _, l := range lines {
		if l[key] == val {
			if s, ok := l[want].(string); ok {
				return s
			}
		}
	}
	return ""
}

// TestRealAgentsForkAndImport drives each real CLI through a turn and a
// fork of it against the scripted model server, then runs `tine import`
// on that home: every session is there, the fork hangs off its parent at
// the message it was forked at, and its usage is what the server charged.
func TestRealAgentsForkAndImport(t *testing.T) {
	for _, cli := range []string{"claude", "codex", "pi"} {
		t.Run(cli, func(t *testing.T) {
			bin := agentBin(t, cli)
			srv, err := modelserver.Start(modelserver.Options{Model: "tine-test-model"})
			require.NoError(t, err)
			defer srv.Close()
			home := t.TempDir()
			require.NoError(t, os.MkdirAll(filepath.Join(home, "project"), 0o755))
			tools := true
			srv.Push(
				modelserver.Reply{Text: "Hello from the main session.", Usage: modelserver.Usage{InputTokens: 1000, OutputTokens: 20}, Match: &modelserver.Match{Tools: &tools}},
				modelserver.Reply{Text: "Bye from the fork.", Usage: modelserver.Usage{InputTokens: 77, OutputTokens: 9}, Match: &modelserver.Match{Tools: &tools}},
			)
			var env []string
			var first, fork []string
			var idOf func([]map[string]any) string
			switch cli {
			case "claude":
				env = []string{"ANTHROPIC_BASE_URL=" + srv.URL(), "ANTHROPIC_API_KEY=test", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
					"DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1"}
				first = []string{bin, "-p", "say hello", "--output-format", "stream-json", "--verbose"}
				fork = []string{bin, "-p", "fork: say bye", "--resume", "%s", "--fork-session", "--output-format", "stream-json", "--verbose"}
				idOf = func(l []map[string]any) string { return field(l, "type", "system", "session_id") }
			case "codex":
				codexHome := filepath.Join(home, ".codex")
				require.NoError(t, os.MkdirAll(codexHome, 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(fmt.Sprintf(
					"model = \"gpt-5.5\"\nmodel_provider = \"tine\"\napproval_policy = \"never\"\nsandbox_mode = \"danger-full-access\"\n\n"+
						"[analytics]\nenabled = false\n\n[model_providers.tine]\nname = \"tine\"\nbase_url = \"%s/v1\"\nwire_api = \"responses\"\nenv_key = \"TINE_TEST_API_KEY\"\n",
					srv.URL())), 0o644))
				env = []string{"CODEX_HOME=" + codexHome, "TINE_TEST_API_KEY=test"}
				common := []string{"--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"}
				first = append(append([]string{bin, "exec"}, common...), "say hello")
				fork = append(append([]string{bin, "exec", "fork"}, common...), "%s", "fork: say bye")
				idOf = func(l []map[string]any) string { return field(l, "type", "thread.started", "thread_id") }
			case "pi":
				agentDir := filepath.Join(home, ".pi", "agent")
				require.NoError(t, os.MkdirAll(agentDir, 0o755))
				models := fmt.Sprintf(`{"providers": {"tine": {"baseUrl": "%s/v1", "api": "openai-completions", "apiKey": "TINE_TEST_API_KEY",
					"models": [{"id": "tine-test-model", "name": "tine", "contextWindow": 128000, "maxTokens": 4096}]}}}`, srv.URL())
				require.NoError(t, os.WriteFile(filepath.Join(agentDir, "models.json"), []byte(models), 0o644))
				env = []string{"PI_OFFLINE=1", "PI_TELEMETRY=0", "TINE_TEST_API_KEY=test"}
				common := []string{"-p", "--mode", "json", "--provider", "tine", "--model", "tine-test-model"}
				first = append(append([]string{bin}, common...), "say hello")
				fork = append(append([]string{bin}, common...), "--fork", "%s", "fork: say bye")
				idOf = func(l []map[string]any) string { return field(l, "type", "session", "id") }
			}
			main := idOf(agentRun(t, home, env, first...))
			require.NotEmpty(t, main, "the CLI reported its session id")
			for i, a := range fork {
				if a == "%s" {
					fork[i] = main
				}
			}
			forkID := idOf(agentRun(t, home, env, fork...))
			require.NotEmpty(t, forkID)
			require.NotEqual(t, main, forkID)

			// tine import, with no path, on that home.
			t.Setenv("HOME", home)
			t.Setenv("CLAUDE_CONFIG_DIR", "")
			t.Setenv("CODEX_HOME", filepath.Join(home, ".codex"))
			t.Setenv("PI_CODING_AGENT_DIR", "")
			t.Setenv("PI_CODING_AGENT_SESSION_DIR", "")
			db := filepath.Join(t.TempDir(), "t.db")
			out, errOut, code := tine(t, db, "import", "--json")
			require.Equal(t, 0, code, errOut)
			var sum importer.Summary
			require.NoError(t, json.Unmarshal([]byte(out), &sum))
			assert.Empty(t, sum.Errors)

			st, err := store.Open(db)
			require.NoError(t, err)
			defer st.Close()
			ctx := context.Background()
			trees, err := st.Trees(ctx)
			require.NoError(t, err)
			require.Len(t, trees, 1, "the fork is a branch of the session's tree")
			parent, err := st.Resolve(ctx, main)
			require.NoError(t, err)
			child, err := st.Resolve(ctx, forkID)
			require.NoError(t, err)
			assert.Equal(t, parent.ID, child.ParentID)
			assert.Equal(t, parent.Len(), child.ForkAt, "forked at the end of the session")
			assert.Equal(t, int64(77), child.Usage.InputTokens+child.Usage.CacheReadTokens, "the fork's own usage, as the server charged it")
			assert.Equal(t, int64(9), child.Usage.OutputTokens)
			msgs, _, err := st.Messages(ctx, child.ID)
			require.NoError(t, err)
			assert.Contains(t, msgs[len(msgs)-1].PlainText(), "Bye from the fork.")
			assert.True(t, len(model.Checkpoints(msgs)) > 0)
		})
	}
}
