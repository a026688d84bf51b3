package fork

import (
	"fmt"
	"strings"

	"tine/model"
)

// handoffOutputMax bounds each tool output copied into a handoff: the new
// session needs what happened, not megabytes of build logs.
const handoffOutputMax = 4000

// HandoffPrompt is the first message of a handoff (rule 8 in
// ARCHITECTURE.md): the prefix as a readable transcript, then the person's
// new message. The agent that receives it starts a new session; nothing
// pretends it made the earlier turns.
func HandoffPrompt(prefix []model.Message, input string) string {
	var b strings.Builder
	b.WriteString("This conversation is handed over to you from another session. ")
	b.WriteString("Here is its transcript so far; the tool calls in it were already run, ")
	b.WriteString("and their effects are in the working directory.\n\n<transcript>\n")
	for _, m := range prefix {
		for _, p := range m.Parts {
			switch p.Kind {
			case model.Text:
				fmt.Fprintf(&b, "[%s] %s\n", m.Role, strings.TrimSpace(p.Text))
			case model.ToolCall:
				fmt.Fprintf(&b, "[%s called %s] %s\n", m.Role, p.ToolName, p.ToolInput)
			case model.ToolResult:
				out := strings.TrimSpace(p.Text)
				if len(out) > handoffOutputMax {
					out = out[:handoffOutputMax] + fmt.Sprintf("\n… (%d more bytes)", len(out)-handoffOutputMax)
				}
				label := "result"
				if p.IsError {
					label = "error"
				}
				fmt.Fprintf(&b, "[tool %s%s] %s\n", label, nameSuffix(p.ToolName), out)
			}
		}
	}
	b.WriteString("</transcript>\n\n")
	if input == "" {
		b.WriteString("Continue from where the transcript ends.")
	} else {
		b.WriteString(input)
	}
	return b.String()
}

func nameSuffix(name string) string {
	if name == "" {
		return ""
	}
	return " of " + name
}
