//go:build agents

package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tine/internal/modelserver"
)

// The real agent CLIs (the versions pinned in testdata/agents/README.md)
// recorded through the gateway against the scripted model server, then
// replayed from fresh clones of the repository elsewhere on disk. A clean
// replay must match every request after normalisation, which checks the
// normalisation list against the real CLIs; a clone whose file differs
// must diverge with kind tool at the step whose tool read it.

// agentBin is a pinned agent CLI, or a skip saying how to install it.
func agentBin(t *testing.T, name string) string {
	dir := os.Getenv("TINE_AGENTS_BIN")
	if dir == "" {
		dir = "/tmp/tine-agents/node_modules/.bin"
	}
	bin := filepath.Join(dir, name)
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("%s is not installed in %s (npm install --prefix /tmp/tine-agents the version pinned in testdata/agents/README.md, or set TINE_AGENTS_BIN)", name, dir)
	}
	return bin
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t",
		"GIT_AUTHOR_DATE=2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2026-01-01T00:00:00Z")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// realAgent says how to run one CLI headless against a base URL.
type realAgent struct {
	name string
	wire Wire
	// setup writes the agent's configuration for base into home and
	// returns its arguments (after the binary) and extra environment,
	// which gives it key.
	setup func(t *testing.T, home, base, key, prompt string) ([]string, []string)
	// call is a shell command as the agent's tool call.
	call func(cmd string) modelserver.ToolCall
	// text, when set, is the text the agent's output shows, put together
	// (its stream's pieces); default the output itself.
	text func(out string) string
}

var realAgents = []realAgent{
	{name: "claude", wire: WireAnthropic,
		setup: func(t *testing.T, home, base, key, prompt string) ([]string, []string) {
			return []string{"-p", prompt, "--output-format", "stream-json", "--verbose", "--allowedTools", "Bash"},
				[]string{"ANTHROPIC_BASE_URL=" + base, "ANTHROPIC_API_KEY=" + key, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
					"DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1"}
		},
		call: func(cmd string) modelserver.ToolCall {
			return modelserver.Call("Bash", map[string]any{"command": cmd, "description": "Run it"})
		}},
	{name: "codex", wire: WireResponses,
		setup: func(t *testing.T, home, base, key, prompt string) ([]string, []string) {
			codexHome := filepath.Join(home, ".codex")
			writeFile(t, filepath.Join(codexHome, "config.toml"), fmt.Sprintf(`model = "gpt-5.5"
model_provider = "tine"
approval_policy = "never"
sandbox_mode = "danger-full-access"

[analytics]
enabled = false

[model_providers.tine]
name = "tine replay gateway"
base_url = "%s/v1"
wire_api = "responses"
env_key = "TINE_TEST_API_KEY"
`, base))
			return []string{"exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", prompt},
				[]string{"CODEX_HOME=" + codexHome, "TINE_TEST_API_KEY=" + key}
		},
		call: func(cmd string) modelserver.ToolCall {
			return modelserver.Call("exec_command", map[string]any{"cmd": cmd})
		}},
	{name: "pi", wire: WireChat,
		setup: func(t *testing.T, home, base, key, prompt string) ([]string, []string) {
			agentDir := filepath.Join(home, ".pi", "agent")
			writeFile(t, filepath.Join(agentDir, "models.json"), fmt.Sprintf(`{"providers": {"tine": {"baseUrl": "%s/v1", "api": "openai-completions", "apiKey": "TINE_TEST_API_KEY",
  "models": [{"id": "tine-test-model", "name": "tine", "contextWindow": 128000, "maxTokens": 4096}]}}}`, base))
			writeFile(t, filepath.Join(agentDir, "settings.json"), `{"retry": {"enabled": false}}`)
			return []string{"-p", "--mode", "json", "--provider", "tine", "--model", "tine-test-model", prompt},
				[]string{"PI_OFFLINE=1", "PI_TELEMETRY=0", "TINE_TEST_API_KEY=" + key}
		},
		call: func(cmd string) modelserver.ToolCall {
			return modelserver.Call("bash", map[string]any{"command": cmd})
		}},
	{name: "gemini", wire: WireGemini,
		setup: func(t *testing.T, home, base, key, prompt string) ([]string, []string) {
			writeFile(t, filepath.Join(home, ".gemini", "settings.json"), `{"security":{"auth":{"selectedType":"gemini-api-key"}},"general":{"maxAttempts":1}}`)
			return []string{"--output-format", "stream-json", "--model", "gemini-2.5-flash", "--approval-mode", "yolo", "-p", prompt},
				[]string{"GOOGLE_GEMINI_BASE_URL=" + base, "GEMINI_API_KEY=" + key, "GEMINI_CLI_TRUST_WORKSPACE=true"}
		},
		call: func(cmd string) modelserver.ToolCall {
			return modelserver.Call("run_shell_command", map[string]any{"command": cmd})
		},
		text: func(out string) string {
			var b strings.Builder
			for _, l := range strings.Split(out, "\n") {
				var ev struct{ Type, Role, Content string }
				if json.Unmarshal([]byte(l), &ev) == nil && ev.Type == "message" && ev.Role == "assistant" {
					b.WriteString(ev.Content)
				}
			}
			return b.String()
		}},
}

func writeFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// run runs one headless turn in dir with the agent pointed at the
// gateway's run to, with its key.
func (a realAgent) run(t *testing.T, bin, home, dir string, to postTo, prompt string) (string, error) {
	args, env := a.setup(t, home, to.URL(), to.Key(), prompt)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	node, _ := exec.LookPath("node")
	cmd.Env = append([]string{"HOME=" + home, "PATH=" + filepath.Dir(bin) + ":" + filepath.Dir(node) + ":/usr/local/bin:/usr/bin:/bin",
		"TZ=UTC", "LANG=C.UTF-8", "TERM=dumb", "NO_COLOR=1", "SHELL=/bin/bash", "USER=tine", "GIT_TERMINAL_PROMPT=0"}, env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestClaudeCodeReplay(t *testing.T) { testAgentReplay(t, realAgents[0]) }
func TestCodexReplay(t *testing.T)      { testAgentReplay(t, realAgents[1]) }
func TestPiReplay(t *testing.T)         { testAgentReplay(t, realAgents[2]) }
func TestGeminiReplay(t *testing.T)     { testAgentReplay(t, realAgents[3]) }

// testAgentReplay runs in parallel with the other agents': each has its
// own model server, gateway, home and clones.
func testAgentReplay(t *testing.T, a realAgent) {
	t.Parallel()
	bin := agentBin(t, a.name)
	root := t.TempDir()
	home := filepath.Join(root, "home")
	orig := filepath.Join(root, "orig")
	writeFile(t, filepath.Join(orig, "notes.txt"), "first line\n")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, orig, "init", "-q", "-b", "main")
	git(t, orig, "add", ".")
	git(t, orig, "commit", "-q", "-m", "initial commit")
	clone := func(name string) string {
		d := filepath.Join(root, name)
		git(t, root, "clone", "-q", orig, d)
		return d
	}

	e := newEnv(t)
	tools := true
	m := &modelserver.Match{Tools: &tools}
	e.ms.Push(
		modelserver.Reply{Text: "Writing a file.", ToolCalls: []modelserver.ToolCall{a.call("echo second line >> notes.txt && echo done")}, Match: m},
		modelserver.Reply{ToolCalls: []modelserver.ToolCall{a.call("cat notes.txt && git ls-remote origin 2>&1")}, Match: m},
		modelserver.Reply{Text: "The file has two lines.", Match: m},
	)
	rec := &MemRecorder{}
	run, err := e.g.NewRun(RunConfig{ID: a.name + "-rec", Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	const prompt = "append a line to notes.txt and show it"
	if out, err := a.run(t, bin, home, clone("recorded"), run, prompt); err != nil {
		t.Fatalf("%s (record): %v\n%s", a.name, err, out)
	}
	run.Close()
	tape := Tape(rec.Steps())
	for _, s := range tape {
		t.Logf("step %d: %s %s status %d stream %v, upstream first byte %v, whole %v", s.N, s.Method, s.Path, s.Status, s.Stream, s.FirstByte, s.Duration)
	}
	if len(tape) != 3 || e.ms.Pending() != 0 {
		t.Fatalf("%d steps taped, %d replies unused", len(tape), e.ms.Pending())
	}
	if !strings.Contains(string(tape[2].Request), "second line") {
		t.Fatalf("step 3 does not carry the tool output: %.300s", tape[2].Request)
	}
	before := len(e.ms.ModelRequests())

	t.Run("clean", func(t *testing.T) {
		dir := clone("replay-clean")
		rrec := &MemRecorder{}
		run, _ := e.g.NewRun(RunConfig{ID: a.name + "-replay", Tape: tape, Recorder: rrec})
		defer run.Close()
		out, err := a.run(t, bin, home, dir, run, prompt)
		st := run.Status()
		if st.Divergence != nil {
			t.Fatalf("diverged: %s\nfields %v\n%s", st.Divergence.Detail(), st.Divergence.Fields, st.Divergence.Diff)
		}
		if err != nil {
			t.Fatalf("%s (replay): %v\n%s", a.name, err, out)
		}
		if st.Replayed != 3 || len(e.ms.ModelRequests()) != before {
			t.Errorf("replayed %d; the upstream got %d calls", st.Replayed, len(e.ms.ModelRequests())-before)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "notes.txt")); string(b) != "first line\nsecond line\n" {
			t.Errorf("the replayed tool did not run for real: notes.txt is %q", b)
		}
		for k, s := range rrec.Steps() {
			t.Logf("replayed step %d: served in %v; raw fields that normalisation absorbed: %v", s.N, s.Duration, rawDiffWire(a.wire, tape[k].Request, s.Request))
		}
		if a.text != nil {
			out = a.text(out)
		}
		if !strings.Contains(out, "The file has two lines.") {
			t.Errorf("final answer missing:\n%s", out)
		}
	})
	t.Run("a file in the base changed", func(t *testing.T) {
		dir := clone("replay-changed")
		writeFile(t, filepath.Join(dir, "notes.txt"), "another first line\n")
		git(t, dir, "commit", "-q", "-am", "changed")
		run, _ := e.g.NewRun(RunConfig{ID: a.name + "-replay-2", Tape: tape})
		defer run.Close()
		out, _ := a.run(t, bin, home, dir, run, prompt)
		d := run.Status().Divergence
		if d == nil {
			t.Fatalf("no divergence\n%s", out)
		}
		t.Logf("%s\n%s", d.Detail(), d.Diff)
		// Claude's gitStatus snapshot differs here (another commit) but is
		// normalised: the first step that differs is the one whose tool
		// read the file.
		if d.Kind != KindTool || d.Step != 3 || !inDiff(d.Diff, "+another first line") {
			t.Errorf("got step %d %s at %s", d.Step, d.Kind, d.Path)
		}
	})
	t.Run("a command that needs the network", func(t *testing.T) {
		testAgentNetwork(t, a, bin, home, clone("replay-offline"), prompt, e, tape)
	})
}

// testAgentNetwork is run by testAgentReplay: the tool of step 2 reads
// the remote, which a replay cannot reach.
func testAgentNetwork(t *testing.T, a realAgent, bin, home, dir, prompt string, e *env, tape Tape) {
	git(t, dir, "remote", "set-url", "origin", "https://nonexistent.invalid/tine.git")
	run, _ := e.g.NewRun(RunConfig{ID: a.name + "-replay-3", Tape: tape})
	defer run.Close()
	out, _ := a.run(t, bin, home, dir, run, prompt)
	d := run.Status().Divergence
	if d == nil {
		t.Fatalf("no divergence\n%s", out)
	}
	t.Logf("%s\n%s", d.Detail(), d.Diff)
	if d.Kind != KindNetwork || d.Step != 3 || !strings.Contains(d.Diff, "Could not resolve host") {
		t.Errorf("got step %d %s at %s", d.Step, d.Kind, d.Path)
	}
}

// rawDiffWire lists the fields two requests differ in before normalisation.
func rawDiffWire(wire Wire, a, b []byte) []string {
	dec := func(b []byte) any {
		var v any
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		_ = d.Decode(&v)
		return v
	}
	c := &comparer{wire: wire}
	c.walk("", dec(a), dec(b), false)
	var out []string
	for _, d := range append(c.model, c.tool...) {
		out = append(out, d.path)
	}
	return out
}
