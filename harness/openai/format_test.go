package openai

import (
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/internal/jsonl/jsonltest"
	"tine/model"
)

func TestParseSeedExample(t *testing.T) {
	data, err := os.ReadFile("../../testdata/openai/seed-example.json")
	require.NoError(t, err)
	tr, err := Parse(data, "seed-example.json")
	require.NoError(t, err)
	require.Len(t, tr.Messages, 6)
	assert.Empty(t, tr.Skipped)
	assert.Equal(t, "What is the weather in Paris, Rome and Oslo?", tr.Run.Title)
	calls := tr.Messages[1].ToolCalls()
	require.Len(t, calls, 3)
	assert.Equal(t, "get_weather", calls[0].ToolName)
	assert.JSONEq(t, `{"city": "Paris"}`, calls[0].ToolInput)
	assert.Equal(t, model.ToolResult, tr.Messages[2].Parts[0].Kind)
	assert.Equal(t, "get_weather", tr.Messages[2].Parts[0].ToolName, "results are named after their call")
	assert.Equal(t, []int{1, 5, 6}, model.Checkpoints(tr.Messages))
}

func TestParseJSONLSkipsBadLines(t *testing.T) {
	data, err := os.ReadFile("../../testdata/openai/chat.jsonl")
	require.NoError(t, err)
	tr, err := Parse(data, "chat.jsonl")
	require.NoError(t, err)
	require.Len(t, tr.Messages, 5)
	require.Len(t, tr.Skipped, 2)
	assert.Equal(t, 4, tr.Skipped[0].Line)
	assert.Contains(t, tr.Skipped[0].Reason, "not a JSON message")
	assert.Equal(t, 5, tr.Skipped[1].Line)
	assert.Contains(t, tr.Skipped[1].Reason, `unknown role "wizard"`)
	assert.Equal(t, model.Image, tr.Messages[1].Parts[1].Kind)
	assert.Equal(t, "gpt-x", tr.Run.Model)
	assert.Equal(t, int64(45), model.OwnUsage(tr.Messages, 0).InputTokens)
}

// TestParseJSONLSkipsALineOverTheCap: a line over 64 MiB is listed as
// skipped, naming its size, and the lines after it are read, the last one
// without its newline too.
func TestParseJSONLSkipsALineOverTheCap(t *testing.T) {
	t.Parallel()
	const huge = 65 << 20
	before, after := `{"role":"user","content":"first"}`+"\n", "\n"+`{"role":"assistant","content":"still here"}`
	var data bytes.Buffer
	data.Grow(len(before) + huge + len(after))
	_, err := data.ReadFrom(jsonltest.Around(before, huge, after))
	require.NoError(t, err)
	tr, err := Parse(data.Bytes(), "huge.jsonl")
	require.NoError(t, err)
	assert.Equal(t, []harness.Skip{{File: "huge.jsonl", Line: 2, Reason: "line is 65.0 MiB, over the 64 MiB cap: skipped"}}, tr.Skipped)
	require.Len(t, tr.Messages, 2)
	assert.Equal(t, "still here", tr.Messages[1].PlainText())
}

func TestParseShapes(t *testing.T) {
	tr, err := Parse([]byte(`{"title": "T", "messages": [{"role":"user","content":"hi"}]}`), "x.json")
	require.NoError(t, err)
	assert.Equal(t, "T", tr.Run.Title)
	require.Len(t, tr.Messages, 1)

	tr, err = Parse([]byte(`{"role":"user","content":"one line"}`), "x.jsonl")
	require.NoError(t, err)
	require.Len(t, tr.Messages, 1)

	_, err = Parse([]byte("  \n"), "empty.json")
	assert.ErrorContains(t, err, "empty file")
	_, err = Parse([]byte(`[{"role":"user"`), "broken.json")
	assert.ErrorContains(t, err, "not a JSON array")
	_, err = Parse([]byte("garbage\nmore garbage\n"), "junk.jsonl")
	assert.ErrorContains(t, err, "no messages (2 lines skipped)")

	tr, err = Parse([]byte(`[{"role":"tool","content":"x"},{"role":"user","content":"ok"}]`), "x.json")
	require.NoError(t, err)
	assert.Len(t, tr.Messages, 1)
	assert.Contains(t, tr.Skipped[0].Reason, "no tool_call_id")
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"seed-example.json", "chat.jsonl"} {
		data, err := os.ReadFile("../../testdata/openai/" + name)
		require.NoError(f, err)
		f.Add(data, name)
	}
	f.Add([]byte(`{"messages":[{"role":"assistant","tool_calls":[{"function":{"arguments":1}}]}]}`), "x.json")
	f.Fuzz(func(t *testing.T, data []byte, name string) {
		tr, err := Parse(data, name)
		if err != nil {
			return
		}
		for _, m := range tr.Messages {
			assert.NotEmpty(t, m.Role)
		}
		model.Checkpoints(tr.Messages)
	})
}

// TestALineWithoutARoleSaysWhatItIs: a line that is no chat message (an
// agent's record, its message inside) is skipped saying so, not as a
// message without a role.
func TestALineWithoutARoleSaysWhatItIs(t *testing.T) {
	t.Parallel()
	data := []byte(`{"type":"user","uuid":"u1","message":{"role":"user","content":"hi"}}` + "\n" + `{"role":"user","content":"hello"}` + "\n")
	tr, err := Parse(data, "export.jsonl")
	require.NoError(t, err)
	require.Len(t, tr.Skipped, 1)
	assert.Equal(t, `not a chat message: no "role" at its top, a record holding a message, as an agent's transcript has them (its keys: message, type, uuid)`, tr.Skipped[0].Reason)
	assert.Len(t, tr.Messages, 1)
}
