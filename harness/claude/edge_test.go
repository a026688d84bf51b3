package claude

import (
	"bytes"
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

// The hand-written files under testdata/claude/edge follow the record shapes
// of the real files (and of older versions where noted in each test).

func edge(t *testing.T, name string) harness.ParsedFile {
	t.Helper()
	pf := parseFile(t, filepath.Join(testdata, "claude/edge", name))
	checkFile(t, pf, name)
	return pf
}

func texts(msgs []model.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.PlainText())
	}
	return out
}

func TestEdgeBranches(t *testing.T) {
	pf := edge(t, "branch.jsonl")
	assert.Empty(t, pf.Skipped)
	require.Len(t, pf.Runs, 3)
	// The newest leaf (the edited second prompt) is the main line; the
	// attachments on the way are walked through.
	assert.Equal(t, []string{"first prompt", "first answer", "second prompt, edited", "edited answer"}, texts(pf.Runs[0].Messages))
	assert.Equal(t, -1, pf.Runs[0].Parent)
	// The original second prompt leaves after the first answer.
	assert.Equal(t, []string{"second prompt", "second answer"}, texts(pf.Runs[1].Messages))
	assert.Equal(t, 0, pf.Runs[1].Parent)
	assert.Equal(t, 2, pf.Runs[1].ForkAt)
	assert.Equal(t, "second prompt", pf.Runs[1].Run.Title)
	// A rewind to the very start (a second null parentUuid) shares nothing.
	assert.Equal(t, []string{"a different first prompt", "different first answer"}, texts(pf.Runs[2].Messages))
	assert.Equal(t, 0, pf.Runs[2].Parent)
	assert.Equal(t, 0, pf.Runs[2].ForkAt)
	// Each run owns its usage; nothing is counted twice.
	for _, r := range pf.Runs {
		assert.Equal(t, model.Usage{InputTokens: 10 * int64(countRole(r.Messages, model.Assistant)), OutputTokens: 5 * int64(countRole(r.Messages, model.Assistant))}, r.Run.Usage)
	}
	assert.Equal(t, "first prompt", pf.Runs[0].Run.Title)
}

func countRole(msgs []model.Message, role model.Role) int {
	n := 0
	for _, m := range msgs {
		if m.Role == role {
			n++
		}
	}
	return n
}

func TestEdgeParallel(t *testing.T) {
	pf := edge(t, "parallel.jsonl")
	require.Len(t, pf.Runs, 1, "parallel tool results are one step, not branches")
	msgs := pf.Runs[0].Messages
	roles := []model.Role{model.User, model.Assistant, model.Tool, model.Tool, model.Tool, model.Assistant,
		model.User, model.Assistant, model.Tool, model.Tool, model.Assistant}
	require.Len(t, msgs, len(roles))
	for i, m := range msgs {
		assert.Equal(t, roles[i], m.Role, "message %d", i)
	}
	// Four block records, one message; usage grew over the records
	// (older versions): the largest counts, once.
	assert.Len(t, msgs[1].Parts, 4)
	assert.Equal(t, "pa", msgs[1].NativeID, "a merged message keeps its first record's uuid")
	assert.Equal(t, model.Usage{InputTokens: 10, OutputTokens: 30, CacheReadTokens: 100, CacheWriteTokens: 20}, msgs[1].Usage)
	assert.Equal(t, int64(30+7+5+5), pf.Runs[0].Run.Usage.OutputTokens)
	// Results in the order they were written; the one that carried the
	// conversation on comes last.
	assert.Equal(t, []string{"r3", "r1", "r2"}, []string{msgs[2].NativeID, msgs[3].NativeID, msgs[4].NativeID})
	assert.Equal(t, []int{1, 5, 6, 7, 10, 11}, model.Checkpoints(msgs))
}

func TestEdgeUnknownRecords(t *testing.T) {
	pf := edge(t, "unknown.jsonl")
	assert.Empty(t, pf.Skipped, "unknown types are ignored, not skipped")
	require.Len(t, pf.Runs, 1)
	r := pf.Runs[0]
	// progress, api_error and an unknown type with a uuid sit in the chain
	// between the prompt and the answer.
	assert.Equal(t, []string{"hello", "hi there"}, texts(r.Messages))
	assert.Equal(t, "My own title", r.Run.Title, "custom-title wins over ai-title and summary")
	assert.InDelta(t, 0.75, r.Run.CostUSD, 1e-9, "the last cost-state")

	// Without the custom title: ai-title, then a summary of a leaf here.
	b, err := os.ReadFile(filepath.Join(testdata, "claude/edge/unknown.jsonl"))
	require.NoError(t, err)
	noCustom := dropLines(b, `"custom-title"`)
	pf2, err := Parse(bytes.NewReader(noCustom), "unknown.jsonl")
	require.NoError(t, err)
	assert.Equal(t, "An AI title", pf2.Runs[0].Run.Title)
	pf3, err := Parse(bytes.NewReader(dropLines(noCustom, `"ai-title"`)), "unknown.jsonl")
	require.NoError(t, err)
	assert.Equal(t, "Greeting exchange", pf3.Runs[0].Run.Title, "the summary whose leaf is in this file")
	pf4, err := Parse(bytes.NewReader(dropLines(dropLines(noCustom, `"ai-title"`), `"leafUuid":"k5"`)), "unknown.jsonl")
	require.NoError(t, err)
	assert.Equal(t, "hello", pf4.Runs[0].Run.Title, "else the first prompt")
}

func dropLines(b []byte, containing string) []byte {
	var out []byte
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		if !bytes.Contains(line, []byte(containing)) {
			out = append(out, line...)
		}
	}
	return out
}

func TestEdgeMalformed(t *testing.T) {
	pf := edge(t, "malformed.jsonl")
	var lines []int
	for _, s := range pf.Skipped {
		assert.True(t, strings.HasSuffix(s.File, "malformed.jsonl"))
		assert.NotEmpty(t, s.Reason)
		lines = append(lines, s.Line)
	}
	assert.Equal(t, []int{2, 4, 5, 6, 7, 8, 9}, lines)
	require.Len(t, pf.Runs, 1)
	// The good records still form one conversation: a record whose parent
	// was on a broken line hangs under the record written before it, and
	// is listed, saying so (never silently re-attached).
	assert.Equal(t, []string{"start", "answer one", "after the broken line", "answer two"}, texts(pf.Runs[0].Messages))
	assert.Equal(t, "record m4: its parent m3 is not in the file; placed after the record on line 3", pf.Skipped[2].Reason)
}

func TestEdgeImages(t *testing.T) {
	pf := edge(t, "image.jsonl")
	msgs := pf.Runs[0].Messages
	require.Len(t, msgs, 4)
	prompt := msgs[0]
	assert.True(t, prompt.IsPrompt())
	require.Len(t, prompt.Parts, 2)
	assert.Equal(t, model.Image, prompt.Parts[1].Kind)
	assert.JSONEq(t, `{"type":"image","source":"base64","media_type":"image/jpeg","bytes":3019}`, prompt.Parts[1].Raw)
	// thinking and redacted thinking
	assert.Equal(t, []model.PartKind{model.Thinking, model.Thinking, model.Text}, kinds(msgs[1]))
	assert.Equal(t, "(redacted)", msgs[1].Parts[1].Text)
	// A tool result with text blocks, an image and an unknown block, plus
	// typed text: a user message (not a bare tool carrier).
	mixed := msgs[2]
	assert.Equal(t, model.User, mixed.Role)
	assert.False(t, mixed.IsPrompt())
	assert.Equal(t, []model.PartKind{model.ToolResult, model.Image, model.Other, model.Text}, kinds(mixed))
	assert.Equal(t, "a\nb", mixed.Parts[0].Text)
	// A big unknown block keeps its type and size only.
	assert.JSONEq(t, `{"type":"document","bytes":100087}`, msgs[3].Parts[0].Raw)
	for _, m := range msgs {
		for _, p := range m.Parts {
			assert.NotContains(t, p.Raw, "AAAA", "no base64 kept")
		}
	}
}

func kinds(m model.Message) []model.PartKind {
	var out []model.PartKind
	for _, p := range m.Parts {
		out = append(out, p.Kind)
	}
	return out
}

func TestEdgeSidechainInline(t *testing.T) {
	// Claude Code 1.x wrote a Task subagent's records into the session's
	// own file, marked isSidechain.
	pf := edge(t, "sidechain-inline.jsonl")
	require.Len(t, pf.Runs, 2)
	assert.Equal(t, []string{"use a subagent", `Task {"description":"look","prompt":"look around"}`, "I looked.", "The subagent looked."}, texts(pf.Runs[0].Messages))
	assert.Nil(t, pf.Runs[0].Subagent)
	sr := pf.Runs[1]
	assert.Equal(t, -1, sr.Parent, "a subagent is its own run, not a branch")
	require.NotNil(t, sr.Subagent)
	assert.Equal(t, pf.Runs[0].Run.NativeID, sr.Subagent.ParentSession)
	assert.Equal(t, []string{"look around", "I looked."}, texts(sr.Messages))
	assert.Equal(t, model.Usage{InputTokens: 7, OutputTokens: 3}, sr.Run.Usage)
	assert.Equal(t, model.Usage{InputTokens: 20, OutputTokens: 10}, pf.Runs[0].Run.Usage)
}

func TestEdgeOldLayoutSubagent(t *testing.T) {
	// Older versions kept agent-<id>.jsonl next to the session files, with
	// no meta.json: the call is found in the parent's file.
	pf := edge(t, "oldlayout/agent-deadbeef.jsonl")
	require.Len(t, pf.Runs, 1)
	require.NotNil(t, pf.Runs[0].Subagent)
	assert.Equal(t, "c0000000-0000-4000-8000-000000000003", pf.Runs[0].Subagent.ParentSession)
	assert.Equal(t, "toolu_old", pf.Runs[0].Subagent.ToolCallID)
	assert.Equal(t, "agent-deadbeef", pf.Runs[0].Run.NativeID)
}

func TestEdgeCycleAndDuplicates(t *testing.T) {
	pf := edge(t, "cycle.jsonl")
	require.Len(t, pf.Runs, 1)
	assert.Len(t, pf.Runs[0].Messages, 3, "every record once, the cycle cut")
	assert.NotContains(t, texts(pf.Runs[0].Messages), "three again (duplicate uuid)")
}

func TestEdgeOldResume(t *testing.T) {
	// Older versions resumed into a new file, copying the records with
	// their original sessionId: that marks the copy.
	pf := edge(t, "oldresume/b0000000-0000-4000-8000-000000000005.jsonl")
	r := pf.Runs[0]
	require.NotNil(t, r.Fork)
	assert.Equal(t, "a0000000-0000-4000-8000-000000000004", r.Fork.ParentSession)
	assert.Equal(t, 2, r.Fork.Inherited)
	assert.Equal(t, "r2", r.Fork.AfterMessage)
	assert.Equal(t, model.Usage{InputTokens: 10, OutputTokens: 5}, r.Run.Usage, "only the new answer")
}

// mainFile is the real main session (1-hello + 2-bash).
func mainFile(t *testing.T) []byte {
	t.Helper()
	var idx agentsIndex
	readJSON(t, filepath.Join(testdata, "agents/out/claude/index.json"), &idx)
	for _, r := range idx.Runs {
		if r.Step == "2-bash" {
			b, err := os.ReadFile(filepath.Join(testdata, r.Transcript))
			require.NoError(t, err)
			return b
		}
	}
	t.Fatal("no 2-bash run")
	return nil
}

func TestPartialLastLine(t *testing.T) {
	b := mainFile(t)
	whole, err := Parse(bytes.NewReader(b), "main.jsonl")
	require.NoError(t, err)
	// Cut inside the last assistant record (Claude is still writing it).
	lastAsst := bytes.LastIndex(b, []byte(`{"parentUuid"`))
	cut := lastAsst + 200
	partial, err := Parse(bytes.NewReader(b[:cut]), "main.jsonl")
	require.NoError(t, err)
	assert.Empty(t, partial.Skipped, "a partial line is not malformed: it is not read yet")
	assert.Equal(t, int64(lastAsst), partial.Offset, "Offset stops before the partial line")
	assert.Equal(t, byte('\n'), b[partial.Offset-1])
	assert.Len(t, partial.Runs[0].Messages, len(whole.Runs[0].Messages)-1)

	// The rest arrives; reading again from 0 gives the whole file.
	again, err := Parse(bytes.NewReader(b), "main.jsonl")
	require.NoError(t, err)
	assert.Equal(t, int64(len(b)), again.Offset)
	assert.Equal(t, whole.Runs, again.Runs)

	// A complete record without its newline is still left unread.
	noNL := bytes.TrimSuffix(b, []byte("\n"))
	last := bytes.LastIndexByte(noNL, '\n') + 1
	pf, err := Parse(bytes.NewReader(noNL), "main.jsonl")
	require.NoError(t, err)
	assert.Equal(t, int64(last), pf.Offset)
}

func TestHugeLine(t *testing.T) {
	// A 10 MB tool result on one line.
	big := strings.Repeat("0123456789abcdef\\n", 10<<20/18)
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"type":"user","uuid":"h1","parentUuid":null,"sessionId":"s","message":{"role":"user","content":"read the big file"}}`+"\n")
	fmt.Fprintf(&b, `{"type":"assistant","uuid":"h2","parentUuid":"h1","sessionId":"s","message":{"id":"m1","role":"assistant","model":"m","content":[{"type":"tool_use","id":"t1","name":"Read","input":{"file_path":"/big"}}],"usage":{"input_tokens":1,"output_tokens":1}}}`+"\n")
	fmt.Fprintf(&b, `{"type":"user","uuid":"h3","parentUuid":"h2","sessionId":"s","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"%s"}]},"toolUseResult":{"stdout":"%s"}}`+"\n", big, big)
	fmt.Fprintf(&b, `{"type":"assistant","uuid":"h4","parentUuid":"h3","sessionId":"s","message":{"id":"m2","role":"assistant","model":"m","content":[{"type":"text","text":"big"}],"usage":{"input_tokens":1,"output_tokens":1}}}`+"\n")
	require.Greater(t, b.Len(), 20<<20)
	pf, err := Parse(bytes.NewReader(b.Bytes()), "big.jsonl")
	require.NoError(t, err)
	assert.Empty(t, pf.Skipped)
	assert.Equal(t, int64(b.Len()), pf.Offset)
	msgs := pf.Runs[0].Messages
	require.Len(t, msgs, 4)
	assert.Equal(t, model.Tool, msgs[2].Role)
	assert.Equal(t, len(big)/18*17, len(msgs[2].Parts[0].Text), "the escape decoded")
	assert.Equal(t, "big", msgs[3].PlainText())
}

// TestLineOverTheCapIsSkipped: a line over 64 MiB is listed as skipped,
// naming its size, without being read whole, and the records after it
// still import; Offset goes past it.
func TestLineOverTheCapIsSkipped(t *testing.T) {
	t.Parallel()
	before := `{"type":"user","uuid":"c1","parentUuid":null,"sessionId":"s","message":{"role":"user","content":"first"}}` + "\n"
	after := "\n" + `{"type":"assistant","uuid":"c2","parentUuid":"c1","sessionId":"s","message":{"id":"m1","role":"assistant","model":"m","content":[{"type":"text","text":"still here"}]}}` + "\n" +
		`{"type":"user","uuid":"c3","parentUuid":"c2","sessionId":"s","message":{"role":"user","content":"and on"}}` + "\n"
	const huge = 65 << 20
	pf, err := Parse(jsonltest.Around(before, huge, after), "huge.jsonl")
	require.NoError(t, err)
	require.Len(t, pf.Skipped, 1)
	assert.Equal(t, harness.Skip{File: "huge.jsonl", Line: 2, Reason: "line is 65.0 MiB, over the 64 MiB cap: skipped"}, pf.Skipped[0])
	assert.Equal(t, int64(len(before)+huge+len(after)), pf.Offset)
	require.Len(t, pf.Runs, 1)
	assert.Equal(t, []string{"first", "still here", "and on"}, texts(pf.Runs[0].Messages))
}

func TestInvalidUTF8(t *testing.T) {
	// BAD stands for invalid UTF-8 bytes; the JSON escape \u00e9 is valid.
	src := `{"type":"user","uuid":"u1","parentUuid":null,"sessionId":"s","message":{"role":"user","content":"bad BAD bytes"}}
{"type":"assistant","uuid":"u2","parentUuid":"u1","sessionId":"s","message":{"id":"m","role":"assistant","content":[{"type":"text","text":"esc\u00e9 and BAD\n"},{"type":"tool_use","id":"t","name":"X","input":{"a":"BAD"}}]}}
{"type":"user","uuid":"u3","parentUuid":"u2","sessionId":"s","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"BADok"}]}}
BAD not even json
`
	b := strings.ReplaceAll(src, "BAD", "\xff\xfe\xc3")
	pf, err := Parse(strings.NewReader(b), "utf8.jsonl")
	require.NoError(t, err)
	require.Len(t, pf.Skipped, 1)
	assert.Equal(t, 4, pf.Skipped[0].Line)
	msgs := pf.Runs[0].Messages
	require.Len(t, msgs, 3)
	for _, m := range msgs {
		for _, p := range m.Parts {
			assert.True(t, utf8.ValidString(p.Text), "%q", p.Text)
			assert.True(t, utf8.ValidString(p.ToolInput), "%q", p.ToolInput)
		}
	}
	assert.Equal(t, "bad \uFFFD\uFFFD\uFFFD bytes", msgs[0].PlainText())
	assert.Equal(t, "esc\u00e9 and \uFFFD\uFFFD\uFFFD\n", msgs[1].Parts[0].Text)
}

func TestEmptyAndBookkeepingOnly(t *testing.T) {
	pf, err := Parse(strings.NewReader(""), "empty.jsonl")
	require.NoError(t, err)
	assert.Empty(t, pf.Runs)
	assert.Zero(t, pf.Offset)
	// Claude writes its queue records before the first prompt.
	q := `{"type":"queue-operation","operation":"enqueue","timestamp":"2026-11-29T09:30:55.995Z","sessionId":"s","content":"hi"}` + "\n"
	pf, err = Parse(strings.NewReader(q), "q.jsonl")
	require.NoError(t, err)
	assert.Empty(t, pf.Runs)
	assert.Empty(t, pf.Skipped)
	assert.Equal(t, int64(len(q)), pf.Offset)
}

func TestCRLF(t *testing.T) {
	b := bytes.ReplaceAll(mainFile(t), []byte("\n"), []byte("\r\n"))
	pf, err := Parse(bytes.NewReader(b), "crlf.jsonl")
	require.NoError(t, err)
	assert.Empty(t, pf.Skipped)
	assert.Len(t, pf.Runs[0].Messages, 6)
}

func TestLocalCommands(t *testing.T) {
	// Interactive sessions write slash commands as system local_command
	// records; -p mode as user records (see the compaction test).
	src := `{"type":"user","uuid":"l1","parentUuid":null,"sessionId":"s","message":{"role":"user","content":"hi"}}
{"type":"system","subtype":"local_command","uuid":"l2","parentUuid":"l1","sessionId":"s","content":"<command-name>/model</command-name>\n<command-message>model</command-message>\n<command-args>opus</command-args>","level":"info"}
{"type":"system","subtype":"local_command","uuid":"l3","parentUuid":"l2","sessionId":"s","content":"<local-command-stdout>Set model to opus</local-command-stdout>","level":"info"}
{"type":"user","uuid":"l4","parentUuid":"l3","sessionId":"s","isMeta":true,"message":{"role":"user","content":"<local-command-caveat>Caveat: injected</local-command-caveat>"}}
{"type":"user","uuid":"l5","parentUuid":"l4","sessionId":"s","message":{"role":"user","content":"<command-message>review</command-message>\n<command-name>/review</command-name>"}}
`
	pf, err := Parse(strings.NewReader(src), "cmd.jsonl")
	require.NoError(t, err)
	require.Len(t, pf.Runs, 1)
	msgs := pf.Runs[0].Messages
	assert.Equal(t, []string{"hi", "/model opus", "Set model to opus", "/review"}, texts(msgs))
	assert.Equal(t, []model.Role{model.User, model.User, model.System, model.User}, []model.Role{msgs[0].Role, msgs[1].Role, msgs[2].Role, msgs[3].Role})
	assert.True(t, msgs[1].IsPrompt(), "a typed command is a prompt")
}

func TestCompactBoundaryWithoutLogicalParent(t *testing.T) {
	src := `{"type":"user","uuid":"c1","parentUuid":null,"sessionId":"s","message":{"role":"user","content":"long talk"}}
{"type":"assistant","uuid":"c2","parentUuid":"c1","sessionId":"s","message":{"id":"m1","role":"assistant","content":[{"type":"text","text":"yes"}]}}
{"type":"system","subtype":"compact_boundary","uuid":"c3","parentUuid":null,"sessionId":"s","content":"Conversation compacted","compactMetadata":{"trigger":"auto","preTokens":150000}}
{"type":"user","uuid":"c4","parentUuid":"c3","sessionId":"s","isCompactSummary":true,"message":{"role":"user","content":"Summary: a long talk."}}
{"type":"user","uuid":"c5","parentUuid":"c4","sessionId":"s","message":{"role":"user","content":"go on"}}
`
	pf, err := Parse(strings.NewReader(src), "compact.jsonl")
	require.NoError(t, err)
	require.Len(t, pf.Runs, 1, "a compaction continues the conversation")
	msgs := pf.Runs[0].Messages
	assert.Equal(t, []string{"long talk", "yes", "conversation compacted (auto, 150000 tokens before)\nSummary: a long talk.", "go on"}, texts(msgs))
	assert.Equal(t, model.System, msgs[2].Role)
	assert.Equal(t, "c3", msgs[2].NativeID)
}

func TestServerToolsDoNotPair(t *testing.T) {
	src := `{"type":"user","uuid":"w1","parentUuid":null,"sessionId":"s","message":{"role":"user","content":"search"}}
{"type":"assistant","uuid":"w2","parentUuid":"w1","sessionId":"s","message":{"id":"m","role":"assistant","content":[{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"q"}},{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[]},{"type":"text","text":"found"}]}}
{"type":"user","uuid":"w3","parentUuid":"w2","sessionId":"s","message":{"role":"user","content":"thanks"}}
`
	pf, err := Parse(strings.NewReader(src), "web.jsonl")
	require.NoError(t, err)
	msgs := pf.Runs[0].Messages
	assert.Equal(t, []model.PartKind{model.Other, model.Other, model.Text}, kinds(msgs[1]))
	assert.Equal(t, []int{1, 2, 3}, model.Checkpoints(msgs))
}

func TestEdgeInterruptedCall(t *testing.T) {
	// Claude Code interrupted while the model was writing a tool call: the
	// call has no result, "[Request interrupted by user]" follows and the
	// person goes on. The abandoned call is closed by that message (rule 1):
	// the cuts after it are checkpoints again.
	pf := parseFile(t, filepath.Join(testdata, "claude/edge/interrupted.jsonl"))
	assert.Empty(t, pf.Skipped)
	require.Len(t, pf.Runs, 1)
	msgs := pf.Runs[0].Messages
	assert.Equal(t, []string{"list the files, slowly", `Bash {"command":"sleep 100; ls"}`, "[Request interrupted by user]", "never mind, just say hi", "Hi."}, texts(msgs))
	assert.Equal(t, []int{1, 3, 4, 5}, model.Checkpoints(msgs))
}

func TestEdgeOneAPIMessageAcrossResults(t *testing.T) {
	// Claude Code runs a tool as soon as its block is written, so a
	// parallel batch can come out as assistant(A), user(result A),
	// assistant(B) with the same message.id, user(result B). It is one
	// model response: one assistant message holding A and B, then the
	// results, with no checkpoint inside it and its usage counted once.
	pf := edge(t, "split-message.jsonl")
	assert.Empty(t, pf.Skipped)
	require.Len(t, pf.Runs, 1)
	msgs := pf.Runs[0].Messages
	assert.Equal(t, []model.Role{model.User, model.Assistant, model.Tool, model.Tool, model.Assistant}, roleList(msgs))
	assert.Equal(t, []model.PartKind{model.Text, model.ToolCall, model.Text, model.ToolCall}, kinds(msgs[1]))
	assert.Equal(t, "m2", msgs[1].NativeID)
	assert.Equal(t, []string{"m4", "m7"}, []string{msgs[2].NativeID, msgs[3].NativeID})
	assert.Equal(t, []int{1, 4, 5}, model.Checkpoints(msgs))
	assert.Equal(t, model.Usage{InputTokens: 10, OutputTokens: 40, CacheReadTokens: 100, CacheWriteTokens: 20}, msgs[1].Usage)
	assert.Equal(t, model.Usage{InputTokens: 20, OutputTokens: 45, CacheReadTokens: 200, CacheWriteTokens: 40}, pf.Runs[0].Run.Usage)
}

func roleList(msgs []model.Message) []model.Role {
	var out []model.Role
	for _, m := range msgs {
		out = append(out, m.Role)
	}
	return out
}

func TestUsageOutOfRange(t *testing.T) {
	// A count outside 0..2^53 is corrupt: the message is kept without its
	// usage, and the line is listed with why; nothing overflows.
	src := `{"type":"user","uuid":"o1","parentUuid":null,"sessionId":"s","message":{"role":"user","content":"count"}}
{"type":"assistant","uuid":"o2","parentUuid":"o1","sessionId":"s","message":{"id":"m1","role":"assistant","content":[{"type":"text","text":"huge"}],"usage":{"input_tokens":5,"output_tokens":1e30}}}
{"type":"user","uuid":"o3","parentUuid":"o2","sessionId":"s","message":{"role":"user","content":"again"}}
{"type":"assistant","uuid":"o4","parentUuid":"o3","sessionId":"s","message":{"id":"m2","role":"assistant","content":[{"type":"text","text":"negative"}],"usage":{"input_tokens":-7,"output_tokens":3}}}
{"type":"user","uuid":"o5","parentUuid":"o4","sessionId":"s","message":{"role":"user","content":"and"}}
{"type":"assistant","uuid":"o6","parentUuid":"o5","sessionId":"s","message":{"id":"m3","role":"assistant","content":[{"type":"text","text":"fine"}],"usage":{"input_tokens":9007199254740992,"output_tokens":2,"cache_read_input_tokens":null}}}
`
	pf, err := Parse(strings.NewReader(src), "usage.jsonl")
	require.NoError(t, err)
	require.Len(t, pf.Skipped, 2)
	assert.Equal(t, 2, pf.Skipped[0].Line)
	assert.Contains(t, pf.Skipped[0].Reason, "output_tokens")
	assert.Equal(t, 4, pf.Skipped[1].Line)
	assert.Contains(t, pf.Skipped[1].Reason, "input_tokens: -7")
	msgs := pf.Runs[0].Messages
	assert.Equal(t, []string{"count", "huge", "again", "negative", "and", "fine"}, texts(msgs))
	assert.Zero(t, msgs[1].Usage)
	assert.Zero(t, msgs[3].Usage)
	assert.Equal(t, model.Usage{InputTokens: model.MaxTokens, OutputTokens: 2}, pf.Runs[0].Run.Usage)
}

func TestEdgeInlineSubagents(t *testing.T) {
	// Claude Code 1.x wrote each Task subagent into the session's file,
	// from a root of its own, naming neither the agent nor the call: each
	// is a subagent of its own, started by its Task call.
	pf := edge(t, "sidechains-inline-two.jsonl")
	assert.Empty(t, pf.Skipped)
	require.Len(t, pf.Runs, 3)
	assert.Equal(t, []string{"use two subagents", `Task {"description":"look left","prompt":"look left"}`, "Left is clear.",
		`Task {"description":"look right","prompt":"look right"}`, "Right is clear.", "Both clear."}, texts(pf.Runs[0].Messages))
	for i, want := range []struct{ call, text string }{{"toolu_left", "Left is clear."}, {"toolu_right", "Right is clear."}} {
		r := pf.Runs[i+1]
		assert.Equal(t, -1, r.Parent, "a subagent is no branch")
		require.NotNil(t, r.Subagent)
		assert.Equal(t, want.call, r.Subagent.ToolCallID)
		assert.Equal(t, want.text, texts(r.Messages)[1])
	}
}

func TestEdgeCompactionAgent(t *testing.T) {
	// The agent Claude Code compacts with: no call started it, and its
	// prompt is the instructions to summarize; its title says what it is.
	pf := parseFile(t, filepath.Join(testdata, "claude/edge/compaction/e0000000-0000-4000-8000-00000000000b/subagents/agent-acompact-7a3f.jsonl"))
	require.Len(t, pf.Runs, 1)
	r := pf.Runs[0]
	require.NotNil(t, r.Subagent)
	assert.Equal(t, "e0000000-0000-4000-8000-00000000000b", r.Subagent.ParentSession)
	assert.Empty(t, r.Subagent.ToolCallID)
	assert.Equal(t, CompactionTitle, r.Run.Title)
	// The other subagents keep their calls and task descriptions.
	pf = parseFile(t, filepath.Join(testdata, "claude/edge/compaction/e0000000-0000-4000-8000-00000000000b/subagents/agent-a2.jsonl"))
	assert.Equal(t, "toolu_2", pf.Runs[0].Subagent.ToolCallID)
	assert.Equal(t, "look at the right side", pf.Runs[0].Run.Title)
}
