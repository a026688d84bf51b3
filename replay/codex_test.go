package replay

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tine/internal/modelserver"
)

// runCodex runs one `codex exec` turn of the real CLI with its provider's
// base URL pointed at base (testdata/agents/README.md has the config).
func runCodex(t *testing.T, bin, home, dir, base, prompt string) (string, error) {
	codexHome := filepath.Join(home, ".codex")
	if err := os.MkdirAll(codexHome, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`model = "gpt-5.5"
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
`, base)
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", prompt)
	cmd.Dir = dir
	node, _ := exec.LookPath("node")
	cmd.Env = []string{"HOME=" + home, "PATH=" + filepath.Dir(bin) + ":" + filepath.Dir(node) + ":/usr/local/bin:/usr/bin:/bin",
		"TZ=UTC", "LANG=C.UTF-8", "TERM=dumb", "NO_COLOR=1", "SHELL=/bin/bash", "USER=tine",
		"CODEX_HOME=" + codexHome, "TINE_TEST_API_KEY=" + placeholder}
	cmd.Stdin = nil
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestCodexReplay is TestClaudeCodeReplay with the real Codex (OpenAI
// Responses): recorded through the gateway, replayed clean from a fresh
// clone elsewhere, and diverging as tool where a file of the base changed.
func TestCodexReplay(t *testing.T) {
	bin := agentBin(t, "codex")
	root := t.TempDir()
	home := filepath.Join(root, "home")
	orig := filepath.Join(root, "orig")
	for _, d := range []string{home, orig} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	git(t, orig, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(orig, "notes.txt"), []byte("first line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
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
		modelserver.Reply{Text: "Writing a file.", ToolCalls: []modelserver.ToolCall{modelserver.Call("exec_command", map[string]any{"cmd": "echo second line >> notes.txt && echo done"})}, Match: m},
		modelserver.Reply{ToolCalls: []modelserver.ToolCall{modelserver.Call("exec_command", map[string]any{"cmd": "cat notes.txt && ls"})}, Match: m},
		modelserver.Reply{Text: "The file has two lines.", Match: m},
	)
	rec := &MemRecorder{}
	run, err := e.g.NewRun(RunConfig{ID: "codex-rec", Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	const prompt = "append a line to notes.txt and show it"
	if out, err := runCodex(t, bin, home, clone("recorded"), run.URL(), prompt); err != nil {
		t.Fatalf("codex (record): %v\n%s", err, out)
	}
	run.Close()
	tape := Tape(rec.Steps())
	for _, s := range tape {
		t.Logf("step %d: %s %s status %d stream %v, %v", s.N, s.Method, s.Path, s.Status, s.Stream, s.Duration)
	}
	if len(tape) != 3 || e.ms.Pending() != 0 {
		t.Fatalf("%d steps taped, %d replies unused", len(tape), e.ms.Pending())
	}
	before := len(e.ms.ModelRequests())

	t.Run("clean", func(t *testing.T) {
		dir := clone("replay-clean")
		rrec := &MemRecorder{}
		run, _ := e.g.NewRun(RunConfig{ID: "codex-replay", Tape: tape, Recorder: rrec})
		defer run.Close()
		out, err := runCodex(t, bin, home, dir, run.URL(), prompt)
		st := run.Status()
		if st.Divergence != nil {
			t.Fatalf("diverged: %s\nfields %v\n%s", st.Divergence.Detail(), st.Divergence.Fields, st.Divergence.Diff)
		}
		if err != nil {
			t.Fatalf("codex (replay): %v\n%s", err, out)
		}
		if st.Replayed != 3 || len(e.ms.ModelRequests()) != before {
			t.Errorf("replayed %d; the upstream got %d calls", st.Replayed, len(e.ms.ModelRequests())-before)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "notes.txt")); string(b) != "first line\nsecond line\n" {
			t.Errorf("notes.txt is %q", b)
		}
		for k, s := range rrec.Steps() {
			t.Logf("replayed step %d: raw fields that normalisation absorbed: %v", s.N, rawDiffWire(WireResponses, tape[k].Request, s.Request))
		}
		if !strings.Contains(out, "The file has two lines.") {
			t.Errorf("final answer missing:\n%s", out)
		}
	})
	t.Run("a file in the base changed", func(t *testing.T) {
		dir := clone("replay-changed")
		if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("another first line\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		git(t, dir, "commit", "-q", "-am", "changed")
		run, _ := e.g.NewRun(RunConfig{ID: "codex-replay-2", Tape: tape})
		defer run.Close()
		out, _ := runCodex(t, bin, home, dir, run.URL(), prompt)
		d := run.Status().Divergence
		if d == nil {
			t.Fatalf("no divergence\n%s", out)
		}
		t.Logf("%s\n%s", d.Detail(), d.Diff)
		if d.Kind != KindTool || d.Step != 3 || !strings.Contains(d.Diff, "+another first line") {
			t.Errorf("got step %d %s at %s", d.Step, d.Kind, d.Path)
		}
	})
}
