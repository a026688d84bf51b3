package fork

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"tine/model"
)

func TestHandoffPromptCarriesTheTranscript(t *testing.T) {
	t.Parallel()
	prefix := []model.Message{
		{Role: model.User, Parts: []model.Part{{Kind: model.Text, Text: "list the files"}}},
		{Role: model.Assistant, Parts: []model.Part{{Kind: model.Thinking, Text: "secret"}, {Kind: model.ToolCall, ToolCallID: "1", ToolName: "Bash", ToolInput: `{"command":"ls"}`}}},
		{Role: model.Tool, Parts: []model.Part{{Kind: model.ToolResult, ToolCallID: "1", ToolName: "Bash", Text: strings.Repeat("x", 5000)}}},
		{Role: model.Assistant, Parts: []model.Part{{Kind: model.Text, Text: "There is one file."}}},
	}
	got := HandoffPrompt(prefix, "now delete it")
	assert.Contains(t, got, "[user] list the files\n")
	assert.Contains(t, got, `[assistant called Bash] {"command":"ls"}`)
	assert.Contains(t, got, "[tool result of Bash] xxx")
	assert.Contains(t, got, "(1000 more bytes)")
	assert.Contains(t, got, "[assistant] There is one file.")
	assert.NotContains(t, got, "secret", "thinking stays with the agent that had it")
	assert.True(t, strings.HasSuffix(got, "</transcript>\n\nnow delete it"))
	assert.True(t, strings.HasSuffix(HandoffPrompt(prefix, ""), "Continue from where the transcript ends."))
}
