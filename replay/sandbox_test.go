package replay

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// anthropicStep is a taped step: a request whose last user text is say,
// answered with content.
func anthropicStep(n int, say string, content ...map[string]any) Step {
	req, _ := json.Marshal(map[string]any{"model": "claude-x", "max_tokens": 100,
		"messages": []any{map[string]any{"role": "user", "content": say}}})
	answer, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("msg_%d", n), "type": "message", "role": "assistant",
		"model": "claude-x", "content": content, "stop_reason": "tool_use", "usage": map[string]any{"input_tokens": 1, "output_tokens": 1}})
	return Step{N: n, Wire: WireAnthropic, Method: http.MethodPost, Path: "/v1/messages", Request: req, Status: 200,
		ContentType: "application/json", Answer: answer}
}

// TestReplayNeverRunsToolsOutsideTheSandbox: a taped answer that calls a
// web or MCP tool, or one the agent does not know, is not served: the
// replay diverges at that step, naming the tool; local tools are served.
func TestReplayNeverRunsToolsOutsideTheSandbox(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tool := range []string{"WebFetch", "WebSearch", "mcp__github__create_issue", "SomethingNew"} {
		tape := Tape{anthropicStep(1, "go", map[string]any{"type": "tool_use", "id": "t1", "name": tool, "input": map[string]any{}})}
		run, err := e.g.NewRun(RunConfig{Tape: tape, N: 1})
		if err != nil {
			t.Fatal(err)
		}
		code, body := post(t, run, "/v1/messages", WireAnthropic, tape[0].Request)
		d := run.Status().Divergence
		run.Close()
		if code != http.StatusBadRequest || d == nil {
			t.Fatalf("%s: served (%d %s)", tool, code, body)
		}
		if d.Kind != KindTool || d.Step != 1 || !strings.Contains(d.Detail(), tool) {
			t.Errorf("%s: %s", tool, d.Detail())
		}
	}
	tape := Tape{anthropicStep(1, "go", map[string]any{"type": "tool_use", "id": "t1", "name": "Bash", "input": map[string]any{"command": "ls"}})}
	run, _ := e.g.NewRun(RunConfig{Tape: tape, N: 1})
	defer run.Close()
	if code, body := post(t, run, "/v1/messages", WireAnthropic, tape[0].Request); code != http.StatusOK {
		t.Fatalf("Bash refused: %d %s", code, body)
	}
}

// TestDivergenceNamesTheClosestStep: a request that skips a taped step
// is reported at the step it came as, closest to the taped step it is.
func TestDivergenceNamesTheClosestStep(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	text := func(s string) map[string]any { return map[string]any{"type": "text", "text": s} }
	tape := Tape{anthropicStep(1, "one", text("a")), anthropicStep(2, "two", text("b")), anthropicStep(3, "three", text("c"))}
	run, err := e.g.NewRun(RunConfig{Tape: tape, N: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	post(t, run, "/v1/messages", WireAnthropic, tape[0].Request)
	post(t, run, "/v1/messages", WireAnthropic, tape[2].Request) // step 2 skipped
	d := run.Status().Divergence
	if d == nil {
		t.Fatal("no divergence")
	}
	if d.Step != 2 || d.Closest != 3 || d.ClosestFields != 0 || !strings.Contains(d.Detail(), "closest to taped step 3") {
		t.Errorf("step %d closest %d (%d fields): %s", d.Step, d.Closest, d.ClosestFields, d.Detail())
	}
}
