package pi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/internal/jsonl/jsonltest"
	"tine/model"
)

const testdata = "../../testdata"

// genIndex is testdata/agents/out/pi/index.json: what the generator ran.
type genIndex struct {
	Runs []struct {
		Step       string `json:"step"`
		SessionID  string `json:"session_id"`
		Transcript string `json:"transcript"`
		Stdout     string `json:"stdout"`
	} `json:"runs"`
}

func loadIndex(t *testing.T) genIndex {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testdata, "agents/out/pi/index.json"))
	require.NoError(t, err)
	var idx genIndex
	require.NoError(t, json.Unmarshal(data, &idx))
	require.Len(t, idx.Runs, 3)
	return idx
}

// reported is what one pi invocation said on stdout: the usage and cost of
// its assistant message_end events, and how many new messages agent_end had.
type reported struct {
	usage    model.Usage
	cost     float64
	messages int
}

func readStdout(t *testing.T, path string) reported {
	t.Helper()
	f, err := os.Open(filepath.Join(testdata, path))
	require.NoError(t, err)
	defer f.Close()
	var r reported
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev struct {
			Type    string            `json:"type"`
			Message *message          `json:"message"`
			Msgs    []json.RawMessage `json:"messages"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		switch {
		case ev.Type == "message_end" && ev.Message != nil && ev.Message.Role == "assistant":
			u := ev.Message.Usage
			require.NotNil(t, u)
			r.usage = r.usage.Add(model.Usage{InputTokens: int64(u.Input), OutputTokens: int64(u.Output),
				CacheReadTokens: int64(u.CacheRead), CacheWriteTokens: int64(u.CacheWrite)})
			r.cost += u.Cost.Total
		case ev.Type == "agent_end":
			r.messages += len(ev.Msgs)
		}
	}
	require.NoError(t, sc.Err())
	return r
}

func roles(msgs []model.Message) []model.Role {
	out := make([]model.Role, len(msgs))
	for i, m := range msgs {
		out[i] = m.Role
	}
	return out
}

func nativeIDs(msgs []model.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.NativeID
	}
	return out
}

func parseFile(t *testing.T, path string) harness.ParsedFile {
	t.Helper()
	pf, err := ParseFile(path)
	require.NoError(t, err)
	checkInvariants(t, pf)
	return pf
}

// TestRealSessions reads the files the real pi 0.73.1 wrote and checks them
// against what pi reported on stdout while writing them.
func TestRealSessions(t *testing.T) {
	idx := loadIndex(t)
	// Every invocation that wrote to a transcript, in order.
	want := map[string]reported{}
	var order []string
	for _, r := range idx.Runs {
		rep := readStdout(t, r.Stdout)
		w, seen := want[r.Transcript]
		if !seen {
			order = append(order, r.Transcript)
		}
		w.usage, w.cost, w.messages = w.usage.Add(rep.usage), w.cost+rep.cost, w.messages+rep.messages
		want[r.Transcript] = w
	}
	require.Len(t, order, 2, "main session (1-hello, 2-bash) and the fork (3-fork)")
	mainID, forkID := idx.Runs[0].SessionID, idx.Runs[2].SessionID

	parsed := map[string]harness.ParsedFile{}
	for _, tr := range order {
		path := filepath.Join(testdata, tr)
		pf := parseFile(t, path)
		info, err := os.Stat(path)
		require.NoError(t, err)
		assert.Equal(t, info.Size(), pf.Offset, "%s: read to the end", tr)
		assert.Empty(t, pf.Skipped, tr)
		require.Len(t, pf.Runs, 1, "%s: no in-file branches", tr)
		run := pf.Runs[0]
		assert.Equal(t, -1, run.Parent)
		assert.Equal(t, "pi", run.Run.Harness)
		assert.Equal(t, "/tmp/tine-gen/project", run.Run.Cwd)
		assert.Equal(t, "tine/tine-test-model", run.Run.Model)
		assert.Equal(t, "say hello", run.Run.Title)
		assert.Equal(t, model.Completed, run.Run.Status)
		assert.False(t, run.Run.CreatedAt.IsZero())
		assert.False(t, run.Run.FinishedAt.Before(run.Run.CreatedAt))
		// Own usage and cost are exactly what pi reported for the
		// invocations that wrote this file's own messages.
		w := want[tr]
		assert.Equal(t, w.usage, run.Run.Usage, "%s: own usage = sum of assistant message_end usage", tr)
		assert.InDelta(t, w.cost, run.Run.CostUSD, 1e-12, tr)
		inherited := 0
		if run.Fork != nil {
			inherited = run.Fork.Inherited
		}
		assert.Equal(t, w.messages, len(run.Messages)-inherited, "%s: own messages = agent_end's new messages", tr)
		assert.Equal(t, w.usage, model.OwnUsage(run.Messages, inherited))
		parsed[tr] = pf
	}

	main := parsed[order[0]].Runs[0]
	assert.Equal(t, mainID, main.Run.NativeID)
	assert.Nil(t, main.Fork)
	require.Equal(t, []model.Role{model.User, model.Assistant, model.User, model.Assistant, model.Tool, model.Assistant}, roles(main.Messages))
	// The bash call and its result pair up; the run's end is a checkpoint.
	assert.Equal(t, []int{1, 2, 3, 5, 6}, model.Checkpoints(main.Messages))
	bash := main.Messages[3]
	require.Len(t, bash.Parts, 3)
	assert.Equal(t, model.Thinking, bash.Parts[0].Kind)
	assert.Equal(t, "The user wants me to run a shell command.", bash.Parts[0].Text)
	assert.Equal(t, model.Text, bash.Parts[1].Kind)
	call := bash.Parts[2]
	assert.Equal(t, model.ToolCall, call.Kind)
	assert.Equal(t, "bash", call.ToolName)
	assert.JSONEq(t, `{"command":"echo hi && ls"}`, call.ToolInput)
	assert.Equal(t, model.Usage{InputTokens: 300, OutputTokens: 60, CacheReadTokens: 1100}, bash.Usage)
	res := main.Messages[4].Parts[0]
	assert.Equal(t, model.ToolResult, res.Kind)
	assert.Equal(t, call.ToolCallID, res.ToolCallID)
	assert.Equal(t, "bash", res.ToolName)
	assert.Equal(t, "hi\nREADME.md\nnotes.txt\n", res.Text)
	assert.False(t, res.IsError)
	for _, m := range main.Messages {
		assert.Len(t, m.NativeID, 8, "entry ids are 8 hex")
		assert.False(t, m.Time.IsZero())
	}
	assert.Equal(t, model.Usage{InputTokens: 1700, OutputTokens: 105, CacheReadTokens: 2500}, main.Run.Usage,
		"1-hello {1200,25} + 2-bash {300+200, 60+20, cache 1100+1400}")

	fork := parsed[order[1]].Runs[0]
	assert.Equal(t, forkID, fork.Run.NativeID)
	require.NotNil(t, fork.Fork)
	assert.Equal(t, mainID, fork.Fork.ParentSession)
	assert.Equal(t, 6, fork.Fork.Inherited)
	assert.Contains(t, nativeIDs(main.Messages), fork.Fork.AfterMessage)
	assert.Equal(t, main.Messages[5].NativeID, fork.Fork.AfterMessage)
	assert.Equal(t, main.Messages, fork.Messages[:6], "the copies are the parent's messages")
	assert.Equal(t, append(roles(main.Messages), model.User, model.Assistant), roles(fork.Messages))
	assert.Equal(t, "fork: now say bye", fork.Messages[6].PlainText())
	assert.Equal(t, model.Usage{InputTokens: 150, OutputTokens: 15, CacheReadTokens: 1600}, fork.Run.Usage)
	assert.Equal(t, []int{1, 2, 3, 5, 6, 7, 8}, model.Checkpoints(fork.Messages))
}

// fullLen is the length of runs[i] with its inherited prefix.
func fullLen(runs []harness.ParsedRun, i int) int {
	if runs[i].Parent < 0 {
		return len(runs[i].Messages)
	}
	return runs[i].ForkAt + len(runs[i].Messages)
}

// checkInvariants holds for every parse, of any input.
func checkInvariants(t *testing.T, pf harness.ParsedFile) {
	t.Helper()
	for i, r := range pf.Runs {
		if i == 0 {
			assert.Equal(t, -1, r.Parent)
			if r.Fork != nil {
				assert.LessOrEqual(t, r.Fork.Inherited, len(r.Messages))
			}
			continue
		}
		assert.Nil(t, r.Fork)
		if assert.True(t, r.Parent >= 0 && r.Parent < i, "run %d's parent %d comes before it", i, r.Parent) {
			assert.LessOrEqual(t, r.ForkAt, fullLen(pf.Runs, r.Parent))
		}
		assert.NotEmpty(t, r.Messages, "a branch has messages of its own")
	}
}

// path is the full message list of run i, prefix included.
func path(runs []harness.ParsedRun, i int) []model.Message {
	r := runs[i]
	if r.Parent < 0 {
		return r.Messages
	}
	return append(append([]model.Message(nil), path(runs, r.Parent)[:r.ForkAt]...), r.Messages...)
}

func TestInFileBranches(t *testing.T) {
	pf := parseFile(t, filepath.Join(testdata, "pi/edge/branch.jsonl"))
	assert.Empty(t, pf.Skipped)
	require.Len(t, pf.Runs, 5)

	main := pf.Runs[0]
	// The main line ends at the last entry (a label after a session name),
	// walking through model_change, branch_summary and session_info links.
	assert.Equal(t, []string{"u0000001", "a0000001", "bs000001", "u0000003", "a0000004", "u0000004", "a0000005"}, nativeIDs(main.Messages))
	assert.Equal(t, model.System, main.Messages[2].Role)
	assert.Contains(t, main.Messages[2].PlainText(), "Tried listing files with bash.")
	assert.Equal(t, "Edge branching", main.Run.Title, "session_info names the session")
	assert.Equal(t, "other/m2", main.Run.Model, "the last model on the path")
	assert.Equal(t, "other/m2", main.Messages[6].Model)
	assert.Equal(t, model.Usage{InputTokens: 1000, OutputTokens: 100}, main.Run.Usage)

	// The first path, abandoned at a0000001 (its leaf is a thinking_level_change).
	b := pf.Runs[1]
	assert.Equal(t, 0, b.Parent)
	assert.Equal(t, 2, b.ForkAt)
	assert.Equal(t, []string{"u0000002", "a0000002", "t0000001", "a0000003"}, nativeIDs(b.Messages))
	assert.Equal(t, model.Usage{InputTokens: 500, OutputTokens: 50, CacheReadTokens: 50}, b.Run.Usage)
	assert.Equal(t, []int{1, 2, 3, 5, 6}, model.Checkpoints(path(pf.Runs, 1)))
	assert.Equal(t, "Edge branching", b.Run.Title)
	assert.Equal(t, main.Run.NativeID, b.Run.NativeID)

	// The model_change leaf under a0000001 adds no message: no run.
	// A branch off the main line at a0000004.
	c := pf.Runs[2]
	assert.Equal(t, 0, c.Parent)
	assert.Equal(t, 5, c.ForkAt)
	assert.Equal(t, []string{"u0000005", "a0000006"}, nativeIDs(c.Messages))
	assert.Equal(t, "tine/tine-test-model", c.Run.Model)

	// A new root (pi's resetLeaf): a branch at K=0.
	d := pf.Runs[3]
	assert.Equal(t, 0, d.Parent)
	assert.Equal(t, 0, d.ForkAt)
	assert.Equal(t, []string{"u0000006", "a0000007"}, nativeIDs(d.Messages))

	// A branch of a branch: it leaves run 1 after u0000002.
	e := pf.Runs[4]
	assert.Equal(t, 1, e.Parent)
	assert.Equal(t, 3, e.ForkAt)
	assert.Equal(t, []string{"a0000008"}, nativeIDs(e.Messages))
	assert.Equal(t, []string{"u0000001", "a0000001", "u0000002", "a0000008"}, nativeIDs(path(pf.Runs, 4)))

	// Every message is in exactly one run.
	total := 0
	for _, r := range pf.Runs {
		total += len(r.Messages)
	}
	assert.Equal(t, 16, total)
}

func TestForkOfBranchedSession(t *testing.T) {
	parent := parseFile(t, filepath.Join(testdata, "pi/edge/branch.jsonl"))
	pf := parseFile(t, filepath.Join(testdata, "pi/edge/fork-of-branch.jsonl"))
	assert.Empty(t, pf.Skipped)
	// The parent's side branches were copied too; only a branch with new
	// messages becomes a run here.
	require.Len(t, pf.Runs, 2)
	main := pf.Runs[0]
	require.NotNil(t, main.Fork)
	assert.Equal(t, "01a226a4-0000-7000-8000-00000000b001", main.Fork.ParentSession, "from the parent's file name")
	assert.Equal(t, 7, main.Fork.Inherited)
	assert.Equal(t, "a0000005", main.Fork.AfterMessage)
	assert.Equal(t, parent.Runs[0].Messages, main.Messages[:7])
	assert.Equal(t, []string{"u0000007", "a0000009"}, nativeIDs(main.Messages[7:]))
	assert.Equal(t, model.Usage{InputTokens: 900, OutputTokens: 90}, main.Run.Usage, "copies carry no usage")
	assert.Equal(t, "Edge branching", main.Run.Title, "the copied session_info")

	side := pf.Runs[1]
	assert.Equal(t, 0, side.Parent)
	assert.Equal(t, 5, side.ForkAt)
	assert.Equal(t, []string{"u0000005", "a0000006", "u0000008", "a0000010"}, nativeIDs(side.Messages))
	assert.Equal(t, model.Usage{InputTokens: 1000, OutputTokens: 100}, side.Run.Usage, "only its new message counts")
}

func TestForkWithNothingCopied(t *testing.T) {
	// /fork before the first prompt: newSession({parentSession}) copies nothing.
	in := `{"type":"session","version":3,"id":"new","timestamp":"2026-11-29T10:00:00.000Z","cwd":"/x","parentSession":"C:\\pi\\sessions\\2026-11-29T09-00-00-000Z_old-id.jsonl"}
{"type":"message","id":"u1","parentId":null,"timestamp":"2026-11-29T10:00:01.000Z","message":{"role":"user","content":[{"type":"text","text":"hi"}]}}
`
	pf, err := Parse(strings.NewReader(in), "x.jsonl")
	require.NoError(t, err)
	require.Len(t, pf.Runs, 1)
	require.NotNil(t, pf.Runs[0].Fork)
	assert.Equal(t, harness.ForkHint{ParentSession: "old-id"}, *pf.Runs[0].Fork)
}

func TestSessionIDFromPath(t *testing.T) {
	for in, want := range map[string]string{
		"/h/.pi/agent/sessions/--p--/2026-11-29T09-31-00-429Z_01a226a4-bdcc-7610-9e43-eacb023d7281.jsonl": "01a226a4-bdcc-7610-9e43-eacb023d7281",
		`C:\Users\me\.pi\x_abc.jsonl`: "abc",
		"/tmp/custom.jsonl":           "custom",
		"":                            "",
	} {
		assert.Equal(t, want, sessionIDFromPath(in), in)
	}
}

func TestUnknownTypes(t *testing.T) {
	pf := parseFile(t, filepath.Join(testdata, "pi/edge/unknown.jsonl"))
	assert.Empty(t, pf.Skipped, "unknown entry types, block types and roles are ignored, not errors")
	require.Len(t, pf.Runs, 1)
	msgs := pf.Runs[0].Messages
	assert.Equal(t, []string{"u1", "a1", "u2", "a2"}, nativeIDs(msgs), "custom, checkpoint_v9 and the narrator message are links, not messages")
	require.Len(t, msgs[1].Parts, 2)
	assert.Equal(t, model.Other, msgs[1].Parts[1].Kind)
	assert.JSONEq(t, `{"type":"hologram","x":1}`, msgs[1].Parts[1].Raw, "an unknown block keeps its JSON")
	last := msgs[3].Parts[len(msgs[3].Parts)-1]
	assert.Equal(t, model.Other, last.Kind)
	assert.JSONEq(t, `{"stopReason":"error"}`, last.Raw)
}

func TestMalformedLines(t *testing.T) {
	pf := parseFile(t, filepath.Join(testdata, "pi/edge/malformed.jsonl"))
	var lines []int
	for _, s := range pf.Skipped {
		lines = append(lines, s.Line)
		assert.True(t, strings.HasSuffix(s.File, "malformed.jsonl"))
		assert.NotEmpty(t, s.Reason)
	}
	assert.Equal(t, []int{4, 6, 8, 11}, lines)
	assert.Contains(t, pf.Skipped[2].Reason, "message:")
	require.Len(t, pf.Runs, 1)
	// Line 8 is skipped as a message but still links u2 to a1.
	assert.Equal(t, []string{"u1", "a1", "u2", "a2"}, nativeIDs(pf.Runs[0].Messages))
}

func TestNotASession(t *testing.T) {
	_, err := Parse(strings.NewReader(`{"type":"session_meta","payload":{}}`+"\n"), "codex.jsonl")
	assert.ErrorContains(t, err, "not a pi session")
	_, err = Parse(strings.NewReader("garbage\n"), "junk.jsonl")
	assert.ErrorContains(t, err, "not a pi session")

	// Nothing complete yet: no runs, no error, nothing consumed.
	pf, err := Parse(strings.NewReader(`{"type":"sess`), "new.jsonl")
	require.NoError(t, err)
	assert.Empty(t, pf.Runs)
	assert.Zero(t, pf.Offset)

	// A header alone is a session with no messages yet.
	pf, err = Parse(strings.NewReader(`{"type":"session","version":3,"id":"s","timestamp":"2026-11-29T10:00:00Z","cwd":"/x"}`+"\n"), "h.jsonl")
	require.NoError(t, err)
	require.Len(t, pf.Runs, 1)
	assert.Empty(t, pf.Runs[0].Messages)
	assert.Equal(t, "s", pf.Runs[0].Run.NativeID)
}

func TestPartialLastLine(t *testing.T) {
	path := filepath.Join(testdata, "pi/edge/partial.jsonl")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	pf := parseFile(t, path)
	complete := bytes.LastIndexByte(data, '\n') + 1
	require.Less(t, complete, len(data), "the file ends mid-line")
	assert.Equal(t, int64(complete), pf.Offset)
	assert.Empty(t, pf.Skipped, "the partial line is not an error")
	assert.Equal(t, []string{"u1", "a1"}, nativeIDs(pf.Runs[0].Messages))

	// Once pi finishes the line, it is read.
	tail := string(data[complete:])
	u2 := `{"type":"message","id":"u2","parentId":"a1","timestamp":"2026-11-29T10:00:03.000Z","message":{"role":"user","content":[{"type":"text","text":"next"}],"timestamp":0}}`
	require.True(t, strings.HasPrefix(u2, tail))
	whole := string(data) + u2[len(tail):] + "\n"
	pf, err = Parse(strings.NewReader(whole), "partial.jsonl")
	require.NoError(t, err)
	assert.Equal(t, int64(len(whole)), pf.Offset)
	assert.Empty(t, pf.Skipped)
	assert.Equal(t, []string{"u1", "a1", "u2"}, nativeIDs(pf.Runs[0].Messages))
}

func TestLongLine(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 10<<20/16)
	tool, _ := json.Marshal(map[string]any{"type": "message", "id": "t1", "parentId": "a1", "timestamp": "2026-11-29T10:00:03Z",
		"message": map[string]any{"role": "toolResult", "toolCallId": "c1", "toolName": "read", "content": []any{map[string]any{"type": "text", "text": big}}, "isError": false}})
	in := `{"type":"session","version":3,"id":"s","timestamp":"2026-11-29T10:00:00Z","cwd":"/x"}
{"type":"message","id":"u1","parentId":null,"timestamp":"2026-11-29T10:00:01Z","message":{"role":"user","content":[{"type":"text","text":"read it"}]}}
{"type":"message","id":"a1","parentId":"u1","timestamp":"2026-11-29T10:00:02Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"read","arguments":{"path":"big"}}],"usage":{"input":1,"output":1}}}
` + string(tool) + "\n" + `{"type":"message","id":"a2","parentId":"t1","timestamp":"2026-11-29T10:00:04Z","message":{"role":"assistant","content":[{"type":"text","text":"big"}]}}` + "\n"
	pf, err := Parse(strings.NewReader(in), "long.jsonl")
	require.NoError(t, err)
	assert.Empty(t, pf.Skipped)
	assert.Equal(t, int64(len(in)), pf.Offset)
	msgs := pf.Runs[0].Messages
	require.Len(t, msgs, 4)
	assert.Len(t, msgs[2].Parts[0].Text, len(big))
	assert.Equal(t, []int{1, 3, 4}, model.Checkpoints(msgs))
}

// TestLineOverTheCapIsSkipped: a line over 64 MiB is listed as skipped,
// naming its size, without being read whole, and the entries after it
// still import; Offset goes past it. Over the cap, a first line cannot be
// a session header.
func TestLineOverTheCapIsSkipped(t *testing.T) {
	t.Parallel()
	before := `{"type":"session","version":3,"id":"s","timestamp":"2026-11-29T10:00:00Z","cwd":"/x"}
{"type":"message","id":"u1","parentId":null,"timestamp":"2026-11-29T10:00:01Z","message":{"role":"user","content":[{"type":"text","text":"read it"}]}}
`
	after := "\n" + `{"type":"message","id":"a1","parentId":"u1","timestamp":"2026-11-29T10:00:02Z","message":{"role":"assistant","content":[{"type":"text","text":"still here"}]}}` + "\n"
	const huge = 65 << 20
	pf, err := Parse(jsonltest.Around(before, huge, after), "huge.jsonl")
	require.NoError(t, err)
	require.Len(t, pf.Skipped, 1)
	assert.Equal(t, harness.Skip{File: "huge.jsonl", Line: 3, Reason: "line is 65.0 MiB, over the 64 MiB cap: skipped"}, pf.Skipped[0])
	assert.Equal(t, int64(len(before)+huge+len(after)), pf.Offset)
	require.Len(t, pf.Runs, 1)
	assert.Equal(t, []string{"u1", "a1"}, nativeIDs(pf.Runs[0].Messages))

	_, err = Parse(jsonltest.Around("", huge, "\n"), "huge-header.jsonl")
	assert.EqualError(t, err, "huge-header.jsonl: not a pi session: the first line is 65.0 MiB, over the 64 MiB cap")
}

func TestInvalidUTF8(t *testing.T) {
	pf := parseFile(t, filepath.Join(testdata, "pi/edge/invalid-utf8.jsonl"))
	require.Len(t, pf.Skipped, 1, "bytes outside a string break the line")
	assert.Equal(t, 3, pf.Skipped[0].Line)
	msgs := pf.Runs[0].Messages
	require.Len(t, msgs, 2)
	assert.Equal(t, "bad \ufffd\ufffd bytes", msgs[0].PlainText(), "bad bytes in a string become U+FFFD")
}

func TestImages(t *testing.T) {
	pf := parseFile(t, filepath.Join(testdata, "pi/edge/images.jsonl"))
	assert.Empty(t, pf.Skipped)
	msgs := pf.Runs[0].Messages
	require.Len(t, msgs, 4)
	prompt := msgs[0]
	assert.True(t, prompt.IsPrompt())
	require.Len(t, prompt.Parts, 2)
	img := prompt.Parts[1]
	assert.Equal(t, model.Image, img.Kind)
	assert.JSONEq(t, `{"type":"image","mimeType":"image/png","bytes":70}`, img.Raw)
	assert.Equal(t, model.Thinking, msgs[1].Parts[0].Kind)
	assert.Equal(t, "(redacted)", msgs[1].Parts[0].Text)
	res := msgs[2].Parts
	require.Len(t, res, 2)
	assert.Equal(t, model.ToolResult, res[0].Kind)
	assert.Equal(t, "read", res[0].ToolName)
	assert.Equal(t, "Read image file [image/jpeg]", res[0].Text)
	assert.Equal(t, model.Image, res[1].Kind)
	assert.JSONEq(t, `{"type":"image","mimeType":"image/jpeg","bytes":10}`, res[1].Raw)
	for _, m := range msgs {
		for _, p := range m.Parts {
			assert.NotContains(t, p.Raw, "iVBOR", "no base64 is kept")
			assert.NotContains(t, p.Raw, "/9j/")
		}
	}
	assert.Equal(t, []int{1, 3, 4}, model.Checkpoints(msgs))
}

func TestCompactionAndPiMessages(t *testing.T) {
	pf := parseFile(t, filepath.Join(testdata, "pi/edge/compaction.jsonl"))
	assert.Empty(t, pf.Skipped)
	msgs := pf.Runs[0].Messages
	require.Equal(t, []model.Role{model.User, model.Assistant, model.User, model.Assistant,
		model.System, model.User, model.User, model.User, model.Assistant}, roles(msgs))
	compact := msgs[4]
	assert.Equal(t, "cp1", compact.NativeID)
	assert.True(t, strings.HasPrefix(compact.PlainText(), "conversation compacted (12345 tokens before)"), compact.PlainText())
	assert.Contains(t, compact.PlainText(), "The user asked about the parser.")
	assert.Equal(t, "Ran `false`\n(no output)\n\nCommand exited with code 1", msgs[5].PlainText(), "a !command, as pi shows it to the model")
	assert.Equal(t, "Injected context.", msgs[6].PlainText(), "custom_message with string content")
	assert.Equal(t, "after compaction", msgs[7].PlainText(), "user content as a string")
	assert.Equal(t, model.Usage{InputTokens: 3300, OutputTokens: 330, CacheReadTokens: 2000, CacheWriteTokens: 500}, pf.Runs[0].Run.Usage)
	assert.InDelta(t, 3300*3e-6+330*15e-6+2000*3e-7+500*3.75e-6, pf.Runs[0].Run.CostUSD, 1e-12)
}

func TestOldVersions(t *testing.T) {
	pf := parseFile(t, filepath.Join(testdata, "pi/edge/v1.jsonl"))
	assert.Empty(t, pf.Skipped)
	require.Len(t, pf.Runs, 1, "version 1 is one chain in file order")
	msgs := pf.Runs[0].Messages
	require.Equal(t, []model.Role{model.User, model.Assistant, model.Tool, model.System, model.Assistant}, roles(msgs))
	assert.Equal(t, "anthropic/claude", pf.Runs[0].Run.Model)
	assert.Equal(t, "old question", pf.Runs[0].Run.Title)
	assert.Equal(t, []int{1, 3, 4, 5}, model.Checkpoints(msgs))

	pf = parseFile(t, filepath.Join(testdata, "pi/edge/v2.jsonl"))
	msgs = pf.Runs[0].Messages
	require.Equal(t, []model.Role{model.User, model.User, model.Assistant}, roles(msgs))
	assert.Equal(t, "hook context", msgs[1].PlainText(), "hookMessage, version 2's custom")
}

func TestDetect(t *testing.T) {
	for _, f := range []string{
		"pi/sessions/--tmp-tine-gen-project--/2026-11-29T09-31-00-429Z_01a226a4-bdcc-7610-9e43-eacb023d7281.jsonl",
		"pi/edge/v1.jsonl",
	} {
		data, err := os.ReadFile(filepath.Join(testdata, f))
		require.NoError(t, err)
		assert.True(t, Detect(data[:min(len(data), 512)]), f)
		assert.True(t, Detect(data[:40]), "a header cut short still looks like one")
	}
	assert.False(t, Detect([]byte(`{"timestamp":"x","type":"session_meta","payload":{"id":"x"}}`)), "codex")
	assert.False(t, Detect([]byte(`{"type":"queue-operation","operation":"enqueue"}`)), "claude")
	assert.False(t, Detect([]byte(`[{"role":"user","content":"hi"}]`)), "openai")
	assert.False(t, Detect([]byte("{\"type\":\"user\"}\n{\"type\":\"session\"}")), "only the first line counts")
	assert.False(t, Detect(nil))
	// Read as JSON: spaces, another key order, a blank first line.
	assert.True(t, Detect([]byte(`{"type": "session", "version": 3, "id": "x", "timestamp": "2026-11-29T09:30:00Z"}`+"\n")))
	assert.True(t, Detect([]byte(`{"version":3,"id":"x","type":"session"}`)))
	assert.True(t, Detect([]byte("\r\n{ \"type\" : \"session\" }\n")))
	assert.False(t, Detect([]byte(`{"id":"x","type":"session_meta"}`)))
	assert.False(t, Detect([]byte(`{"sessio`)), "cut before the type")
}

func TestDirs(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("PI_CODING_AGENT_DIR", "")
	t.Setenv("PI_CODING_AGENT_SESSION_DIR", "")
	assert.Equal(t, []string{filepath.Join(home, ".pi/agent/sessions")}, Dirs())

	agent := filepath.Join(home, "agent")
	require.NoError(t, os.MkdirAll(agent, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(agent, "settings.json"), []byte(`{"sessionDir":"~/from-settings"}`), 0o644))
	t.Setenv("PI_CODING_AGENT_DIR", "~/agent")
	t.Setenv("PI_CODING_AGENT_SESSION_DIR", "/srv/pi-sessions")
	assert.Equal(t, []string{"/srv/pi-sessions", filepath.Join(home, "from-settings"), filepath.Join(agent, "sessions")}, Dirs())
}

func TestOddShapes(t *testing.T) {
	in := "{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"2026-11-29T10:00:00Z\",\"cwd\":\"/x\"}\r\n" +
		// No entry timestamp: the message's unix ms stands in.
		`{"type":"message","id":"u1","parentId":null,"message":{"role":"user","content":[{"type":"text","text":"hi"}],"timestamp":1795944660443}}` + "\r\n" +
		// A repeated header is ignored, as pi does.
		`{"type":"session","version":3,"id":"other","timestamp":"2026-11-29T10:00:00Z","cwd":"/y"}` + "\n" +
		// Arguments as a JSON string, and missing.
		`{"type":"message","id":"a1","parentId":"u1","timestamp":"2026-11-29T10:00:02Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"bash","arguments":"{\"command\":\"ls\"}"},{"type":"toolCall","id":"c2","name":"noop"}],"stopReason":"toolUse"}}` + "\n" +
		`{"type":"message","id":"t1","parentId":"a1","timestamp":"2026-11-29T10:00:03Z","message":{"role":"toolResult","toolCallId":"c1","toolName":"bash","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"isError":true}}` + "\n" +
		`{"type":"message","id":"t2","parentId":"t1","timestamp":"2026-11-29T10:00:04Z","message":{"role":"toolResult","toolCallId":"c2","toolName":"noop","content":[]}}` + "\n" +
		// A parent that comes later in the file is its parent all the same,
		// as in pi (which indexes every entry by id first).
		`{"type":"message","id":"x1","parentId":"zz","timestamp":"2026-11-29T10:00:05Z","message":{"role":"user","content":[{"type":"text","text":"orphan"}]}}` + "\n" +
		`{"type":"label","id":"zz","parentId":"t2","timestamp":"2026-11-29T10:00:06Z","targetId":"u1","label":"x"}` + "\n"
	pf, err := Parse(strings.NewReader(in), "odd.jsonl")
	require.NoError(t, err)
	assert.Empty(t, pf.Skipped)
	require.Len(t, pf.Runs, 2)
	main := pf.Runs[0]
	assert.Equal(t, "/x", main.Run.Cwd)
	require.Equal(t, []string{"u1", "a1", "t1", "t2"}, nativeIDs(main.Messages))
	assert.Equal(t, int64(1795944660443), main.Messages[0].Time.UnixMilli())
	calls := main.Messages[1].ToolCalls()
	assert.Equal(t, `{"command":"ls"}`, calls[0].ToolInput)
	assert.Equal(t, "{}", calls[1].ToolInput)
	res := main.Messages[2].Parts[0]
	assert.Equal(t, "a\nb", res.Text)
	assert.True(t, res.IsError)
	assert.Equal(t, []int{1, 4}, model.Checkpoints(main.Messages))
	early := pf.Runs[1]
	assert.Equal(t, 0, early.Parent)
	assert.Equal(t, 4, early.ForkAt, "under the label, after t2: not a branch with an empty prefix")
	assert.Equal(t, []string{"x1"}, nativeIDs(early.Messages))
	assert.Equal(t, "orphan", early.Run.Title)
}

func TestAbortedCall(t *testing.T) {
	// pi aborted mid tool call (stopReason "aborted"): the call never ran and
	// has no result. The next prompt closes it (rule 1): the cuts after it
	// are checkpoints again.
	pf := parseFile(t, filepath.Join(testdata, "pi/edge/aborted.jsonl"))
	assert.Empty(t, pf.Skipped)
	require.Len(t, pf.Runs, 1)
	msgs := pf.Runs[0].Messages
	assert.Equal(t, []model.Role{model.User, model.Assistant, model.User, model.Assistant}, roles(msgs))
	assert.Equal(t, []int{1, 3, 4}, model.Checkpoints(msgs))
}

func TestUsageOutOfRange(t *testing.T) {
	// A count outside 0..2^53 is corrupt: the message is kept without its
	// usage, and the line is listed with why; nothing overflows.
	src := `{"type":"session","version":3,"id":"s1","timestamp":"2026-11-29T10:00:00.000Z","cwd":"/tmp"}
{"type":"message","id":"u1","parentId":null,"timestamp":"2026-11-29T10:00:01.000Z","message":{"role":"user","content":[{"type":"text","text":"count"}]}}
{"type":"message","id":"a1","parentId":"u1","timestamp":"2026-11-29T10:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"huge"}],"usage":{"input":5,"output":1e30,"cacheRead":0,"cacheWrite":0}}}
{"type":"message","id":"u2","parentId":"a1","timestamp":"2026-11-29T10:00:03.000Z","message":{"role":"user","content":[{"type":"text","text":"again"}]}}
{"type":"message","id":"a2","parentId":"u2","timestamp":"2026-11-29T10:00:04.000Z","message":{"role":"assistant","content":[{"type":"text","text":"negative"}],"usage":{"input":-7,"output":3,"cacheRead":0,"cacheWrite":0}}}
{"type":"message","id":"a3","parentId":"a2","timestamp":"2026-11-29T10:00:05.000Z","message":{"role":"assistant","content":[{"type":"text","text":"fine"}],"usage":{"input":9007199254740992,"output":2,"cacheRead":0,"cacheWrite":0}}}
`
	pf, err := Parse(strings.NewReader(src), "usage.jsonl")
	require.NoError(t, err)
	require.Len(t, pf.Skipped, 2)
	assert.Equal(t, 3, pf.Skipped[0].Line)
	assert.Contains(t, pf.Skipped[0].Reason, "usage.output: 1e+30 is not a token count")
	assert.Equal(t, 5, pf.Skipped[1].Line)
	assert.Contains(t, pf.Skipped[1].Reason, "usage.input: -7")
	msgs := pf.Runs[0].Messages
	require.Len(t, msgs, 5)
	assert.Zero(t, msgs[1].Usage)
	assert.Zero(t, msgs[3].Usage)
	assert.Equal(t, model.Usage{InputTokens: model.MaxTokens, OutputTokens: 2}, pf.Runs[0].Run.Usage)
}

func TestUsageBeyondFloat64(t *testing.T) {
	// A number no float64 holds loses the usage, with why, never the
	// message or the line.
	src := `{"type":"session","version":3,"id":"s1","timestamp":"2026-11-29T10:00:00.000Z","cwd":"/tmp"}
{"type":"message","id":"u1","parentId":null,"timestamp":"2026-11-29T10:00:01.000Z","message":{"role":"user","content":[{"type":"text","text":"count"}]}}
{"type":"message","id":"a1","parentId":"u1","timestamp":"2026-11-29T10:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"huge"}],"usage":{"input":5,"output":1e400,"cacheRead":0,"cacheWrite":0}}}
{"type":"message","id":"u2","parentId":"a1","timestamp":"2026-11-29T10:00:03.000Z","message":{"role":"user","content":[{"type":"text","text":"again"}]}}
{"type":"message","id":"a2","parentId":"u2","timestamp":"2026-11-29T10:00:04.000Z","message":{"role":"assistant","content":[{"type":"text","text":"costly"}],"usage":{"input":1,"output":1,"cost":{"total":-1e999}}}}
{"type":"message","id":"a3","parentId":"a2","timestamp":"2026-11-29T10:00:05.000Z","message":{"role":"assistant","content":[{"type":"text","text":"fine"}],"usage":{"input":2,"output":3,"cost":{"total":0.5}}}}
`
	pf, err := Parse(strings.NewReader(src), "usage.jsonl")
	require.NoError(t, err)
	require.Len(t, pf.Skipped, 2, "%v", pf.Skipped)
	assert.Equal(t, 3, pf.Skipped[0].Line)
	assert.Contains(t, pf.Skipped[0].Reason, "usage.output: +Inf is not a token count")
	assert.Equal(t, 5, pf.Skipped[1].Line)
	assert.Contains(t, pf.Skipped[1].Reason, "usage.cost.total")
	msgs := pf.Runs[0].Messages
	require.Len(t, msgs, 5)
	assert.Equal(t, "huge", msgs[1].PlainText())
	assert.Zero(t, msgs[1].Usage)
	assert.Equal(t, "costly", msgs[3].PlainText())
	assert.Zero(t, msgs[3].Usage)
	assert.Equal(t, model.Usage{InputTokens: 2, OutputTokens: 3}, pf.Runs[0].Run.Usage)
	assert.Equal(t, 0.5, pf.Runs[0].Run.CostUSD)
}

func TestDuplicatesAndOrder(t *testing.T) {
	pf := parseFile(t, filepath.Join(testdata, "pi/edge/order.jsonl"))
	// A line written twice is read once; another entry under a taken id
	// is left out and listed (it would have been a second root: a branch
	// with an empty prefix); an entry whose parent is missing is listed
	// and placed after the entry before it.
	require.Len(t, pf.Skipped, 2)
	assert.Equal(t, 7, pf.Skipped[0].Line)
	assert.Equal(t, "entry u0000001: the id was already used on line 2; left out", pf.Skipped[0].Reason)
	assert.Equal(t, 8, pf.Skipped[1].Line)
	assert.Equal(t, "its parent gone0001 is not in the file; placed after the entry on line 6", pf.Skipped[1].Reason)
	require.Len(t, pf.Runs, 2)
	// a0000002 comes before its parent u0000002 in the file: it still
	// hangs under it.
	main := pf.Runs[0]
	assert.Equal(t, []string{"u0000001", "a0000001", "u0000002", "a0000002", "u0000003"}, nativeIDs(main.Messages))
	assert.Equal(t, model.Usage{InputTokens: 200, OutputTokens: 20}, main.Run.Usage, "the repeated line counted once")
	lost := pf.Runs[1]
	assert.Equal(t, 0, lost.Parent)
	assert.Equal(t, 3, lost.ForkAt)
	assert.Equal(t, []string{"x0000001"}, nativeIDs(lost.Messages))
	for _, r := range pf.Runs[1:] {
		assert.Positive(t, r.ForkAt, "no branch with an empty prefix")
	}
}
