package replay

import (
	"encoding/json"
	"strings"
)

// LocalTool reports whether name is one of the tools that wire's agents
// say act only inside the working directory (and the processes they
// start there): a replay lets the agent run them again for real (rule 9
// in ARCHITECTURE.md). Web fetch and search, MCP tools (mcp__…), subagents
// (their model calls would interleave with the run's) and anything
// unknown are not. A shell can still reach the network; what that prints
// shows up as a network divergence.
func (r *Rules) LocalTool(wire Wire, name string) bool {
	return r.local[wire][name]
}

// ToolNames lists the tools an answer (in its wire format's non-streaming
// shape) calls, in order.
func ToolNames(wire Wire, answer json.RawMessage) []string {
	if len(answer) == 0 {
		return nil
	}
	var names []string
	switch wire {
	case WireAnthropic:
		var a struct {
			Content []struct {
				Type, Name string
			} `json:"content"`
		}
		if json.Unmarshal(answer, &a) == nil {
			for _, c := range a.Content {
				if c.Type == "tool_use" || c.Type == "server_tool_use" || strings.HasSuffix(c.Type, "_tool_use") {
					names = append(names, c.Name)
				}
			}
		}
	case WireResponses:
		var a struct {
			Output []struct {
				Type, Name string
			} `json:"output"`
		}
		if json.Unmarshal(answer, &a) == nil {
			for _, o := range a.Output {
				switch {
				case o.Type == "function_call" || o.Type == "custom_tool_call":
					names = append(names, o.Name)
				case o.Type == "local_shell_call":
					names = append(names, "local_shell")
				case strings.HasSuffix(o.Type, "_call") && o.Type != "message" && o.Type != "reasoning":
					names = append(names, strings.TrimSuffix(o.Type, "_call")) // web_search_call, mcp_call
				}
			}
		}
	case WireGemini:
		names = geminiToolNames(answer)
	case WireChat:
		var a struct {
			Choices []struct {
				Message struct {
					ToolCalls []struct {
						Function struct{ Name string } `json:"function"`
					} `json:"tool_calls"`
				} `json:"message"`
			} `json:"choices"`
		}
		if json.Unmarshal(answer, &a) == nil {
			for _, c := range a.Choices {
				for _, tc := range c.Message.ToolCalls {
					names = append(names, tc.Function.Name)
				}
			}
		}
	}
	return names
}
