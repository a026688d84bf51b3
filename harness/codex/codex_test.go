package codex

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/internal/jsonl/jsonltest"
	"tine/model"
)

const testdata = "../../testdata"

// genRun is one CLI run of testdata/agents/out/codex/index.json.
type genRun struct {
	Step       string `json:"step"`
	SessionID  string `json:"session_id"`
	Transcript string `json:"transcript"`
	Stdout     string `json:"stdout"`
}

// genRuns reads the generator's index, which names the current files
// (their names change on every regeneration).
func genRuns(t *testing.T) map[string]genRun {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testdata, "agents/out/codex/index.json"))
	require.NoError(t, err)
	var idx struct{ Runs []genRun }
	require.NoError(t, json.Unmarshal(b, &idx))
	runs := map[string]genRun{}
	for _, r := range idx.Runs {
		runs[r.Step] = r
	}
	require.Len(t, runs, 3)
	return runs
}

// reported is the usage Codex printed for a run: the last turn.completed
// of its stdout, which is the thread's cumulative total.
func reported(t *testing.T, r genRun) tokenUsage {
	t.Helper()
	f, err := os.Open(filepath.Join(testdata, r.Stdout))
	require.NoError(t, err)
	defer f.Close()
	var u tokenUsage
	found := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var ev struct {
			Type  string `json:"type"`
			Usage struct {
				Input      int64 `json:"input_tokens"`
				Cached     int64 `json:"cached_input_tokens"`
				CacheWrite int64 `json:"cache_write_input_tokens"`
				Output     int64 `json:"output_tokens"`
			} `json:"usage"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &ev))
		if ev.Type == "turn.completed" {
			u = tokenUsage{input: ev.Usage.Input, cached: ev.Usage.Cached, cacheWrite: ev.Usage.CacheWrite, output: ev.Usage.Output}
			found = true
		}
	}
	require.NoError(t, sc.Err())
	require.True(t, found, "no turn.completed in %s", r.Stdout)
	return u
}

func minus(a, b tokenUsage) tokenUsage {
	return tokenUsage{input: a.input - b.input, cached: a.cached - b.cached, cacheWrite: a.cacheWrite - b.cacheWrite, output: a.output - b.output}
}

func parseOne(t *testing.T, path string) harness.ParsedRun {
	t.Helper()
	pf, err := ParseFile(path)
	require.NoError(t, err)
	require.Empty(t, pf.Skipped)
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, st.Size(), pf.Offset, "a complete file is read to its end")
	require.Len(t, pf.Runs, 1)
	return pf.Runs[0]
}

func roles(msgs []model.Message) []model.Role {
	var rs []model.Role
	for _, m := range msgs {
		rs = append(rs, m.Role)
	}
	return rs
}

// turnUsage sums the usage of the turn that starts at the prompt with index
// start and runs to the next prompt.
func turnUsage(msgs []model.Message, start int) model.Usage {
	var u model.Usage
	for i := start; i < len(msgs); i++ {
		if i > start && msgs[i].IsPrompt() {
			break
		}
		u = u.Add(msgs[i].Usage)
	}
	return u
}

func TestRealMainRollout(t *testing.T) {
	runs := genRuns(t)
	pr := parseOne(t, filepath.Join(testdata, runs["2-bash"].Transcript))
	msgs := pr.Messages

	// exec, then exec resume, appended to one file: one run.
	assert.Equal(t, runs["1-hello"].Transcript, runs["2-bash"].Transcript)
	assert.Equal(t, Harness, pr.Run.Harness)
	assert.Equal(t, runs["1-hello"].SessionID, pr.Run.NativeID)
	assert.Equal(t, "/tmp/tine-gen/project", pr.Run.Cwd)
	assert.Equal(t, "main", pr.Run.Branch)
	assert.Equal(t, "gpt-5.5", pr.Run.Model)
	assert.Equal(t, "say hello", pr.Run.Title)
	assert.Equal(t, model.Completed, pr.Run.Status)
	assert.False(t, pr.Run.CreatedAt.IsZero())
	assert.True(t, pr.Run.FinishedAt.After(pr.Run.CreatedAt))
	assert.Nil(t, pr.Fork)
	assert.Equal(t, -1, pr.Parent)

	// developer instructions, <environment_context>, prompt, answer,
	// prompt, (thinking, text, exec_command), its output, answer.
	require.Equal(t, []model.Role{model.System, model.System, model.User, model.Assistant,
		model.User, model.Assistant, model.Tool, model.Assistant}, roles(msgs))
	assert.Contains(t, msgs[0].Parts[0].Text, "<skills_instructions>")
	assert.True(t, strings.HasPrefix(msgs[1].Parts[0].Text, "<environment_context>"))
	var prompts []string
	for _, m := range msgs {
		if m.IsPrompt() {
			prompts = append(prompts, m.PlainText())
		}
	}
	assert.Equal(t, []string{"say hello", "run echo hi in the shell"}, prompts, "each text counted once, not again from event_msg")
	assert.Equal(t, "Hello! I am the scripted test model.", msgs[3].PlainText())

	step := msgs[5]
	require.Len(t, step.Parts, 3, "one response = one assistant message")
	assert.Equal(t, model.Part{Kind: model.Thinking, Text: "The user wants me to run a shell command."}, step.Parts[0])
	assert.Equal(t, model.Part{Kind: model.Text, Text: "I'll run it."}, step.Parts[1])
	call := step.Parts[2]
	assert.Equal(t, model.ToolCall, call.Kind)
	assert.Equal(t, "call_tine0002_0", call.ToolCallID)
	assert.Equal(t, "exec_command", call.ToolName)
	assert.JSONEq(t, `{"cmd":"echo hi && ls"}`, call.ToolInput)
	res := msgs[6].Parts[0]
	assert.Equal(t, model.ToolResult, res.Kind)
	assert.Equal(t, "call_tine0002_0", res.ToolCallID)
	assert.Equal(t, "exec_command", res.ToolName)
	assert.Contains(t, res.Text, "Output:\nhi\nREADME.md\nnotes.txt\n")
	assert.False(t, res.IsError)
	assert.Equal(t, "The command printed: hi", msgs[7].PlainText())

	var natives []string
	for _, m := range msgs {
		natives = append(natives, m.NativeID)
		if m.Role == model.Assistant {
			assert.Equal(t, "gpt-5.5", m.Model)
		}
		assert.False(t, m.Time.IsZero())
	}
	assert.Equal(t, []string{"2", "3", "7", "10", "17", "20", "26", "29"}, natives, "record ordinals")

	// Pairing: only the cut between the call and its output is unsafe.
	assert.Equal(t, []int{1, 2, 3, 4, 5, 7, 8}, model.Checkpoints(msgs))
	assert.Equal(t, []model.Step{{N: 1, Assistant: 3, End: 4}, {N: 2, Assistant: 5, End: 7}, {N: 3, Assistant: 7, End: 8}}, model.Steps(msgs))
}

// TestRealUsageMatchesCodex checks each run's own usage against what Codex
// itself printed. turn.completed.usage is the thread's running total, with
// input_tokens including cached_input_tokens. So:
//   - the main thread's own usage is its last total (2-bash: 4200 in, 2500
//     of them cached, 105 out), stored as 1700 input + 2500 cache read;
//   - each CLI run's turn adds its total minus the one before (1-hello
//     1200/0/25; 2-bash 4200-1200 = 3000 in, 2500 cached, 80 out);
//   - the fork's total (5950/4100/120) includes its parent's 4200/2500/105
//     at the fork point, so its own usage is the difference: 1750 in, 1600
//     of them cached, 15 out, i.e. 150 input + 1600 cache read.
func TestRealUsageMatchesCodex(t *testing.T) {
	runs := genRuns(t)
	t1, t2, t3 := reported(t, runs["1-hello"]), reported(t, runs["2-bash"]), reported(t, runs["3-fork"])
	assert.Equal(t, tokenUsage{input: 4200, cached: 2500, output: 105}, t2, "the numbers this test is about")

	main := parseOne(t, filepath.Join(testdata, runs["2-bash"].Transcript))
	assert.Equal(t, t2.model(), main.Run.Usage)
	assert.Equal(t, model.Usage{InputTokens: 1700, CacheReadTokens: 2500, OutputTokens: 105}, main.Run.Usage)
	assert.Equal(t, int64(4200+105), main.Run.Usage.Total(), "cached tokens counted once")
	assert.Equal(t, main.Run.Usage, model.OwnUsage(main.Messages, 0))

	var starts []int
	for i, m := range main.Messages {
		if m.IsPrompt() {
			starts = append(starts, i)
		}
	}
	require.Len(t, starts, 2)
	assert.Equal(t, t1.model(), turnUsage(main.Messages, starts[0]), "1-hello")
	assert.Equal(t, minus(t2, t1).model(), turnUsage(main.Messages, starts[1]), "2-bash")
	// Per response: usage sits on the assistant message of that response.
	assert.Equal(t, model.Usage{InputTokens: 300, CacheReadTokens: 1100, OutputTokens: 60}, main.Messages[5].Usage)
	assert.Equal(t, model.Usage{InputTokens: 200, CacheReadTokens: 1400, OutputTokens: 20}, main.Messages[7].Usage)

	fork := parseOne(t, filepath.Join(testdata, runs["3-fork"].Transcript))
	assert.Equal(t, minus(t3, t2).model(), fork.Run.Usage)
	assert.Equal(t, model.Usage{InputTokens: 150, CacheReadTokens: 1600, OutputTokens: 15}, fork.Run.Usage)
}

func TestRealFork(t *testing.T) {
	runs := genRuns(t)
	main := parseOne(t, filepath.Join(testdata, runs["2-bash"].Transcript))
	fork := parseOne(t, filepath.Join(testdata, runs["3-fork"].Transcript))

	assert.Equal(t, runs["3-fork"].SessionID, fork.Run.NativeID)
	assert.NotEqual(t, main.Run.NativeID, fork.Run.NativeID)
	assert.Equal(t, "fork: now say bye", fork.Run.Title)
	// The fork file holds only its own records (ordinals 33..): no copies.
	require.NotNil(t, fork.Fork)
	assert.Equal(t, harness.ForkHint{ParentSession: main.Run.NativeID, BeforeOrdinal: 33}, *fork.Fork)
	require.Equal(t, []model.Role{model.User, model.Assistant}, roles(fork.Messages))
	assert.True(t, fork.Messages[0].IsPrompt())
	assert.Equal(t, "fork: now say bye", fork.Messages[0].PlainText())
	assert.Equal(t, "Bye from the fork at the end.", fork.Messages[1].PlainText())
	assert.Equal(t, []int{1, 2}, model.Checkpoints(fork.Messages))

	// The fork was made at the end of the parent: it inherits all of it.
	k := ForkPoint(main.Messages, fork.Fork.BeforeOrdinal)
	assert.Equal(t, len(main.Messages), k)
	full := append(append([]model.Message{}, main.Messages[:k]...), fork.Messages...)
	cps := model.Checkpoints(full)
	assert.Equal(t, len(full), cps[len(cps)-1], "the fork's end is a checkpoint")
	assert.Contains(t, cps, k, "the fork point is a checkpoint")
	assert.Equal(t, fork.Run.Usage, model.OwnUsage(full, k))
}

func TestForkPoint(t *testing.T) {
	runs := genRuns(t)
	main := parseOne(t, filepath.Join(testdata, runs["2-bash"].Transcript))
	// ordinals 2 3 7 10 17 20 26 29
	for before, want := range map[int]int{0: 0, 2: 0, 3: 1, 8: 3, 17: 4, 18: 5, 21: 6, 29: 7, 30: 8, 33: 8, 1000: 8} {
		assert.Equal(t, want, ForkPoint(main.Messages, before), "before ordinal %d", before)
	}
	assert.Equal(t, 0, ForkPoint(nil, 5))
	// Messages without an ordinal count when an inherited one follows.
	msgs := []model.Message{{NativeID: "1"}, {NativeID: ""}, {NativeID: "4"}, {NativeID: ""}, {NativeID: "9"}}
	assert.Equal(t, 3, ForkPoint(msgs, 5))
	assert.Equal(t, 1, ForkPoint(msgs, 2))
}

func TestDetect(t *testing.T) {
	runs := genRuns(t)
	real, err := os.ReadFile(filepath.Join(testdata, runs["3-fork"].Transcript))
	require.NoError(t, err)
	assert.True(t, Detect(real))
	assert.True(t, Detect(real[:200]), "a head cut inside the first line")
	assert.True(t, Detect(real[:74]), "cut right after the type")
	for _, f := range []string{"legacy-no-ordinal.jsonl", "legacy-bare.jsonl", "tools.jsonl"} {
		b, err := os.ReadFile(filepath.Join(testdata, "codex/edge", f))
		require.NoError(t, err)
		assert.True(t, Detect(b), f)
	}
	assert.True(t, Detect([]byte("\ufeff {\"timestamp\" : \"x\", \"type\" : \"session_meta\"")))
	assert.True(t, Detect([]byte(`{"timestamp":"x","type":"response_item","payload":{"type":"mess`)))
	// Read as JSON: no timestamp on line 1, the type after the payload.
	assert.True(t, Detect([]byte(`{"type":"session_meta","payload":{"id":"x"}}`+"\n")))
	assert.True(t, Detect([]byte(`{"payload":{},"type":"session_meta"}`)))
	assert.True(t, Detect([]byte("\n  {\"ordinal\": 0, \"type\": \"session_meta\", \"payload\": {}}\n")))

	not := map[string]string{
		"empty":     "",
		"garbage":   "hello world",
		"claude":    `{"type":"queue-operation","operation":"enqueue","timestamp":"2026-11-29T09:30:00Z","sessionId":"x"}`,
		"claude2":   `{"parentUuid":null,"type":"user","timestamp":"2026-11-29T09:30:00Z","message":{"role":"user"}}`,
		"pi":        `{"type":"session","version":3,"id":"x","timestamp":"2026-11-29T09:30:00Z","cwd":"/"}`,
		"openai":    `{"role":"user","content":"hi"}`,
		"array":     `[{"role":"user","content":"hi"}]`,
		"pi spaced": `{"type": "session", "version": 3, "id": "x"}`,
	}
	for name, s := range not {
		assert.False(t, Detect([]byte(s)), name)
	}
	for _, dir := range []string{"claude/projects/-tmp-tine-gen-project", "pi/sessions/--tmp-tine-gen-project--"} {
		files, _ := filepath.Glob(filepath.Join(testdata, dir, "*.jsonl"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			assert.False(t, Detect(b), f)
		}
	}
}

func TestDirs(t *testing.T) {
	t.Setenv("CODEX_HOME", "/x/codex")
	assert.Equal(t, []string{"/x/codex/sessions"}, Dirs())
	t.Setenv("CODEX_HOME", "")
	t.Setenv("HOME", "/home/someone")
	assert.Equal(t, []string{"/home/someone/.codex/sessions"}, Dirs())
}

func parseEdge(t *testing.T, name string) harness.ParsedFile {
	t.Helper()
	pf, err := ParseFile(filepath.Join(testdata, "codex/edge", name))
	require.NoError(t, err)
	return pf
}

func TestUnknownAndMalformed(t *testing.T) {
	pf := parseEdge(t, "unknown-and-malformed.jsonl")
	var lines []int
	for _, s := range pf.Skipped {
		lines = append(lines, s.Line)
		assert.True(t, strings.HasSuffix(s.File, "unknown-and-malformed.jsonl"))
		assert.NotEmpty(t, s.Reason)
	}
	// 6: cut-off JSON, 7: not JSON, 8: JSON but no object, 12: a payload
	// that is not an object, 14: two values on one line. Line 9 is empty;
	// unknown record, item and event types (3, 5, 11) are ignored silently.
	assert.Equal(t, []int{6, 7, 8, 12, 14}, lines)
	assert.Contains(t, pf.Skipped[0].Reason, "invalid JSON")
	assert.Equal(t, "not a JSON object", pf.Skipped[2].Reason)

	require.Len(t, pf.Runs, 1)
	r := pf.Runs[0]
	assert.Equal(t, "0000aaaa-0000-7000-8000-000000000001", r.Run.NativeID)
	assert.Equal(t, "dev", r.Run.Branch)
	require.Equal(t, []model.Role{model.User, model.Assistant, model.User}, roles(r.Messages))
	assert.Equal(t, "first prompt", r.Messages[0].PlainText())
	assert.Equal(t, "answer", r.Messages[1].PlainText())
	assert.Equal(t, "9", r.Messages[1].NativeID)
	assert.Equal(t, model.Usage{InputTokens: 60, CacheReadTokens: 40, OutputTokens: 7}, r.Messages[1].Usage)
	assert.Equal(t, "third \"quoted\" é😀", r.Messages[2].PlainText(), "escapes and surrogate pairs")
}

// TestLineOverTheCapIsSkipped: a line over 64 MiB is listed as skipped,
// naming its size, without being read whole, and the records after it
// still import; Offset goes past it.
func TestLineOverTheCapIsSkipped(t *testing.T) {
	t.Parallel()
	before := `{"timestamp":"2026-01-03T00:00:00.000Z","ordinal":0,"type":"session_meta","payload":{"id":"0000bbbb-0000-7000-8000-000000000002","timestamp":"2026-01-03T00:00:00.000Z","cwd":"/work/p"}}` + "\n" +
		`{"timestamp":"2026-01-03T00:00:01.000Z","ordinal":1,"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hello"}]}}` + "\n"
	after := "\n" + `{"timestamp":"2026-01-03T00:00:02.000Z","ordinal":3,"type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"hi"}]}}` + "\n"
	const huge = 65 << 20
	pf, err := Parse(jsonltest.Around(before, huge, after), "huge.jsonl")
	require.NoError(t, err)
	require.Len(t, pf.Skipped, 1)
	assert.Equal(t, harness.Skip{File: "huge.jsonl", Line: 3, Reason: "line is 65.0 MiB, over the 64 MiB cap: skipped"}, pf.Skipped[0])
	assert.Equal(t, int64(len(before)+huge+len(after)), pf.Offset)
	require.Len(t, pf.Runs, 1)
	assert.Equal(t, []model.Role{model.User, model.Assistant}, roles(pf.Runs[0].Messages))
	assert.Equal(t, "hi", pf.Runs[0].Messages[1].PlainText())
}

func TestPartialLastLine(t *testing.T) {
	path := filepath.Join(testdata, "codex/edge/partial-last-line.jsonl")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NotEqual(t, byte('\n'), data[len(data)-1], "the file must end without a newline")
	pf, err := Parse(bytes.NewReader(data), path)
	require.NoError(t, err)
	assert.Empty(t, pf.Skipped, "a partial line is not a malformed one")
	assert.Equal(t, int64(bytes.LastIndexByte(data, '\n')+1), pf.Offset)
	require.Len(t, pf.Runs, 1)
	assert.Equal(t, []model.Role{model.User, model.Assistant}, roles(pf.Runs[0].Messages))

	// Reading again once Codex finished the line picks it up.
	done := append(append([]byte{}, data...), []byte(`ing"}]}}`+"\n")...)
	pf2, err := Parse(bytes.NewReader(done), path)
	require.NoError(t, err)
	assert.Equal(t, int64(len(done)), pf2.Offset)
	require.Len(t, pf2.Runs[0].Messages, 3)
	assert.Equal(t, "still typing", pf2.Runs[0].Messages[2].PlainText())

	// Nothing complete yet: no run, nothing consumed.
	for _, s := range []string{"", `{"timestamp":"2026-01-03T00:00:00.000Z","ordinal":0,"type":"sess`} {
		pf, err := Parse(strings.NewReader(s), "x.jsonl")
		require.NoError(t, err)
		assert.Empty(t, pf.Runs)
		assert.Zero(t, pf.Offset)
	}
}

func TestHugeLine(t *testing.T) {
	// A 10 MB tool output (with escapes and multi-byte text) and a 10 MB
	// event_msg duplicate, between ordinary lines.
	out := strings.Repeat("0123456789abcdef\"line\"\n✓ ", 400_000) // ~11 MB decoded
	enc, err := json.Marshal(out)
	require.NoError(t, err)
	var b bytes.Buffer
	b.WriteString(`{"timestamp":"2026-01-05T00:00:00.000Z","ordinal":0,"type":"session_meta","payload":{"id":"0000eeee-0000-7000-8000-000000000005"}}` + "\n")
	b.WriteString(`{"timestamp":"2026-01-05T00:00:01.000Z","ordinal":1,"type":"response_item","payload":{"type":"function_call","name":"exec_command","arguments":"{}","call_id":"c1"}}` + "\n")
	b.WriteString(`{"timestamp":"2026-01-05T00:00:02.000Z","ordinal":2,"type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":`)
	b.Write(enc)
	b.WriteString("}}\n")
	b.WriteString(`{"timestamp":"2026-01-05T00:00:02.000Z","ordinal":3,"type":"event_msg","payload":{"type":"item_completed","item":{"aggregated_output":`)
	b.Write(enc)
	b.WriteString("}}}\n")
	b.WriteString(`{"timestamp":"2026-01-05T00:00:03.000Z","ordinal":4,"type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"done"}]}}` + "\n")
	require.Greater(t, b.Len(), 20<<20)

	pf, err := Parse(bytes.NewReader(b.Bytes()), "huge.jsonl")
	require.NoError(t, err)
	assert.Empty(t, pf.Skipped)
	assert.Equal(t, int64(b.Len()), pf.Offset)
	msgs := pf.Runs[0].Messages
	require.Equal(t, []model.Role{model.Assistant, model.Tool, model.Assistant}, roles(msgs))
	assert.Equal(t, out, msgs[1].Parts[0].Text)
	assert.Equal(t, "done", msgs[2].PlainText())
}

func TestInvalidUTF8(t *testing.T) {
	pf := parseEdge(t, "invalid-utf8.jsonl")
	assert.Empty(t, pf.Skipped, "invalid UTF-8 inside strings is still JSON")
	r := pf.Runs[0]
	require.Equal(t, []model.Role{model.User, model.Assistant, model.Tool}, roles(r.Messages))
	for _, m := range r.Messages {
		for _, p := range m.Parts {
			for _, s := range []string{p.Text, p.ToolCallID, p.ToolName, p.ToolInput} {
				assert.True(t, utf8.ValidString(s), "%q", s)
			}
		}
	}
	assert.True(t, utf8.ValidString(r.Run.Cwd))
	// Like encoding/json: each bad byte and a lone surrogate become U+FFFD.
	assert.Equal(t, "bad \uFFFD\uFFFD bytes, cut caf\uFFFD, lone \uFFFD surrogate, fine héllo ✓", r.Messages[0].PlainText())
	call, res := r.Messages[1].Parts[0], r.Messages[2].Parts[0]
	assert.Equal(t, call.ToolCallID, res.ToolCallID, "the pair still matches")
	assert.Equal(t, []int{1, 3}, model.Checkpoints(r.Messages))
	assert.Equal(t, "out \uFFFD\uFFFD\uFFFD put", res.Text)
}

func TestLegacyNoOrdinals(t *testing.T) {
	pf := parseEdge(t, "legacy-no-ordinal.jsonl")
	assert.Empty(t, pf.Skipped)
	r := pf.Runs[0]
	assert.Equal(t, "01992f3a-0000-7000-8000-00000000000a", r.Run.NativeID)
	assert.Equal(t, "feature", r.Run.Branch)
	assert.Equal(t, "/home/u/proj", r.Run.Cwd)
	assert.Equal(t, "gpt-5-codex", r.Run.Model)
	assert.Equal(t, "list the files", r.Run.Title)
	require.Equal(t, []model.Role{model.System, model.System, model.User, model.Assistant, model.Tool, model.Assistant}, roles(r.Messages))
	assert.Contains(t, r.Messages[0].PlainText(), "<user_instructions>")

	// Without ordinals, NativeID is the 0-based line, which is what an
	// ordinal counts.
	var natives []string
	for _, m := range r.Messages {
		natives = append(natives, m.NativeID)
	}
	assert.Equal(t, []string{"1", "2", "3", "7", "10", "14"}, natives)

	a := r.Messages[3]
	require.Len(t, a.Parts, 2, "encrypted reasoning without a summary adds nothing")
	assert.Equal(t, model.Thinking, a.Parts[0].Kind)
	assert.Equal(t, "shell", a.Parts[1].ToolName)
	assert.JSONEq(t, `{"command":["bash","-lc","ls"],"workdir":"/home/u/proj"}`, a.Parts[1].ToolInput)
	// Old order: the token_count came after the tool output, and twice.
	assert.Equal(t, model.Usage{InputTokens: 4000, CacheReadTokens: 1000, OutputTokens: 50}, a.Usage)
	assert.Equal(t, model.Usage{InputTokens: 200, CacheReadTokens: 4900, OutputTokens: 20}, r.Messages[5].Usage)
	// The last total (10100 in, 5900 cached, 70 out) is the run's own.
	assert.Equal(t, model.Usage{InputTokens: 4200, CacheReadTokens: 5900, OutputTokens: 70}, r.Run.Usage)
	assert.Equal(t, []int{1, 2, 3, 5, 6}, model.Checkpoints(r.Messages))
}

func TestLegacyBare(t *testing.T) {
	pf := parseEdge(t, "legacy-bare.jsonl")
	assert.Empty(t, pf.Skipped)
	r := pf.Runs[0]
	assert.Equal(t, "5973b6c0-94b8-487b-a530-2aeb6098ae0e", r.Run.NativeID)
	assert.Equal(t, "main", r.Run.Branch)
	assert.Equal(t, 2025, r.Run.CreatedAt.Year())
	require.Equal(t, []model.Role{model.System, model.User, model.Assistant, model.Tool, model.Assistant}, roles(r.Messages))
	a := r.Messages[2]
	require.Len(t, a.Parts, 3)
	assert.Equal(t, "Simple arithmetic.", a.Parts[0].Text)
	assert.Equal(t, model.Part{Kind: model.ToolCall, ToolCallID: "call_L", ToolName: "local_shell",
		ToolInput: `{"type":"exec","command":["echo","4"],"timeout_ms":1000}`}, a.Parts[2])
	assert.Equal(t, "4\n", r.Messages[3].Parts[0].Text)
	assert.Equal(t, []int{1, 2, 4, 5}, model.Checkpoints(r.Messages))
}

func TestLegacyCopiedFork(t *testing.T) {
	// Forks before paginated history copied the parent's records into the
	// new file; without ordinals the copy's end is not recorded, so the
	// hint names the parent and leaves the prefix to the importer.
	pf := parseEdge(t, "legacy-copied-fork.jsonl")
	r := pf.Runs[0]
	assert.Equal(t, "019ad9c0-0000-7000-8000-0000000000c2", r.Run.NativeID)
	assert.Equal(t, "2025-12-01T10:00:05Z", r.Run.CreatedAt.Format("2006-01-02T15:04:05Z07:00"), "the fork's own session_meta")
	require.NotNil(t, r.Fork)
	assert.Equal(t, harness.ForkHint{ParentSession: "019ad9a0-0000-7000-8000-0000000000c1"}, *r.Fork)
	assert.Len(t, r.Messages, 4)

	// Without forked_from_id, the copied session_meta alone names the parent.
	b, err := os.ReadFile(filepath.Join(testdata, "codex/edge/legacy-copied-fork.jsonl"))
	require.NoError(t, err)
	b = bytes.Replace(b, []byte(`"forked_from_id":"019ad9a0-0000-7000-8000-0000000000c1",`), nil, 1)
	pf, err = Parse(bytes.NewReader(b), "x.jsonl")
	require.NoError(t, err)
	require.NotNil(t, pf.Runs[0].Fork)
	assert.Equal(t, "019ad9a0-0000-7000-8000-0000000000c1", pf.Runs[0].Fork.ParentSession)
}

// TestProvenanceDecidesWhoWrote: a user-role message whose content items
// name a provenance is the person's when one of them is "user", Codex's
// otherwise, whatever its text opens with.
func TestProvenanceDecidesWhoWrote(t *testing.T) {
	t.Parallel()
	msg := func(ord int, text, prov string) string {
		return fmt.Sprintf(`{"timestamp":"2026-02-01T00:00:0%d.000Z","ordinal":%d,"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":%q}],"internal_chat_message_metadata_passthrough":{"content_item_metadata":[%s]}}}`+"\n", ord, ord, text, prov)
	}
	in := `{"timestamp":"2026-02-01T00:00:00.000Z","ordinal":0,"type":"session_meta","payload":{"id":"0000cccc-0000-7000-8000-000000000003","cwd":"/w"}}` + "\n" +
		msg(1, "plain words from the harness", `{"provenance":{"type":"harness"}}`) +
		msg(2, "<environment_context> typed by a person", `{"provenance":{"type":"harness"}},{"provenance":{"type":"user"}}`) +
		msg(3, "no provenance named", `{"other":1}`)
	pf, err := Parse(strings.NewReader(in), "prov.jsonl")
	require.NoError(t, err)
	require.Len(t, pf.Runs, 1)
	assert.Equal(t, []model.Role{model.System, model.User, model.User}, roles(pf.Runs[0].Messages))
}

func TestToolsAndInjected(t *testing.T) {
	pf := parseEdge(t, "tools.jsonl")
	assert.Empty(t, pf.Skipped)
	r := pf.Runs[0]
	msgs := r.Messages
	require.Equal(t, []model.Role{
		model.System,    // developer permissions
		model.System,    // AGENTS.md, provenance harness
		model.User,      // typed (provenance user), though it opens with a tag
		model.Assistant, // thinking, two parallel calls, web search
		model.Tool, model.Tool,
		model.Assistant, // apply_patch
		model.Tool,
		model.System,    // compacted summary
		model.Assistant, // Done.
		model.System,    // <turn_aborted>
	}, roles(msgs))
	assert.Equal(t, "<environment_context> is a tag I typed, look at this", r.Run.Title)
	assert.Equal(t, model.Image, msgs[2].Parts[1].Kind)
	assert.JSONEq(t, `{"type":"input_image","image_url":"data:image/png;base64,iVBORw0KGgo="}`, msgs[2].Parts[1].Raw)

	a := msgs[3]
	require.Len(t, a.Parts, 4)
	assert.Equal(t, "Two reads at once.\n\nThen a patch.", a.Parts[0].Text)
	assert.Equal(t, "mcp__fs.read", a.Parts[2].ToolName)
	assert.Equal(t, model.Other, a.Parts[3].Kind, "a web search has no output to wait for")
	assert.Contains(t, a.Parts[3].Text, "go 1.26 release notes")
	// input 1000 = 600 cached + 100 cache writes + 300 uncached.
	assert.Equal(t, model.Usage{InputTokens: 300, CacheReadTokens: 600, CacheWriteTokens: 100, OutputTokens: 30}, a.Usage)

	assert.Equal(t, model.Part{Kind: model.ToolResult, ToolCallID: "call_2", ToolName: "mcp__fs.read", Text: "b contents"}, msgs[4].Parts[0])
	assert.Equal(t, model.Image, msgs[4].Parts[1].Kind)
	assert.True(t, msgs[5].Parts[0].IsError, "success: false")
	assert.Equal(t, "call_1", msgs[5].Parts[0].ToolCallID)

	patch := msgs[6].Parts[0]
	assert.Equal(t, "apply_patch", patch.ToolName)
	var in string
	require.NoError(t, json.Unmarshal([]byte(patch.ToolInput), &in), "freeform input kept as a JSON string")
	assert.True(t, strings.HasPrefix(in, "*** Begin Patch\n"))
	assert.Equal(t, "apply_patch", msgs[7].Parts[0].ToolName)
	assert.Equal(t, "Summary: read two files, created a.txt.", msgs[8].PlainText())

	assert.Equal(t, []int{1, 2, 3, 6, 8, 9, 10, 11}, model.Checkpoints(msgs))
	assert.Len(t, model.Steps(msgs), 3)
	// Thread total 2500 in (1600 cached, 100 written), 75 out.
	assert.Equal(t, model.Usage{InputTokens: 800, CacheReadTokens: 1600, CacheWriteTokens: 100, OutputTokens: 75}, r.Run.Usage)
}

func TestUsageEdgeCases(t *testing.T) {
	meta := `{"timestamp":"2026-01-06T00:00:00.000Z","type":"session_meta","payload":{"id":"u"}}` + "\n"
	user := `{"timestamp":"2026-01-06T00:00:01.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]}}` + "\n"
	asst := `{"timestamp":"2026-01-06T00:00:02.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]}}` + "\n"
	flat := `{"timestamp":"2026-01-06T00:00:03.000Z","type":"event_msg","payload":{"type":"token_count","input_tokens":50,"cached_input_tokens":10,"output_tokens":5,"total_tokens":55}}` + "\n"
	record := `{"timestamp":"2026-01-06T00:00:03.000Z","type":"token_usage_record","payload":{"usage":{"input_tokens":50,"cached_input_tokens":10,"output_tokens":5,"total_tokens":55}}}` + "\n"
	call := `{"timestamp":"2026-01-06T00:00:04.000Z","type":"response_item","payload":{"type":"function_call","name":"f","arguments":"not json","call_id":"c"}}` + "\n"

	parse := func(s string) harness.ParsedRun {
		pf, err := Parse(strings.NewReader(s), "rollout-2026-01-06T00-00-00-0000ffff-0000-7000-8000-000000000006.jsonl")
		require.NoError(t, err)
		require.Len(t, pf.Runs, 1)
		return pf.Runs[0]
	}

	// The oldest token_count: the payload is the last response's usage.
	r := parse(meta + user + asst + flat)
	assert.Equal(t, model.Usage{InputTokens: 40, CacheReadTokens: 10, OutputTokens: 5}, r.Messages[1].Usage)

	// A token_count with no assistant message before it (a failed
	// response, a compaction) is not dropped: it goes to the next one.
	r = parse(meta + user + flat + asst)
	assert.Equal(t, model.Usage{InputTokens: 40, CacheReadTokens: 10, OutputTokens: 5}, r.Messages[1].Usage)

	// A token_usage_record before any assistant message goes to the next one.
	r = parse(meta + user + record + asst)
	assert.Equal(t, model.Usage{InputTokens: 40, CacheReadTokens: 10, OutputTokens: 5}, r.Messages[1].Usage)

	// Usage with no assistant message at all stays on the run.
	r = parse(meta + user + record)
	assert.Equal(t, model.Usage{InputTokens: 40, CacheReadTokens: 10, OutputTokens: 5}, r.Run.Usage)

	// A growing 0.169 file read in two parts, the cut after a response's
	// token_usage_record and before its token_count repeat: the tail (the
	// header line, then the rest, read by ParseTail) adds only what the
	// thread's total grew by after the cut.
	runs := genRuns(t)
	data, err := os.ReadFile(filepath.Join(testdata, runs["2-bash"].Transcript))
	require.NoError(t, err)
	lines := bytes.SplitAfter(data, []byte("\n"))
	var head, tail []byte
	for i, l := range lines {
		if i <= 24 { // through ordinal 24, resp_tine0002's record
			head = append(head, l...)
		} else {
			tail = append(tail, l...)
		}
	}
	whole := parse(string(data))
	first := parse(string(head))
	pf, err := ParseTail(strings.NewReader(string(lines[0])+string(tail)), "tail.jsonl", bytes.NewReader(data), int64(len(head)))
	require.NoError(t, err)
	require.Len(t, pf.Runs, 1)
	assert.Equal(t, whole.Run.Usage, first.Run.Usage.Add(pf.Runs[0].Run.Usage))
	assert.Equal(t, model.Completed, pf.Runs[0].Run.Status)

	// Arguments that are not JSON are kept as a JSON string; a call never
	// answered leaves no checkpoint after it.
	r = parse(meta + user + call)
	assert.Equal(t, `"not json"`, r.Messages[1].Parts[0].ToolInput)
	assert.Equal(t, []int{1}, model.Checkpoints(r.Messages))

	// No session_meta: the id comes from the file name.
	r = parse(user + asst)
	assert.Equal(t, "0000ffff-0000-7000-8000-000000000006", r.Run.NativeID)
	assert.Equal(t, "go", r.Run.Title)
}

type failingReader struct{ data []byte }

func (f *failingReader) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, errors.New("disk on fire")
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

func TestReadError(t *testing.T) {
	_, err := Parse(&failingReader{data: []byte(`{"a":1}` + "\n")}, "x.jsonl")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "disk on fire")
	_, err = ParseFile(filepath.Join(t.TempDir(), "missing.jsonl"))
	assert.Error(t, err)
}

func TestAbortedTurnClosesItsCall(t *testing.T) {
	// A turn aborted while its call ran (turn_aborted, then Codex's
	// <turn_aborted> note): the call has no output. The next prompt closes it
	// (rule 1): the cuts after it are checkpoints again.
	pf := parseEdge(t, "aborted.jsonl")
	assert.Empty(t, pf.Skipped)
	msgs := pf.Runs[0].Messages
	assert.Equal(t, []model.Role{model.User, model.Assistant, model.System, model.User, model.Assistant}, roles(msgs))
	assert.Equal(t, []int{1, 4, 5}, model.Checkpoints(msgs))
}

// usageLine is a token_usage_record of a response with usage last and the
// thread's total after it.
func usageLine(ord int, last, total [3]int) string {
	u := func(v [3]int) string {
		return fmt.Sprintf(`{"input_tokens":%d,"cached_input_tokens":%d,"cache_write_input_tokens":0,"output_tokens":%d,"reasoning_output_tokens":0,"total_tokens":%d}`, v[0], v[1], v[2], v[0]+v[2])
	}
	return fmt.Sprintf(`{"timestamp":"2026-01-07T00:00:%02d.000Z","ordinal":%d,"type":"token_usage_record","payload":{"usage":%s,"thread_token_usage":%s}}`, ord, ord, u(last), u(total)) + "\n"
}

func TestUsageIsTheLastTotal(t *testing.T) {
	item := func(ord int, payload string) string {
		return fmt.Sprintf(`{"timestamp":"2026-01-07T00:00:%02d.000Z","ordinal":%d,"type":"%s","payload":%s}`, ord, ord, "response_item", payload) + "\n"
	}
	event := func(ord int, payload string) string {
		return fmt.Sprintf(`{"timestamp":"2026-01-07T00:00:%02d.000Z","ordinal":%d,"type":"event_msg","payload":%s}`, ord, ord, payload) + "\n"
	}
	meta := `{"timestamp":"2026-01-07T00:00:00.000Z","ordinal":0,"type":"session_meta","payload":{"id":"0000aaaa-0000-7000-8000-000000000007"}}` + "\n"
	src := meta +
		event(1, `{"type":"task_started","turn_id":"t1"}`) +
		item(2, `{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]}`) +
		item(3, `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"one"}]}`) +
		usageLine(4, [3]int{100, 0, 10}, [3]int{100, 0, 10}) +
		// A response (a compaction, say) whose own report is missing: the
		// total still grows by it.
		item(5, `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"two"}]}`) +
		usageLine(6, [3]int{300, 200, 5}, [3]int{450, 250, 20}) +
		event(7, `{"type":"task_complete","turn_id":"t1"}`)
	pf, err := Parse(strings.NewReader(src), "r.jsonl")
	require.NoError(t, err)
	r := pf.Runs[0]
	// The run's usage is the last total (450 in, 250 of them cached, 20
	// out), not the sum of the responses' own reports (400, 200, 15).
	assert.Equal(t, model.Usage{InputTokens: 200, CacheReadTokens: 250, OutputTokens: 20}, r.Run.Usage)
	assert.Equal(t, r.Run.Usage, model.OwnUsage(r.Messages, 0), "the messages add up to the run")
	assert.Equal(t, model.Completed, r.Run.Status)

	// Ended mid-turn (Codex stopped, or still running): interrupted.
	pf, err = Parse(strings.NewReader(src+event(8, `{"type":"task_started","turn_id":"t2"}`)+
		item(9, `{"type":"message","role":"user","content":[{"type":"input_text","text":"more"}]}`)), "r.jsonl")
	require.NoError(t, err)
	assert.Equal(t, model.Failed, pf.Runs[0].Run.Status)
	assert.Equal(t, "interrupted: the session ended mid-turn", pf.Runs[0].Run.Error)
	// Ended by an aborted turn: interrupted too, saying so.
	pf, err = Parse(strings.NewReader(src+event(8, `{"type":"task_started","turn_id":"t2"}`)+
		event(9, `{"type":"turn_aborted","turn_id":"t2","reason":"interrupted"}`)), "r.jsonl")
	require.NoError(t, err)
	assert.Equal(t, model.Failed, pf.Runs[0].Run.Status)
	assert.Equal(t, "interrupted: the last turn was aborted (interrupted)", pf.Runs[0].Run.Error)

	// Read in two parts, cut mid-turn: the first part is interrupted, the
	// tail completes the turn and adds what the total grew by.
	cut := strings.Index(src, `"ordinal":5,`)
	cut = strings.LastIndexByte(src[:cut], '\n') + 1
	first, err := Parse(strings.NewReader(src[:cut]), "r.jsonl")
	require.NoError(t, err)
	assert.Equal(t, model.Failed, first.Runs[0].Run.Status)
	tail, err := ParseTail(strings.NewReader(meta+src[cut:]), "r.jsonl", strings.NewReader(src), int64(cut))
	require.NoError(t, err)
	assert.Equal(t, model.Completed, tail.Runs[0].Run.Status)
	assert.Equal(t, r.Run.Usage, first.Runs[0].Run.Usage.Add(tail.Runs[0].Run.Usage))
	assert.Empty(t, tail.Skipped)
}

func TestUsageOutOfRange(t *testing.T) {
	// A count outside 0..2^53 is corrupt: the report is dropped with the
	// line and why; nothing overflows.
	meta := `{"timestamp":"2026-01-07T00:00:00.000Z","type":"session_meta","payload":{"id":"u"}}` + "\n"
	user := `{"timestamp":"2026-01-07T00:00:01.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]}}` + "\n"
	asst := `{"timestamp":"2026-01-07T00:00:02.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]}}` + "\n"
	huge := `{"timestamp":"2026-01-07T00:00:03.000Z","type":"token_usage_record","payload":{"usage":{"input_tokens":1e30,"output_tokens":5}}}` + "\n"
	neg := `{"timestamp":"2026-01-07T00:00:03.000Z","type":"event_msg","payload":{"type":"token_count","info":{"last_token_usage":{"input_tokens":-50,"output_tokens":5},"total_token_usage":{"input_tokens":-50,"output_tokens":5}}}}` + "\n"
	for _, tc := range []struct{ line, want string }{{huge, "input_tokens: 1e30 is not a token count"}, {neg, "input_tokens: -50 is not a token count"}} {
		pf, err := Parse(strings.NewReader(meta+user+asst+tc.line), "u.jsonl")
		require.NoError(t, err)
		require.Len(t, pf.Skipped, 1)
		assert.Equal(t, 4, pf.Skipped[0].Line)
		assert.Contains(t, pf.Skipped[0].Reason, tc.want)
		assert.Zero(t, pf.Runs[0].Run.Usage)
		assert.Len(t, pf.Runs[0].Messages, 2)
	}
}

func TestDuplicatedLines(t *testing.T) {
	// A line written twice is read once (known by its ordinal); another
	// record under an ordinal already read is left out and listed.
	pf := parseEdge(t, "duplicates.jsonl")
	require.Len(t, pf.Skipped, 1)
	assert.Equal(t, 11, pf.Skipped[0].Line)
	assert.Equal(t, "ordinal 5 was already used on line 8: left out", pf.Skipped[0].Reason)
	r := pf.Runs[0]
	assert.Equal(t, []model.Role{model.User, model.Assistant, model.Tool, model.Assistant}, roles(r.Messages))
	assert.Equal(t, model.Usage{InputTokens: 100, OutputTokens: 10}, r.Run.Usage)
	assert.Equal(t, model.Completed, r.Run.Status)

	// Without ordinals (older files), the same line twice is read once.
	var b strings.Builder
	for _, l := range strings.SplitAfter(string(readEdge(t, "duplicates.jsonl")), "\n") {
		b.WriteString(strings.Replace(l, `"ordinal":`, `"ordinal_":`, 1))
	}
	pf, err := Parse(strings.NewReader(b.String()), "old.jsonl")
	require.NoError(t, err)
	assert.Empty(t, pf.Skipped)
	assert.Equal(t, []model.Role{model.User, model.Assistant, model.Tool, model.Assistant, model.Assistant}, roles(pf.Runs[0].Messages))
	assert.Equal(t, model.Usage{InputTokens: 100, OutputTokens: 10}, pf.Runs[0].Run.Usage)
}

func readEdge(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testdata, "codex/edge", name))
	require.NoError(t, err)
	return b
}
