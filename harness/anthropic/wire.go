package anthropic

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"

	"tine/model"
)

// messagesRequest is the body of POST /v1/messages.
type messagesRequest struct {
	Model     string        `json:"model"`
	MaxTokens int           `json:"max_tokens"`
	System    string        `json:"system,omitempty"`
	Messages  []wireMessage `json:"messages"`
	Tools     []wireTool    `json:"tools,omitempty"`
	Stream    bool          `json:"stream"`
}

type wireMessage struct {
	Role    string `json:"role"`
	Content []any  `json:"content"`
}

type textBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type toolUseBlock struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type toolResultBlock struct {
	Type      string `json:"type"`
	ToolUseID string `json:"tool_use_id"`
	Content   string `json:"content,omitempty"`
	IsError   bool   `json:"is_error,omitempty"`
}

type wireTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// buildRequest converts messages to the Messages API shape: system text to
// the system field, tool results into user messages, consecutive messages
// of one role merged (the API wants user and assistant to alternate).
// Thinking is dropped: without the signature tine does not keep, the API
// would refuse it.
func buildRequest(msgs []model.Message) messagesRequest {
	var r messagesRequest
	var system []string
	var tools []string
	for _, m := range msgs {
		var blocks []any
		role := "user"
		if m.Role == model.Assistant {
			role = "assistant"
		}
		for _, p := range m.Parts {
			switch p.Kind {
			case model.Text:
				if strings.TrimSpace(p.Text) == "" {
					continue // the API rejects blank text blocks
				}
				if m.Role == model.System {
					system = append(system, p.Text)
				} else {
					blocks = append(blocks, textBlock{Type: "text", Text: p.Text})
				}
			case model.Image, model.Other:
				if img := imageBlock(p.Raw); img != nil && m.Role == model.User {
					blocks = append(blocks, img)
				}
			case model.ToolCall:
				if m.Role != model.Assistant {
					continue
				}
				name := toolName(p.ToolName)
				if !slices.Contains(tools, name) {
					tools = append(tools, name)
				}
				blocks = append(blocks, toolUseBlock{Type: "tool_use", ID: toolID(p.ToolCallID), Name: name, Input: inputObject(p.ToolInput)})
			case model.ToolResult:
				if m.Role == model.Assistant {
					continue
				}
				blocks = append(blocks, toolResultBlock{Type: "tool_result", ToolUseID: toolID(p.ToolCallID), Content: p.Text, IsError: p.IsError})
			}
		}
		if len(blocks) == 0 {
			continue
		}
		if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == role {
			r.Messages[n-1].Content = append(r.Messages[n-1].Content, blocks...)
		} else {
			r.Messages = append(r.Messages, wireMessage{Role: role, Content: blocks})
		}
	}
	for i := range r.Messages {
		if r.Messages[i].Role == "user" {
			// Results must open the message that follows the calls.
			slices.SortStableFunc(r.Messages[i].Content, func(a, b any) int { return resultRank(a) - resultRank(b) })
		}
	}
	if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == "assistant" {
		// A last assistant message is a prefill, which may not end in
		// whitespace.
		c := r.Messages[n-1].Content
		if t, ok := c[len(c)-1].(textBlock); ok {
			t.Text = strings.TrimRight(t.Text, " \t\r\n")
			c[len(c)-1] = t
		}
	}
	r.System = strings.Join(system, "\n\n")
	// The API refuses tool_use blocks in a request that declares no tools,
	// so the tools the conversation used are declared, with an open schema.
	for _, name := range tools {
		r.Tools = append(r.Tools, wireTool{Name: name, Description: "A tool used earlier in this conversation.", InputSchema: json.RawMessage(`{"type":"object"}`)})
	}
	return r
}

func resultRank(b any) int {
	if _, ok := b.(toolResultBlock); ok {
		return 0
	}
	return 1
}

// inputObject returns a tool input as the JSON object the API requires,
// wrapping anything else (free-form inputs of other agents' tools).
func inputObject(s string) json.RawMessage {
	s = strings.TrimSpace(s)
	if s == "" {
		return json.RawMessage(`{}`)
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(s), &obj) == nil && obj != nil {
		return json.RawMessage(s)
	}
	var v any = s
	if json.Valid([]byte(s)) {
		v = json.RawMessage(s)
	}
	b, _ := json.Marshal(map[string]any{"input": v})
	return b
}

var badNameChars = regexp.MustCompile(`[^a-zA-Z0-9_-]`)

// toolName fits a name from another agent to the API's ^[a-zA-Z0-9_-]{1,64}$.
func toolName(s string) string {
	s = badNameChars.ReplaceAllString(s, "_")
	if s == "" {
		s = "tool"
	}
	if len(s) > 64 {
		s = s[:64]
	}
	return s
}

// toolID fits a call id to the API's ^[a-zA-Z0-9_-]+$.
func toolID(s string) string {
	s = badNameChars.ReplaceAllString(s, "_")
	if s == "" {
		s = "toolu_"
	}
	return s
}

// imageBlock returns raw as an Anthropic image block: as is when it is one,
// converted when it is an OpenAI image_url part, nil otherwise.
func imageBlock(raw string) json.RawMessage {
	if raw == "" {
		return nil
	}
	var p struct {
		Type     string `json:"type"`
		ImageURL struct {
			URL string `json:"url"`
		} `json:"image_url"`
	}
	if json.Unmarshal([]byte(raw), &p) != nil {
		return nil
	}
	switch p.Type {
	case "image":
		return json.RawMessage(raw)
	case "image_url":
	default:
		return nil
	}
	u := p.ImageURL.URL
	var src map[string]string
	if rest, ok := strings.CutPrefix(u, "data:"); ok {
		meta, data, ok := strings.Cut(rest, ",")
		mediaType, isB64 := strings.CutSuffix(meta, ";base64")
		if !ok || !isB64 {
			return nil
		}
		src = map[string]string{"type": "base64", "media_type": mediaType, "data": data}
	} else if strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://") {
		src = map[string]string{"type": "url", "url": u}
	} else {
		return nil
	}
	b, _ := json.Marshal(map[string]any{"type": "image", "source": src})
	return b
}

// notRun answers a tool call nothing answered: the API rejects a call
// without a result, and this harness runs no tools.
const notRun = "not run: this tool call was never executed"
