package anthropic

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
)

// A token count outside 0..2^53 drops the usage with a note; the answer is
// kept and the turn does not fail.
func TestHugeUsageIsDroppedNotFatal(t *testing.T) {
	body := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"m\",\"usage\":{\"input_tokens\":3}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":1e300}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	h := New(Config{BaseURL: sseServer(t, body), APIKey: "k", Model: "m", StallTimeout: 2 * time.Second})
	var all []harness.Event
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := h.Turn(ctx, harness.TurnRequest{Input: "hi"}, func(e harness.Event) { all = append(all, e) })
	require.NoError(t, err)
	var notes []string
	var last harness.Event
	for _, e := range all {
		switch e.Kind {
		case harness.EventNote:
			notes = append(notes, e.Note)
		case harness.EventMessage:
			last = e
		}
	}
	assert.Equal(t, "Hello", last.Message.PlainText())
	assert.Zero(t, last.Message.Usage, "no part of a corrupt usage is kept")
	require.Len(t, notes, 1)
	assert.Contains(t, notes[0], "anthropic: the server's usage was dropped: output_tokens: 1e300 is not a token count")
}
