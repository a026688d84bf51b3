//go:build agents

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness/fork"
	"tine/harness/importer"
	"tine/harness/opencode"
	"tine/internal/modelserver"
	"tine/internal/service"
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
	t.Parallel()
	for _, cli := range []string{"claude", "codex", "pi", "qwen", "gemini", "opencode"} {
		t.Run(cli, func(t *testing.T) {
			t.Parallel()
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
			// fileOf, for an agent whose fork is started from the
			// session's file ("%f" in fork), finds it.
			var fileOf func(id string) string
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
			case "qwen":
				writeQwenSettings(t, home)
				env = []string{"OPENAI_BASE_URL=" + srv.URL() + "/v1", "OPENAI_API_KEY=test", "OPENAI_MODEL=tine-test-model"}
				first = []string{bin, "--output-format", "stream-json", "say hello"}
				fork = []string{bin, "--output-format", "stream-json", "--resume", "%s", "--fork-session", "fork: say bye"}
				idOf = func(l []map[string]any) string { return field(l, "type", "system", "session_id") }
			case "gemini":
				writeGeminiSettings(t, home)
				env = []string{"GOOGLE_GEMINI_BASE_URL=" + srv.URL(), "GEMINI_API_KEY=test", "GEMINI_MODEL=gemini-2.5-flash", "GEMINI_CLI_TRUST_WORKSPACE=true"}
				first = []string{bin, "--output-format", "stream-json", "-p", "say hello"}
				// A new session holding a copy of the session's file.
				fork = []string{bin, "--output-format", "stream-json", "--session-file", "%f", "-p", "fork: say bye"}
				idOf = func(l []map[string]any) string { return field(l, "type", "init", "session_id") }
				fileOf = func(id string) string { return geminiFile(t, home, id) }
			case "opencode":
				env = opencodeEnv(srv.URL())
				first = []string{bin, "run", "--format", "json", "say hello"}
				// opencode's own fork: a new session "<title> (fork #1)"
				// holding copies of the messages under new ids.
				fork = []string{bin, "run", "--format", "json", "--session", "%s", "--fork", "fork: say bye"}
				idOf = func(l []map[string]any) string { return field(l, "type", "step_start", "sessionID") }
			}
			main := idOf(agentRun(t, home, env, first...))
			require.NotEmpty(t, main, "the CLI reported its session id")
			for i, a := range fork {
				switch a {
				case "%s":
					fork[i] = main
				case "%f":
					fork[i] = fileOf(main)
				}
			}
			forkID := idOf(agentRun(t, home, env, fork...))
			require.NotEmpty(t, forkID)
			require.NotEqual(t, main, forkID)

			// tine import, with no path, on that home.
			sh := asShell([]string{"HOME=" + home, "CODEX_HOME=" + filepath.Join(home, ".codex")}, "CLAUDE_CONFIG_DIR",
				"PI_CODING_AGENT_DIR", "PI_CODING_AGENT_SESSION_DIR", "QWEN_HOME", "QWEN_RUNTIME_DIR", "GEMINI_CLI_HOME", "XDG_DATA_HOME")
			db := filepath.Join(t.TempDir(), "t.db")
			out, errOut, code := sh.tine(t, db, "import", "--json")
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

// replies queues scripted replies on srv for the agent's own model calls
// (those that offer tools) whose request holds marker.
func replies(srv *modelserver.Server) func(marker string, rs ...modelserver.Reply) {
	tools := true
	return func(marker string, rs ...modelserver.Reply) {
		for i := range rs {
			rs[i].Match = &modelserver.Match{Tools: &tools, Contains: marker}
		}
		srv.Push(rs...)
	}
}

// e2eAgent is how the end-to-end test drives one real agent: its
// environment (private HOME, pointed at the scripted server), how to make
// a two-turn session with its CLI, and the tool call that writes a file.
type e2eAgent struct {
	name    string
	bin     string
	env     []string
	session func(t *testing.T) string
	write   func(file string) modelserver.ToolCall
	// shell is a tool call that runs a shell command.
	shell func(cmd string) modelserver.ToolCall
	// sessionFile finds the agent's own transcript of session id.
	dir string
	// find, when set, finds it for an agent whose file names do not hold
	// the whole id.
	find func(t *testing.T, id string) string
	// read, when set, reads session id as the agent keeps it, for one
	// that keeps every session in one database (opencode).
	read func(t *testing.T, id string) []byte
}

// opencodeEnv has opencode use the scripted server at url as its model,
// through an OpenAI-compatible provider in OPENCODE_CONFIG_CONTENT.
func opencodeEnv(url string) []string {
	return []string{`OPENCODE_CONFIG_CONTENT={"provider":{"fake":{"npm":"@ai-sdk/openai-compatible","options":{"baseURL":"` + url +
		`/v1","apiKey":"{env:TINE_TEST_API_KEY}"},"models":{"tine-test-model":{}}}},"model":"fake/tine-test-model","autoupdate":false,"share":"disabled"}`,
		"TINE_TEST_API_KEY=test", "OPENCODE_DISABLE_MODELS_FETCH=1"}
}

func setupAgent(t *testing.T, name, home, url string) e2eAgent {
	bin := agentBin(t, name)
	a := e2eAgent{name: name, bin: bin}
	common := []string{"HOME=" + home, "TINE_" + strings.ToUpper(name) + "_BIN=" + bin}
	switch name {
	case "claude":
		a.env = append(common, "ANTHROPIC_BASE_URL="+url, "ANTHROPIC_API_KEY=test", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
			"DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1", "CLAUDE_CODE_MAX_RETRIES=1")
		a.dir = filepath.Join(home, ".claude", "projects")
		a.session = func(t *testing.T) string {
			id := field(agentRun(t, home, a.env, bin, "-p", "say hello turn-one", "--output-format", "stream-json", "--verbose"), "type", "system", "session_id")
			require.NotEmpty(t, id)
			agentRun(t, home, a.env, bin, "-p", "remember turn-two", "--resume", id, "--output-format", "stream-json", "--verbose")
			return id
		}
		a.shell = func(cmd string) modelserver.ToolCall {
			return modelserver.Call("Bash", map[string]string{"command": cmd, "description": "run it"})
		}
	case "codex":
		codexHome := filepath.Join(home, ".codex")
		require.NoError(t, os.MkdirAll(codexHome, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(fmt.Sprintf(
			"model = \"gpt-5.5\"\nmodel_provider = \"tine\"\napproval_policy = \"never\"\nsandbox_mode = \"danger-full-access\"\n\n"+
				"[analytics]\nenabled = false\n\n[model_providers.tine]\nname = \"tine\"\nbase_url = \"%s/v1\"\nwire_api = \"responses\"\nenv_key = \"TINE_TEST_API_KEY\"\n",
			url)), 0o644))
		a.env = append(common, "CODEX_HOME="+codexHome, "TINE_TEST_API_KEY=test")
		a.dir = filepath.Join(codexHome, "sessions")
		flags := []string{"--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"}
		a.session = func(t *testing.T) string {
			id := field(agentRun(t, home, a.env, append(append([]string{bin, "exec"}, flags...), "say hello turn-one")...), "type", "thread.started", "thread_id")
			require.NotEmpty(t, id)
			agentRun(t, home, a.env, append(append([]string{bin, "exec", "resume"}, flags...), id, "remember turn-two")...)
			return id
		}
		a.shell = func(cmd string) modelserver.ToolCall {
			return modelserver.Call("exec_command", map[string]string{"cmd": cmd})
		}
	case "pi":
		agentDir := filepath.Join(home, ".pi", "agent")
		require.NoError(t, os.MkdirAll(agentDir, 0o755))
		models := fmt.Sprintf(`{"providers": {"tine": {"baseUrl": "%s/v1", "api": "openai-completions", "apiKey": "TINE_TEST_API_KEY",
			"models": [{"id": "tine-test-model", "name": "tine", "contextWindow": 128000, "maxTokens": 4096}]}}}`, url)
		require.NoError(t, os.WriteFile(filepath.Join(agentDir, "models.json"), []byte(models), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(agentDir, "settings.json"), []byte(`{"retry": {"enabled": false}}`), 0o644))
		a.env = append(common, "PI_OFFLINE=1", "PI_TELEMETRY=0", "TINE_TEST_API_KEY=test")
		a.dir = filepath.Join(agentDir, "sessions")
		flags := []string{"-p", "--mode", "json", "--provider", "tine", "--model", "tine-test-model"}
		a.session = func(t *testing.T) string {
			id := field(agentRun(t, home, a.env, append(append([]string{bin}, flags...), "say hello turn-one")...), "type", "session", "id")
			require.NotEmpty(t, id)
			file := a.file(t, id)
			agentRun(t, home, a.env, append(append([]string{bin}, flags...), "--session", file, "remember turn-two")...)
			return id
		}
		a.shell = func(cmd string) modelserver.ToolCall {
			return modelserver.Call("bash", map[string]string{"command": cmd})
		}
	case "qwen":
		writeQwenSettings(t, home)
		a.env = append(common, "OPENAI_BASE_URL="+url+"/v1", "OPENAI_API_KEY=test", "OPENAI_MODEL=tine-test-model", "QWEN_CODE_SUPPRESS_YOLO_WARNING=1")
		a.dir = filepath.Join(home, ".qwen", "projects")
		flags := []string{"--output-format", "stream-json", "--approval-mode", "yolo"}
		a.session = func(t *testing.T) string {
			id := field(agentRun(t, home, a.env, append(append([]string{bin}, flags...), "say hello turn-one")...), "type", "system", "session_id")
			require.NotEmpty(t, id)
			agentRun(t, home, a.env, append(append([]string{bin}, flags...), "--resume", id, "remember turn-two")...)
			return id
		}
		a.shell = func(cmd string) modelserver.ToolCall {
			return modelserver.Call("run_shell_command", map[string]string{"command": cmd})
		}
	case "gemini":
		writeGeminiSettings(t, home)
		a.env = append(common, "GOOGLE_GEMINI_BASE_URL="+url, "GEMINI_API_KEY=test", "GEMINI_MODEL=gemini-2.5-flash", "GEMINI_CLI_TRUST_WORKSPACE=true")
		a.dir = filepath.Join(home, ".gemini", "tmp")
		flags := []string{"--output-format", "stream-json", "--approval-mode", "yolo"}
		a.session = func(t *testing.T) string {
			id := field(agentRun(t, home, a.env, append(append([]string{bin}, flags...), "-p", "say hello turn-one")...), "type", "init", "session_id")
			require.NotEmpty(t, id)
			agentRun(t, home, a.env, append(append([]string{bin}, flags...), "--resume", id, "-p", "remember turn-two")...)
			return id
		}
		a.find = func(t *testing.T, id string) string { return geminiFile(t, home, id) }
		a.shell = func(cmd string) modelserver.ToolCall {
			return modelserver.Call("run_shell_command", map[string]string{"command": cmd})
		}
	case "opencode":
		a.env = append(common, opencodeEnv(url)...)
		db := filepath.Join(home, ".local", "share", "opencode", "opencode.db")
		a.dir = filepath.Dir(db)
		flags := []string{"run", "--format", "json"}
		a.session = func(t *testing.T) string {
			id := field(agentRun(t, home, a.env, append(append([]string{bin}, flags...), "say hello turn-one")...), "type", "step_start", "sessionID")
			require.NotEmpty(t, id)
			agentRun(t, home, a.env, append(append([]string{bin}, flags...), "--session", id, "remember turn-two")...)
			return id
		}
		a.find = func(*testing.T, string) string { return db }
		a.read = func(t *testing.T, id string) []byte {
			b, err := opencode.Read(context.Background(), db, id)
			require.NoError(t, err)
			return b
		}
		a.shell = func(cmd string) modelserver.ToolCall {
			return modelserver.Call("bash", map[string]string{"command": cmd, "description": "run it"})
		}
	}
	a.write = func(file string) modelserver.ToolCall { return a.shell("echo x > " + file) }
	return a
}

// writeQwenSettings has Qwen Code in home speak the OpenAI API, without
// the background memory extractor's model calls.
func writeQwenSettings(t *testing.T, home string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".qwen"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".qwen", "settings.json"),
		[]byte(`{"security":{"auth":{"selectedType":"openai"}},"memory":{"enableManagedAutoMemory":false}}`), 0o600))
}

// writeGeminiSettings has Gemini CLI in home use an API key (the one in
// GEMINI_API_KEY) and make one attempt a model call.
func writeGeminiSettings(t *testing.T, home string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".gemini"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".gemini", "settings.json"),
		[]byte(`{"security":{"auth":{"selectedType":"gemini-api-key"}},"general":{"maxAttempts":1}}`), 0o600))
}

// geminiFile is Gemini CLI's file of session id in home: named after its
// first 8 characters, holding its messages (a resume leaves an empty file
// of the same session beside it).
func geminiFile(t *testing.T, home, id string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(home, ".gemini", "tmp", "*", "chats", "session-*-"+id[:8]+".jsonl"))
	require.NoError(t, err)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		if strings.Contains(string(b), id) && strings.Contains(string(b), `"type":"gemini"`) {
			return f
		}
	}
	t.Fatalf("no Gemini CLI file of session %s among %v", id, files)
	return ""
}

// own is session id as the agent keeps it: its file's bytes, or its
// database's rows.
func (a e2eAgent) own(t *testing.T, id string) []byte {
	t.Helper()
	if a.read != nil {
		return a.read(t, id)
	}
	b, err := os.ReadFile(a.file(t, id))
	require.NoError(t, err)
	return b
}

// file finds the agent's own transcript of session id.
func (a e2eAgent) file(t *testing.T, id string) string {
	t.Helper()
	if a.find != nil {
		return a.find(t, id)
	}
	found := ""
	require.NoError(t, filepath.Walk(a.dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && strings.HasSuffix(p, ".jsonl") && strings.Contains(filepath.Base(p), id) {
			found = p
		}
		return err
	}))
	require.NotEmpty(t, found, "%s's file of session %s", a.name, id)
	return found
}

// TestAgentForksBestOfNEndToEnd is the command line as a person uses it on
// a real Claude Code, Codex and pi session: import it, fork it after its
// first turn three ways with a check, each fork working in its own
// worktree through the agent's own CLI, and the fork whose check passes
// marked best; compare shows what each changed; a second turn on a fork
// continues that fork's own session; importing again adds no copies, and
// the session's own file is never written to.
func TestAgentForksBestOfNEndToEnd(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"claude", "codex", "pi", "qwen", "gemini", "opencode"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			agentForksEndToEnd(t, name)
		})
	}
}

func agentForksEndToEnd(t *testing.T, name string) {
	srv := quietServer(t)
	home := t.TempDir()
	project := filepath.Join(home, "project")
	gitInit(t, project)
	a := setupAgent(t, name, home, srv.URL())
	on := replies(srv)
	// The session, made by the real CLI: two turns.
	on("turn-one", modelserver.Reply{Text: "Hello; ready when you are."})
	on("turn-two", modelserver.Reply{Text: "Noted, turn two."})
	session := a.session(t)
	before := a.own(t, session)

	// tine runs with the environment the person's shell has.
	sh := asShell(a.env, "CLAUDE_CONFIG_DIR", "CODEX_HOME", "PI_CODING_AGENT_DIR", "PI_CODING_AGENT_SESSION_DIR", "QWEN_HOME", "QWEN_RUNTIME_DIR", "GEMINI_CLI_HOME",
		"XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME", "OPENCODE_CONFIG")
	db := filepath.Join(t.TempDir(), "t.db")
	_, errOut, code := sh.tine(t, db, "import", "--json")
	require.Equal(t, 0, code, errOut)
	out, errOut, code := sh.tine(t, db, "show", session, "--json")
	require.Equal(t, 0, code, errOut)
	var shown service.Show
	require.NoError(t, json.Unmarshal([]byte(out), &shown))
	k := 0
	for _, m := range shown.Transcript {
		if m.Role == "assistant" && strings.Contains(fmt.Sprint(m.Parts), "ready when you are") {
			k = m.K
		}
	}
	require.NotZero(t, k, "turn one's answer")
	require.Less(t, k, len(shown.Transcript), "a checkpoint in the middle")

	// Three forks after turn one, each told to write another file.
	for _, f := range []string{"good", "bad1", "bad2"} {
		on("write "+f, modelserver.Reply{Text: "Writing it.", ToolCalls: []modelserver.ToolCall{a.write(f + ".txt")}},
			modelserver.Reply{Text: "Wrote " + f + ".txt."})
	}
	out, errOut, code = sh.tine(t, db, "fork", session, "--at", fmt.Sprint(k), "-n", "3", "--name", "good", "--name", "bad1", "--name", "bad2",
		"-m", "write good", "-m", "write bad1", "-m", "write bad2", "--check", "test -f good.txt", "--wait", "--json", "--apply-best")
	var res struct {
		Forks []forkJSON `json:"forks"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res), "%s\n%s", out, errOut)
	require.Equal(t, 0, code, errOut)
	require.Len(t, res.Forks, 3)
	dirs := map[string]bool{}
	for i, f := range res.Forks {
		require.Equal(t, "completed", f.Status, f.Error)
		assert.Equal(t, k, f.ForkAt)
		assert.Equal(t, fmt.Sprintf("main-fork-%d", i+1), f.Branch)
		require.NotEmpty(t, f.Worktree)
		dirs[f.Worktree] = true
		assert.NotEqual(t, session, f.NativeID, "the fork has a session of its own")
		// Each wrote its own file, in its own worktree only.
		for _, other := range []string{"good", "bad1", "bad2"} {
			_, err := os.Stat(filepath.Join(f.Worktree, other+".txt"))
			assert.Equal(t, other == f.Name, err == nil, "%s in %s's worktree", other, f.Name)
		}
		require.NotNil(t, f.Check)
		assert.True(t, f.Check.Ran)
		assert.Equal(t, f.Name == "good", f.Best, "only the fork whose check passed is best")
	}
	assert.Len(t, dirs, 3)
	assert.Equal(t, 0, res.Forks[0].Check.Exit)
	assert.NotZero(t, res.Forks[1].Check.Exit)
	// --apply-best brought the best fork's work, and only its, into the
	// checkout; nothing else was written there.
	assert.Contains(t, errOut, "applied good into "+project)
	b, err := os.ReadFile(filepath.Join(project, "good.txt"))
	require.NoError(t, err)
	assert.Equal(t, "x\n", string(b), "the best fork's file, as uncommitted work")
	for _, other := range []string{"bad1", "bad2"} {
		_, err = os.Stat(filepath.Join(project, other+".txt"))
		assert.True(t, os.IsNotExist(err), "%s's work stays in its worktree", other)
	}
	assert.Equal(t, string(before), string(a.own(t, session)), "the session's own file is never written to")

	// Compare shows what each changed.
	out, errOut, code = sh.tine(t, db, "compare", "good", "bad1", "--json")
	require.Equal(t, 0, code, errOut)
	var c comparison
	require.NoError(t, json.Unmarshal([]byte(out), &c))
	require.Len(t, c.Runs, 2)
	require.Len(t, c.Runs[0].Files, 1)
	assert.Equal(t, "good.txt", c.Runs[0].Files[0].Path)
	assert.True(t, c.Runs[0].Best)

	// Applying the winner again is refused, saying it is applied already,
	// nothing changed; another fork's work applies beside it.
	_, errOut, code = sh.tine(t, db, "apply", "good")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "good: not applied: it is applied already")
	out, errOut, code = sh.tine(t, db, "apply", "bad1", "--json")
	require.Equal(t, 0, code, errOut)
	var ap fork.Applied
	require.NoError(t, json.Unmarshal([]byte(out), &ap))
	require.Len(t, ap.Files, 1)
	assert.Equal(t, "bad1.txt", ap.Files[0].Path)
	_, err = os.Stat(filepath.Join(project, "bad1.txt"))
	assert.NoError(t, err)

	// A second turn on a fork continues the fork's own session.
	on("second-turn", modelserver.Reply{Text: "You asked me to write good."})
	out, errOut, code = sh.tine(t, db, "run", "good", "-m", "what did I ask? second-turn", "--wait", "--json")
	require.Equal(t, 0, code, errOut)
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	assert.Equal(t, "good", res.Forks[0].Name, "the fork got its next turn itself")
	reqs := srv.ModelRequests()
	last := string(reqs[len(reqs)-1].Body)
	assert.Contains(t, last, "second-turn")
	assert.Contains(t, last, "Wrote good.txt.", "the agent remembers the fork's first turn")
	assert.NotContains(t, last, "turn-two", "the fork was made before turn two")

	// The agent's own files of the forks' sessions land on the forks.
	out, errOut, code = sh.tine(t, db, "import", "--json")
	require.Equal(t, 0, code, errOut)
	var sum importer.Summary
	require.NoError(t, json.Unmarshal([]byte(out), &sum))
	assert.Equal(t, 3, sum.Driven, "three fork sessions, known already")
	assert.Zero(t, sum.Runs, "no second copies")

	// Worktrees go when asked: rm one, prune the rest but the best.
	branches := func() string {
		cmd := exec.Command("git", "branch", "--list", "main-fork-*")
		cmd.Dir = project
		b, err := cmd.Output()
		require.NoError(t, err)
		return string(b)
	}
	// What each agent wrote is uncommitted: rm keeps it unless --force.
	_, errOut, code = sh.tine(t, db, "worktree", "rm", "bad1")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "is in no commit; commit it there, or --force deletes it")
	out, errOut, code = sh.tine(t, db, "worktree", "rm", "--force", "bad1")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "removed")
	_, err = os.Stat(res.Forks[0].Worktree)
	require.NoError(t, err, "good's worktree stays")
	assert.NotContains(t, branches(), "main-fork-2", "--force deletes the branch with the worktree")
	out, errOut, code = sh.tine(t, db, "worktree", "prune")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "bad2: committed its uncommitted work")
	assert.NotContains(t, out, "good", "the best fork's worktree is kept")
	assert.Contains(t, branches(), "main-fork-1")
	assert.Contains(t, branches(), "main-fork-3", "prune committed bad2's work to its branch, which it keeps")
	show := exec.Command("git", "show", "main-fork-3:bad2.txt")
	show.Dir = project
	b, err = show.Output()
	require.NoError(t, err, "bad2's work is on its branch")
	assert.Equal(t, "x\n", string(b))
	out, errOut, code = sh.tine(t, db, "ls", "--json")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, 1, strings.Count(out, `/worktrees/`), "only good still has a worktree")
}

// TestACPForksEndToEnd drives the real ACP agent (claude-agent-acp) from
// the command line. An imported Claude Code session is not an ACP
// session, so continuing it through ACP is a labelled handoff (two forks,
// each in its own worktree, the check picks one); the handoff fork's own
// ACP session is then forked natively at its end (session/fork), and that
// fork's next turn resumes its own session.
// claudeBehindACP finds claude-agent-acp and the claude executable it
// runs (CLAUDE_CODE_EXECUTABLE), skipping the test without them.
func claudeBehindACP(t *testing.T) (acpBin, claudeExe string) {
	t.Helper()
	dir := os.Getenv("TINE_AGENTS_BIN")
	if dir == "" {
		dir = "/tmp/tine-agents/node_modules/.bin"
	}
	acpBin = agentBin(t, "claude-agent-acp")
	claudeExe, err := filepath.EvalSymlinks(filepath.Join(dir, "claude"))
	if err != nil {
		t.Skipf("claude is not installed in %s", dir)
	}
	return acpBin, claudeExe
}

func TestACPForksEndToEnd(t *testing.T) {
	t.Parallel()
	acpBin, claudeExe := claudeBehindACP(t)
	srv := quietServer(t)
	home := t.TempDir()
	project := filepath.Join(home, "project")
	gitInit(t, project)
	a := setupAgent(t, "claude", home, srv.URL())
	on := replies(srv)
	on("turn-one", modelserver.Reply{Text: "Hello; ready when you are."})
	on("turn-two", modelserver.Reply{Text: "Noted, turn two."})
	session := a.session(t)

	sh := asShell(append(a.env, "TINE_ACP_AGENT="+acpBin, "CLAUDE_CODE_EXECUTABLE="+claudeExe), "CLAUDE_CONFIG_DIR", "IS_SANDBOX")
	db := filepath.Join(t.TempDir(), "t.db")
	_, errOut, code := sh.tine(t, db, "import", "--json")
	require.Equal(t, 0, code, errOut)

	// Without --handoff, the refusal says what to do.
	_, errOut, code = sh.tine(t, db, "fork", session, "--harness", "acp", "-m", "x")
	require.Equal(t, 1, code)
	assert.Contains(t, errOut, "--handoff")

	for _, f := range []string{"good", "bad"} {
		on("write "+f, modelserver.Reply{Text: "Writing it.", ToolCalls: []modelserver.ToolCall{a.write(f + ".txt")}},
			modelserver.Reply{Text: "Wrote " + f + ".txt."})
	}
	out, errOut, code := sh.tine(t, db, "fork", session, "--harness", "acp", "--handoff", "-n", "2", "--name", "good", "--name", "bad",
		"-m", "write good", "-m", "write bad", "--check", "test -f good.txt", "--wait", "--json")
	var res struct {
		Forks []forkJSON `json:"forks"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res), "%s\n%s", out, errOut)
	require.Equal(t, 0, code, errOut)
	require.Len(t, res.Forks, 2)
	for _, f := range res.Forks {
		require.Equal(t, "completed", f.Status, f.Error)
		assert.True(t, f.Handoff, "labelled a handoff")
		assert.Equal(t, "acp", f.Harness)
		require.NotEmpty(t, f.Worktree)
		_, err := os.Stat(filepath.Join(f.Worktree, f.Name+".txt"))
		assert.NoError(t, err, "%s wrote its file in its worktree", f.Name)
		assert.Equal(t, f.Name == "good", f.Best)
	}
	// The handoff's first request carried the transcript.
	var handoff string
	for _, r := range srv.ModelRequests() {
		if strings.Contains(string(r.Body), "write good") {
			handoff = string(r.Body)
			break
		}
	}
	assert.Contains(t, handoff, "ready when you are", "the transcript so far went with the handoff")

	// The handoff fork's ACP session is forked natively at its end.
	on("native-fork", modelserver.Reply{Text: "Forked; you had me write good."})
	out, errOut, code = sh.tine(t, db, "fork", "good", "--name", "deeper", "-m", "what did I ask? native-fork", "--wait", "--json")
	require.NoError(t, json.Unmarshal([]byte(out), &res), "%s\n%s", out, errOut)
	require.Equal(t, 0, code, errOut)
	deeper := res.Forks[0]
	assert.False(t, deeper.Handoff, "a native ACP fork, not a handoff")
	assert.NotEqual(t, "", deeper.NativeID)
	reqs := srv.ModelRequests()
	assert.Contains(t, string(reqs[len(reqs)-1].Body), "Wrote good.txt.", "the fork holds its parent's session")

	on("next-turn", modelserver.Reply{Text: "Still here."})
	out, errOut, code = sh.tine(t, db, "run", "deeper", "-m", "and now? next-turn", "--wait", "--json")
	require.NoError(t, json.Unmarshal([]byte(out), &res), "%s\n%s", out, errOut)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, deeper.ID, res.Forks[0].ID, "its next turn goes on it")
	reqs = srv.ModelRequests()
	assert.Contains(t, string(reqs[len(reqs)-1].Body), "native-fork", "it resumed its own session")

	// Claude Code keeps each ACP run's session under the ACP session's
	// id: an import finds those files and stores none of them again (two
	// runs never hold one conversation id, nor count its tokens twice).
	out, errOut, code = sh.tine(t, db, "import", "--json")
	require.Equal(t, 0, code, errOut)
	var sum importer.Summary
	require.NoError(t, json.Unmarshal([]byte(out), &sum), out)
	assert.Zero(t, sum.Runs, "no ACP run's session imported as a tree of its own")
	assert.Equal(t, 3, sum.Driven, "good's, bad's and deeper's sessions")
	out, _, code = sh.tine(t, db, "ls", "--json")
	require.Equal(t, 0, code)
	var all []runJSON
	require.NoError(t, json.Unmarshal([]byte(out), &all))
	holders := map[string]int{}
	for _, r := range all {
		if r.NativeID != "" {
			holders[r.NativeID]++
		}
	}
	for id, n := range holders {
		assert.Equal(t, 1, n, "conversation %s is held by one run", id)
	}
}

// TestCancelARealAgentFromAnotherProcess: a fork's turn runs in the
// background process `tine fork` starts; `tine cancel`, from elsewhere,
// stops it: the real agent is stopped, the fork is recorded cancelled
// with what it had stored, and nothing is left running.
func TestCancelARealAgentFromAnotherProcess(t *testing.T) {
	t.Parallel()
	srv := quietServer(t)
	home := t.TempDir()
	gitInit(t, filepath.Join(home, "project"))
	a := setupAgent(t, "claude", home, srv.URL())
	tools := true
	srv.Push(modelserver.Reply{Text: "Hello.", Match: &modelserver.Match{Tools: &tools, Contains: "turn-one"}},
		modelserver.Reply{Text: "Noted.", Match: &modelserver.Match{Tools: &tools, Contains: "turn-two"}},
		modelserver.Reply{Text: "slow", Match: &modelserver.Match{Tools: &tools, Contains: "take your time"},
			Fault: &modelserver.Fault{Kind: modelserver.FaultDelay, Delay: 2 * time.Minute}})
	session := a.session(t)
	sh := asShell(a.env, "CLAUDE_CONFIG_DIR")
	db := filepath.Join(t.TempDir(), "t.db")
	_, errOut, code := sh.tine(t, db, "import")
	require.Equal(t, 0, code, errOut)
	_, errOut, code = sh.tine(t, db, "fork", session, "--name", "slow", "-m", "take your time")
	require.Equal(t, 0, code, errOut)
	// The background process runs it; wait until the model is asked.
	require.Eventually(t, func() bool {
		for _, r := range srv.ModelRequests() {
			if strings.Contains(string(r.Body), "take your time") {
				return true
			}
		}
		return false
	}, time.Minute, 100*time.Millisecond)
	st, err := store.Open(db)
	require.NoError(t, err)
	defer st.Close()
	fork, err := st.Resolve(context.Background(), "slow")
	require.NoError(t, err)
	require.Equal(t, model.Running, fork.Status)
	owner := fork.OwnerPID
	require.NotZero(t, owner)
	require.NotEqual(t, os.Getpid(), owner, "another process runs it")

	start := time.Now()
	out, errOut, code := sh.tine(t, db, "cancel", "slow")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "slow: cancelled")
	t.Logf("tine cancel took %s", time.Since(start).Round(time.Millisecond))
	fork, err = st.Resolve(context.Background(), "slow")
	require.NoError(t, err)
	assert.Equal(t, model.Cancelled, fork.Status)
	assert.GreaterOrEqual(t, fork.OwnMessages, 1, "the message it was given is kept")
	// The background process ends once its only turn is over (here it
	// stays a zombie: the test, its parent, never waits for it).
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", owner))
		if err != nil {
			return syscall.Kill(owner, 0) != nil
		}
		i := strings.LastIndexByte(string(b), ')')
		return i > 0 && strings.HasPrefix(string(b[i+1:]), " Z")
	}, 30*time.Second, 100*time.Millisecond)
}

// TestRecordAClaudeForkAsItsTape: with --record, a fork's Claude Code turns
// reach the model through tine's gateway: the agent holds a placeholder
// key, the real one goes to the model API only, and every model call is
// stored as a step of the fork's tape, a later turn's after the first's.
func TestRecordAClaudeForkAsItsTape(t *testing.T) {
	t.Parallel()
	srv := quietServer(t)
	home := t.TempDir()
	gitInit(t, filepath.Join(home, "project"))
	a := setupAgent(t, "claude", home, srv.URL())
	on := replies(srv)
	on("turn-one", modelserver.Reply{Text: "Hello."})
	on("turn-two", modelserver.Reply{Text: "Noted."})
	session := a.session(t)
	sh := asShell(a.env, "CLAUDE_CONFIG_DIR")
	db := filepath.Join(t.TempDir(), "t.db")
	_, errOut, code := sh.tine(t, db, "import")
	require.Equal(t, 0, code, errOut)
	before := len(srv.ModelRequests())
	on("write rec", modelserver.Reply{Text: "Writing.", ToolCalls: []modelserver.ToolCall{a.write("rec.txt")}},
		modelserver.Reply{Text: "Wrote rec.txt."})
	out, errOut, code := sh.tine(t, db, "fork", session, "--name", "rec", "-m", "write rec", "--record", "--wait", "--json")
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	on("again", modelserver.Reply{Text: "Still here."})
	_, errOut, code = sh.tine(t, db, "run", "rec", "-m", "again", "--record", "--wait")
	require.Equal(t, 0, code, errOut)

	st, err := store.Open(db)
	require.NoError(t, err)
	defer st.Close()
	ctx := context.Background()
	fork, err := st.Resolve(ctx, "rec")
	require.NoError(t, err)
	tape, err := st.Tape(ctx, fork.ID)
	require.NoError(t, err)
	require.Len(t, tape, 3, "two calls in the first turn, one in the second")
	for i, s := range tape {
		assert.Equal(t, i+1, s.Step)
		require.NotNil(t, s.Request)
	}
	assert.Contains(t, *tape[0].Request, "write rec")
	assert.Contains(t, *tape[1].Request, "tool_result", "step 2 carries the tool's output")
	assert.Contains(t, *tape[2].Request, "again")
	assert.Contains(t, tape[1].Response, "Wrote rec.txt.")
	// The model API got the real key on every call; the agent never had it.
	for _, r := range srv.ModelRequests()[before:] {
		assert.Equal(t, "test", r.Header.Get("X-Api-Key"), r.Path)
	}
}
