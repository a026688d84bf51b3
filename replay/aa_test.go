package replay

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"tine/model"
)

// TestTheOriginalAnswerOfTheTurnThatWentLive: A/A compares a continuation
// from step N with the original's answer at the end of the turn that step
// N+1 is in: when step N ends its turn, that is the next turn's answer,
// not step N's own.
func TestTheOriginalAnswerOfTheTurnThatWentLive(t *testing.T) {
	t.Parallel()
	say := func(role model.Role, text string) model.Message {
		return model.Message{Role: role, Parts: []model.Part{{Kind: model.Text, Text: text}}}
	}
	call := model.Message{Role: model.Assistant, Parts: []model.Part{{Kind: model.Text, Text: "Working."},
		{Kind: model.ToolCall, ToolCallID: "c1", ToolName: "bash", ToolInput: `{}`}}}
	result := model.Message{Role: model.Tool, Parts: []model.Part{{Kind: model.ToolResult, ToolCallID: "c1", Text: "ok"}}}
	msgs := []model.Message{
		say(model.User, "first"), call, result, say(model.Assistant, "First turn done."), // steps 1, 2
		{Role: model.System, Parts: []model.Part{{Kind: model.Text, Text: "<environment_context>"}}},
		say(model.User, "second"), say(model.Assistant, "Second turn done."), // step 3
	}
	for _, tc := range []struct {
		kN   int
		want string
	}{
		{3, "First turn done."},  // after step 1: step 2 ends turn one
		{4, "Second turn done."}, // after step 2, which ended turn one: step 3 is turn two's
		{7, "Second turn done."}, // after the last step: nothing after it
	} {
		assert.Equal(t, tc.want, lastAnswer(msgs[:liveTurnEnd(msgs, tc.kN)]), "K=%d", tc.kN)
	}
}
