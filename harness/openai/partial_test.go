package openai

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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

// sseServer serves one fixed SSE body, for streams the model server does
// not script.
func sseServer(t *testing.T, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func chunk(content string) string {
	return `data: {"id":"c1","model":"m","choices":[{"delta":{"content":"` + content + `"}}]}` + "\n\n"
}

func TestMalformedMidStreamKeepsText(t *testing.T) {
	url := sseServer(t, chunk("Hello, ")+chunk("wor")+
		`data: {"id":"c1","choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"bash","arguments":"{\"comm"}}]}}]}`+"\n\n"+
		"data: {not json\n\n")
	h := New(Config{BaseURL: url, Model: "m", StallTimeout: 2 * time.Second})

	ev, err := turn(t, h, harness.TurnRequest{Input: "hi"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "malformed stream")
	assert.Contains(t, err.Error(), "the 10 characters streamed before that are kept as a partial answer")
	assertPartialKept(t, ev)
	assert.Equal(t, "Hello, wor", ev.messages()[1].PlainText())
	assert.Equal(t, "m", ev.messages()[1].Model)
}

func TestErrorChunkMidStreamKeepsText(t *testing.T) {
	url := sseServer(t, chunk("Half an ans")+`data: {"error":{"message":"upstream died","type":"server_error"}}`+"\n\n")
	h := New(Config{BaseURL: url, Model: "m", StallTimeout: 2 * time.Second})

	ev, err := turn(t, h, harness.TurnRequest{Input: "hi"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "upstream died")
	assertPartialKept(t, ev)
}

func TestFailureBeforeTextKeepsNothing(t *testing.T) {
	url := sseServer(t, `data: {"id":"c1","choices":[{"delta":{"reasoning_content":"hmm"}}]}`+"\n\n"+"data: {not json\n\n")
	h := New(Config{BaseURL: url, Model: "m", StallTimeout: 2 * time.Second})

	ev, err := turn(t, h, harness.TurnRequest{Input: "hi"})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "partial")
	assert.Len(t, ev.messages(), 1, "only the user message: no text had been shown")
}
