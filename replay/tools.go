package replay

import (
	"encoding/json"
	"strings"
)

// localTools are the tools of each agent that act only on the working
// directory and the processes they start there: a replay lets the agent
// run them again for real (rule 9 in ARCHITECTURE.md). A shell can still
// reach the network; what that prints shows up as a network divergence.
var localTools = map[Wire]map[string]bool{
	// Claude Code 2.1.328 (also behind ACP), and pi on its built-in
	// anthropic provider.
	WireAnthropic: set(append([]string{"Bash", "BashOutput", "KillShell", "Read", "Write", "Edit", "MultiEdit", "NotebookEdit",
		"Glob", "Grep", "LS", "TodoWrite", "ExitPlanMode"}, piTools...)...),
	// Codex 0.169.0, and pi on its built-in openai provider.
	WireResponses: set(append([]string{"exec_command", "write_stdin", "shell", "shell_command", "local_shell", "apply_patch",
		"update_plan", "view_image"}, piTools...)...),
	// pi 0.73.1 (and the openai harness, which runs no tools).
	WireChat: set(piTools...),
}

// piTools are pi 0.73.1's tools, whichever wire its provider speaks.
var piTools = []string{"bash", "read", "write", "edit", "ls", "grep", "find"}

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// LocalTool reports whether name is one of wire's agent's own tools that
// act only inside the working directory. Web fetch and search, MCP tools
// (mcp__…), subagents (their model calls would interleave with the run's)
// and anything unknown are not.
func LocalTool(wire Wire, name string) bool {
	return localTools[wire][name]
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
