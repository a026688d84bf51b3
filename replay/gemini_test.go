package replay

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"tine/model"
)

// geminiCLI is Gemini CLI's fixtures.
func geminiCLI(t *testing.T) *cli {
	t.Helper()
	for i := range clis {
		if clis[i].wire == WireGemini {
			loadCLI(t, &clis[i])
			return &clis[i]
		}
	}
	t.Fatal("no Gemini CLI fixtures")
	return nil
}

// TestGeminiModelInThePath: the Gemini API names the model in the path,
// not the body; a replayed call that asks another model diverges as
// model, at that step.
func TestGeminiModelInThePath(t *testing.T) {
	c := geminiCLI(t)
	e := newEnv(t)
	tape, _ := e.record(t, c)
	run, err := e.g.NewRun(RunConfig{Tape: tape})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	for k, fx := range c.main {
		p := fx.Path
		if k == 1 {
			p = strings.Replace(p, "/models/gemini-2.5-flash:", "/models/gemini-2.5-pro:", 1)
		}
		status, _ := post(t, run, p, c.wire, fx.Body)
		if want := []int{200, 400, 400}[k]; status != want {
			t.Fatalf("step %d: %d, want %d", k+1, status, want)
		}
	}
	d := run.Status().Divergence
	if d == nil || d.Step != 2 || d.Kind != KindModel || d.Taped != "gemini-2.5-flash" || d.Actual != "gemini-2.5-pro" {
		t.Fatalf("divergence %+v", d)
	}
}

// TestGeminiKeyStaysHome: the run's key the agent sends, in the key
// header or the key query parameter, never goes up; the real key goes as
// x-goog-api-key. A call that is not a model call (countTokens) passes
// with the real key and is no step. A refusal speaks the Gemini API's
// error shape.
func TestGeminiKeyStaysHome(t *testing.T) {
	c := geminiCLI(t)
	e := newEnv(t)
	rec := &MemRecorder{}
	run, _ := e.g.NewRun(RunConfig{Recorder: rec})
	defer run.Close()
	e.ms.Push(*c.main[0].Reply)
	req, _ := http.NewRequest(http.MethodPost, run.URL()+c.main[0].Path+"?alt=sse&key="+run.Key(), bytes.NewReader(c.main[0].Body))
	req.Header.Set("X-Goog-Api-Key", run.Key())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	count, _ := http.NewRequest(http.MethodPost, run.URL()+"/v1beta/models/gemini-2.5-flash:countTokens", strings.NewReader(`{"contents":[]}`))
	count.Header.Set("X-Goog-Api-Key", run.Key())
	if resp, err := http.DefaultClient.Do(count); err != nil || resp.StatusCode != 200 {
		t.Fatalf("countTokens: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	reqs := e.ms.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the upstream got %d calls", len(reqs))
	}
	for _, r := range reqs {
		all := strings.Join(flat(r.Header), " ") + " " + r.Query
		if r.Header.Get("X-Goog-Api-Key") != "real-key" || strings.Contains(all, run.Key()) {
			t.Errorf("%s: key %q, headers and query %s", r.Path, r.Header.Get("X-Goog-Api-Key"), all)
		}
	}
	if reqs[0].Query != "alt=sse" {
		t.Errorf("query %q", reqs[0].Query)
	}
	if s := rec.Steps(); len(s) != 1 || !s[0].Stream || s[0].Wire != WireGemini {
		t.Errorf("steps %+v", s)
	}

	// A replay that diverges refuses in the Gemini API's shape.
	tape, _ := e.record(t, c)
	rrun, _ := e.g.NewRun(RunConfig{Tape: tape})
	defer rrun.Close()
	status, body := post(t, rrun, c.main[0].Path, c.wire, replace(t, c.main[0].Body, c.system, "You are another agent."))
	var refusal struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Status  string `json:"status"`
		} `json:"error"`
	}
	if status != 400 || json.Unmarshal(body, &refusal) != nil || refusal.Error.Code != 400 || refusal.Error.Status != "INVALID_ARGUMENT" ||
		!strings.Contains(refusal.Error.Message, "diverged at step 1") {
		t.Errorf("refusal %d %s", status, body)
	}
}

// TestAssembleGemini: a stream's chunks make one answer: pieces of one
// text joined, thoughts apart from text, calls whole, the last chunk's
// finishReason and usage; a stream that never finished, or that carried
// an error, makes none. An answer encoded as a stream assembles to itself.
func TestAssembleGemini(t *testing.T) {
	chunk := func(parts string, last bool) Event {
		s := `{"candidates":[{"content":{"role":"model","parts":` + parts + `},"index":0`
		if last {
			s += `,"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":3}`
		} else {
			s += `}]`
		}
		return Event{Data: s + `,"modelVersion":"m","responseId":"r1"}`}
	}
	events := []Event{
		chunk(`[{"text":"let me ","thought":true}]`, false),
		chunk(`[{"text":"think","thought":true}]`, false),
		chunk(`[{"text":"I'll "}]`, false),
		chunk(`[{"text":"run it."}]`, false),
		chunk(`[{"functionCall":{"id":"c1","name":"run_shell_command","args":{"command":"ls"}},"thoughtSignature":"sig"}]`, true),
	}
	a := Assemble(WireGemini, events)
	want := `{"candidates":[{"content":{"role":"model","parts":[{"text":"let me think","thought":true},{"text":"I'll run it."},` +
		`{"functionCall":{"id":"c1","name":"run_shell_command","args":{"command":"ls"}},"thoughtSignature":"sig"}]},"finishReason":"STOP","index":0}],` +
		`"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":3},"modelVersion":"m","responseId":"r1"}`
	if !jsonEqual(a, []byte(want)) {
		t.Fatalf("assembled\n%s\nwant\n%s", a, want)
	}
	if names := ToolNames(WireGemini, a); len(names) != 1 || names[0] != "run_shell_command" {
		t.Errorf("tool names %v", names)
	}
	if b := Assemble(WireGemini, events[:4]); b != nil {
		t.Errorf("an unfinished stream assembled to %s", b)
	}
	if b := Assemble(WireGemini, append(events[:2:2], Event{Data: `{"error":{"code":500,"message":"x"}}`}, events[4])); b != nil {
		t.Errorf("a stream with an error assembled to %s", b)
	}
	if b := Assemble(WireGemini, encodeStream(WireGemini, a, nil)); !jsonEqual(a, b) {
		t.Errorf("re-encoded, it assembles to %s", b)
	}
}

// TestGeminiTranscriptTape: a tape made from a Gemini CLI transcript
// answers with its messages in the Gemini API's shape and checks the
// function responses a replay's requests carry, by call id.
func TestGeminiTranscriptTape(t *testing.T) {
	c := geminiCLI(t)
	var req struct {
		Contents []struct {
			Parts []json.RawMessage `json:"parts"`
		} `json:"contents"`
	}
	if err := json.Unmarshal(c.main[2].Body, &req); err != nil {
		t.Fatal(err)
	}
	var fr struct {
		FunctionResponse struct {
			ID       string `json:"id"`
			Response struct {
				Output string `json:"output"`
			} `json:"response"`
		} `json:"functionResponse"`
	}
	if err := json.Unmarshal(req.Contents[4].Parts[0], &fr); err != nil || fr.FunctionResponse.ID == "" {
		t.Fatalf("%v %s", err, req.Contents[4].Parts[0])
	}
	id, out := fr.FunctionResponse.ID, fr.FunctionResponse.Response.Output
	msgs := []model.Message{
		{Role: model.User, Parts: []model.Part{{Kind: model.Text, Text: "run echo hi in the shell"}}},
		{Role: model.Assistant, Model: "gemini-2.5-flash", Parts: []model.Part{{Kind: model.Text, Text: "I'll run it."},
			{Kind: model.ToolCall, ToolCallID: id, ToolName: "run_shell_command", ToolInput: `{"command":"echo hi && ls"}`}}},
		{Role: model.Tool, Parts: []model.Part{{Kind: model.ToolResult, ToolCallID: id, ToolName: "run_shell_command", Text: out}}},
		{Role: model.Assistant, Parts: []model.Part{{Kind: model.Text, Text: "The command printed: hi"}}},
	}
	tape, err := TranscriptTape(WireGemini, msgs, 0)
	if err != nil || len(tape) != 2 {
		t.Fatalf("%d steps, %v", len(tape), err)
	}
	text, _, name, args := answerParts(t, WireGemini, tape[0].Answer)
	if text != "I'll run it." || name != "run_shell_command" || !jsonEqual([]byte(args), []byte(`{"command":"echo hi && ls"}`)) || tape[0].ToolOutputs[id] != out {
		t.Fatalf("step 1: %s, outputs %v", tape[0].Answer, tape[0].ToolOutputs)
	}
	if !strings.Contains(string(tape[0].Answer), `"id":"`+id+`"`) {
		t.Errorf("the call keeps its id: %s", tape[0].Answer)
	}
	e := newEnv(t)
	for _, tc := range []struct {
		name   string
		body   []byte
		status int
		kind   Kind
	}{
		{"the same output", c.main[2].Body, 200, ""},
		{"another output", replace(t, c.main[2].Body, c.toolOut, "bye"), 400, KindTool},
	} {
		run, _ := e.g.NewRun(RunConfig{Tape: tape})
		post(t, run, c.main[1].Path, c.wire, c.main[1].Body)
		status, got := post(t, run, c.main[2].Path, c.wire, tc.body)
		d := run.Status().Divergence
		run.Close()
		if status != tc.status || (tc.kind == "") != (d == nil) || (d != nil && (d.Kind != tc.kind || d.Step != 2)) {
			t.Errorf("%s: %d %s, divergence %+v", tc.name, status, got, d)
		}
		if tc.status == 200 && !strings.Contains(string(got), "The command printed: hi") {
			t.Errorf("%s: answered %s", tc.name, got)
		}
	}
}

// TestGeminiSkillsInAnyOrder: Gemini CLI lists the skills it found in the
// order a glob gave them, which changes from run to run: the same skills
// in another order are no divergence (its descriptor's Canonical), one
// skill fewer is.
func TestGeminiSkillsInAnyOrder(t *testing.T) {
	c := geminiCLI(t)
	const a, b = "skill-creator", "antigravity-support"
	// edit changes the request's skills: the system prompt's list, and
	// activate_skill's description and enum.
	edit := func(body []byte, list func(string) string, names func(string) string, enum func([]any) []any) []byte {
		var v map[string]any
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatal(err)
		}
		si := v["systemInstruction"].(map[string]any)["parts"].([]any)[0].(map[string]any)
		si["text"] = list(si["text"].(string))
		found := false
		for _, tl := range v["tools"].([]any) {
			for _, f := range tl.(map[string]any)["functionDeclarations"].([]any) {
				fd := f.(map[string]any)
				if fd["name"] != "activate_skill" {
					continue
				}
				found = true
				fd["description"] = names(fd["description"].(string))
				p := fd["parametersJsonSchema"].(map[string]any)["properties"].(map[string]any)["name"].(map[string]any)
				p["enum"] = enum(p["enum"].([]any))
			}
		}
		if !found {
			t.Fatal("no activate_skill")
		}
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	swapEntries := func(s string) string {
		start, end := strings.Index(s, "<available_skills>\n"), strings.Index(s, "\n</available_skills>")
		if start < 0 || end < start {
			t.Fatal("no <available_skills>")
		}
		inner := s[start+len("<available_skills>\n") : end]
		parts := strings.SplitAfter(inner, "</skill>\n")
		if len(parts) != 2 || !strings.Contains(parts[0], a) || !strings.Contains(parts[1], b) {
			t.Fatalf("the skills are not %s then %s: %q", a, b, inner)
		}
		return s[:start] + "<available_skills>\n" + parts[1] + "\n" + strings.TrimSuffix(parts[0], "\n") + s[end:]
	}
	swapNames := func(s string) string {
		old := "(Available: '" + a + "', '" + b + "')"
		if !strings.Contains(s, old) {
			t.Fatalf("no %s in %q", old, s)
		}
		return strings.Replace(s, old, "(Available: '"+b+"', '"+a+"')", 1)
	}
	same := func(s string) string { return s }
	for k, fx := range c.main {
		reordered := edit(fx.Body, swapEntries, swapNames, func(e []any) []any { return []any{e[1], e[0]} })
		if bytes.Equal(reorder(t, reordered), reorder(t, fx.Body)) {
			t.Fatalf("request %d: the reordering made the same request", k+1)
		}
		if m := testRules.Compare(c.wire, fx.Body, reordered); m != nil {
			t.Errorf("request %d, skills in another order: %s\n%s", k+1, m, m.Diff)
		}
		fewer := edit(fx.Body, same, same, func(e []any) []any { return e[:1] })
		if m := testRules.Compare(c.wire, fx.Body, fewer); m == nil || m.Kind != KindModel {
			t.Errorf("request %d, a skill fewer: %v", k+1, m)
		}
	}
}
