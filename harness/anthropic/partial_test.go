package anthropic

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/model"
)

// assertPartialKept checks what a turn that failed mid-stream leaves: the
// user message, then the assistant message holding exactly the text that
// streamed, and a note saying it is partial.
func assertPartialKept(t *testing.T, ev *events) {
	t.Helper()
	msgs := ev.messages()
	require.Len(t, msgs, 2, "the user message and the partial answer")
	m := msgs[1]
	assert.Equal(t, model.Assistant, m.Role)
	assert.Equal(t, strings.Join(ev.deltas(), ""), m.PlainText(), "the partial answer is what streamed")
	assert.Empty(t, m.ToolCalls(), "a cut tool call is not kept")
	var notes []string
	for _, e := range ev.all {
		if e.Kind == harness.EventNote {
			notes = append(notes, e.Note)
		}
	}
	require.Len(t, notes, 1)
	assert.Contains(t, notes[0], "partial")
}

const (
	evStart = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"claude-x\",\"usage\":{\"input_tokens\":3}}}\n\n"
	evText  = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello, \"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"wor\"}}\n\n"
	evTool = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"bash\",\"input\":{}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"comm\"}}\n\n"
)

func TestMalformedMidStreamKeepsText(t *testing.T) {
	url := sseServer(t, evStart+evText+evTool+"event: content_block_delta\ndata: {not json\n\n")
	h, _ := testHarness(url, nil)

	ev, err := turn(t, h, harness.TurnRequest{Input: "hi"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "malformed stream")
	assert.Contains(t, err.Error(), "the 10 characters streamed before that are kept as a partial answer")
	assertPartialKept(t, ev)
	m := ev.messages()[1]
	assert.Equal(t, "Hello, wor", m.PlainText())
	assert.Equal(t, "claude-x", m.Model)
	assert.Equal(t, "msg_1", m.NativeID)
	assert.Equal(t, int64(3), m.Usage.InputTokens, "the input it was charged for is counted")
}

func TestErrorEventMidStreamKeepsText(t *testing.T) {
	url := sseServer(t, evStart+evText+"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n")
	h, _ := testHarness(url, nil)

	ev, err := turn(t, h, harness.TurnRequest{Input: "hi"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "reported overloaded_error mid-stream")
	assertPartialKept(t, ev)
}

func TestFailureBeforeTextKeepsNothing(t *testing.T) {
	url := sseServer(t, evStart+"event: content_block_delta\ndata: {not json\n\n")
	h, _ := testHarness(url, nil)

	ev, err := turn(t, h, harness.TurnRequest{Input: "hi"})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "partial")
	assert.Len(t, ev.messages(), 1, "only the user message: no text had been shown")
}
