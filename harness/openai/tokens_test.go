package openai

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/model"
)

// A token count outside 0..2^53 drops the usage with a note; the answer is
// kept and the turn does not fail.
func TestHugeUsageIsDroppedNotFatal(t *testing.T) {
	url := sseServer(t, chunk("Hello")+
		`data: {"id":"c1","model":"m","choices":[],"usage":{"prompt_tokens":99999999999999999999999,"completion_tokens":3}}`+"\n\n"+
		"data: [DONE]\n\n")
	h := New(Config{BaseURL: url, Model: "m", StallTimeout: 2 * time.Second})

	ev, err := turn(t, h, harness.TurnRequest{Input: "hi"})
	require.NoError(t, err)
	msgs := ev.messages()
	require.Len(t, msgs, 2)
	assert.Equal(t, "Hello", msgs[1].PlainText())
	assert.Zero(t, msgs[1].Usage)
	var notes []string
	for _, e := range ev.all {
		if e.Kind == harness.EventNote {
			notes = append(notes, e.Note)
		}
	}
	require.Len(t, notes, 1)
	assert.Contains(t, notes[0], "openai: the server's usage was dropped: prompt_tokens: 99999999999999999999999 is not a token count")
}

func TestNegativeUsageInATranscript(t *testing.T) {
	src := `{"role":"user","content":"hi"}
{"role":"assistant","content":"hello","usage":{"prompt_tokens":-4,"completion_tokens":2}}
{"role":"assistant","content":"again","usage":{"prompt_tokens":4,"completion_tokens":2}}
`
	tr, err := Parse([]byte(src), "t.jsonl")
	require.NoError(t, err)
	require.Len(t, tr.Messages, 3, "the message stays")
	assert.Zero(t, tr.Messages[1].Usage)
	assert.Equal(t, model.Usage{InputTokens: 4, OutputTokens: 2}, tr.Messages[2].Usage)
	require.Len(t, tr.Skipped, 1)
	assert.Equal(t, 2, tr.Skipped[0].Line)
	assert.Contains(t, tr.Skipped[0].Reason, "usage dropped: prompt_tokens: -4 is not a token count")
}
