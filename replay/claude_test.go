package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tine/internal/modelserver"
)

// agentBin is a pinned agent CLI (testdata/agents/README.md), or a skip.
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

// runClaude runs one headless turn of the real CLI against base.
func runClaude(t *testing.T, bin, home, dir, base, prompt string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-p", prompt, "--output-format", "stream-json", "--verbose", "--allowedTools", "Bash")
	cmd.Dir = dir
	node, _ := exec.LookPath("node")
	cmd.Env = []string{"HOME=" + home, "PATH=" + filepath.Dir(bin) + ":" + filepath.Dir(node) + ":/usr/local/bin:/usr/bin:/bin",
		"TZ=UTC", "LANG=C.UTF-8", "TERM=dumb", "NO_COLOR=1", "SHELL=/bin/bash", "USER=tine",
		"ANTHROPIC_BASE_URL=" + base, "ANTHROPIC_API_KEY=" + placeholder,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1"}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestClaudeCodeReplay drives the real Claude Code through the gateway:
// a recording of a few Bash steps in a git repository, then replays of it
// from fresh clones at the same commit, elsewhere on disk. The clean replay
// must match every request after normalisation (which checks the
// normalisation list against the real CLI); a clone whose file differs
// must diverge with kind tool at the step that reads it.
func TestClaudeCodeReplay(t *testing.T) {
	bin := agentBin(t, "claude")
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
	rec1 := clone("recorded")

	e := newEnv(t)
	tools := true
	m := &modelserver.Match{Tools: &tools}
	e.ms.Push(
		modelserver.Reply{Text: "Writing a file.", ToolCalls: []modelserver.ToolCall{modelserver.Call("Bash", map[string]any{"command": "echo second line >> notes.txt && echo done", "description": "Append a line"})}, Match: m},
		modelserver.Reply{ToolCalls: []modelserver.ToolCall{modelserver.Call("Bash", map[string]any{"command": "cat notes.txt && ls", "description": "Show the file"})}, Match: m},
		modelserver.Reply{Text: "The file has two lines.", Match: m},
	)
	rec := &MemRecorder{}
	run, err := e.g.NewRun(RunConfig{ID: "claude-rec", Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	const prompt = "append a line to notes.txt and show it"
	start := time.Now()
	if out, err := runClaude(t, bin, home, rec1, run.URL(), prompt); err != nil {
		t.Fatalf("claude (record): %v\n%s", err, out)
	}
	t.Logf("recorded in %v", time.Since(start))
	run.Close()
	tape := Tape(rec.Steps())
	var model []Step
	for _, s := range tape {
		t.Logf("step %d: %s %s status %d stream %v, first byte %v, %v", s.N, s.Method, s.Path, s.Status, s.Stream, s.FirstByte, s.Duration)
		if s.Wire == WireAnthropic {
			model = append(model, s)
		}
	}
	if len(tape) < 3 || e.ms.Pending() != 0 {
		t.Fatalf("%d steps taped, %d replies unused", len(tape), e.ms.Pending())
	}
	if !strings.Contains(string(tape[2].Request), "second line") {
		t.Fatalf("step 3 does not carry the tool output: %.300s", tape[2].Request)
	}
	upstreamBefore := len(e.ms.ModelRequests())

	t.Run("clean", func(t *testing.T) {
		dir := clone("replay-clean")
		rrec := &MemRecorder{}
		run, _ := e.g.NewRun(RunConfig{ID: "claude-replay", Tape: tape, Recorder: rrec})
		defer run.Close()
		out, err := runClaude(t, bin, home, dir, run.URL(), prompt)
		st := run.Status()
		if st.Divergence != nil {
			t.Fatalf("diverged: %s\nfields %v\n%s", st.Divergence.Detail(), st.Divergence.Fields, st.Divergence.Diff)
		}
		if err != nil {
			t.Fatalf("claude (replay): %v\n%s", err, out)
		}
		if st.Replayed != len(tape) || len(e.ms.ModelRequests()) != upstreamBefore {
			t.Errorf("replayed %d of %d; upstream got %d calls", st.Replayed, len(tape), len(e.ms.ModelRequests())-upstreamBefore)
		}
		b, _ := os.ReadFile(filepath.Join(dir, "notes.txt"))
		if string(b) != "first line\nsecond line\n" {
			t.Errorf("the replayed tool did not run for real: notes.txt is %q", b)
		}
		for k, s := range rrec.Steps() {
			t.Logf("replayed step %d: answered in %v; raw fields that normalisation absorbed: %v", s.N, s.Duration, rawDiffWire(WireAnthropic, tape[k].Request, s.Request))
		}
		var res struct {
			Result string `json:"result"`
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		_ = json.Unmarshal([]byte(lines[len(lines)-1]), &res)
		if res.Result != "The file has two lines." {
			t.Errorf("final answer %q", res.Result)
		}
	})
	t.Run("a file in the base changed", func(t *testing.T) {
		dir := clone("replay-changed")
		if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("another first line\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		git(t, dir, "commit", "-q", "-am", "changed")
		run, _ := e.g.NewRun(RunConfig{ID: "claude-replay-2", Tape: tape})
		defer run.Close()
		out, _ := runClaude(t, bin, home, dir, run.URL(), prompt)
		st := run.Status()
		d := st.Divergence
		if d == nil {
			t.Fatalf("no divergence; status %+v\n%s", st, out)
		}
		t.Logf("%s\n%s", d.Detail(), d.Diff)
		// The gitStatus snapshot differs (another commit) but is normalised;
		// the first step that differs is the one whose tool read the file.
		if d.Kind != KindTool || d.Step != 3 || !strings.Contains(d.Diff, "+another first line") {
			t.Errorf("got step %d %s at %s", d.Step, d.Kind, d.Path)
		}
	})
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
	x, y := dec(a), dec(b)
	c := &comparer{wire: wire}
	c.walk("", x, y, false)
	var out []string
	for _, d := range append(c.model, c.tool...) {
		out = append(out, d.path)
	}
	return out
}
