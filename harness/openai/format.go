// Package openai is the harness for OpenAI-compatible chat servers and owns
// the `openai` transcript format: the Chat Completions message shape, as a
// .json array, a {"messages": [...]} object, or a .jsonl file with one
// message a line.
package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"tine/harness"
	"tine/internal/apihttp"
	"tine/internal/jsonl"
	"tine/model"
)

// chatMessage is one message in the Chat Completions shape.
type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name"`
	ToolCalls  []toolCall      `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
	Reasoning  string          `json:"reasoning_content"`
	Model      string          `json:"model"`
	Usage      *chatUsage      `json:"usage"`
}

type toolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type chatUsage struct {
	PromptTokens     apihttp.Tokens `json:"prompt_tokens"`
	CompletionTokens apihttp.Tokens `json:"completion_tokens"`
}

// Parse reads an openai-format transcript. name labels errors and skips. A
// .jsonl file (or content that is not one JSON value) is read a line at a
// time, skipping and counting lines it cannot read or over 64 MiB
// (jsonl.DefaultMax); a .json file must hold
// an array of messages or an object with "messages".
func Parse(data []byte, name string) (harness.Transcript, error) {
	var t harness.Transcript
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return t, fmt.Errorf("%s: empty file", name)
	}
	var raws []json.RawMessage
	switch {
	case trimmed[0] == '[':
		if err := json.Unmarshal(trimmed, &raws); err != nil {
			return t, fmt.Errorf("%s: not a JSON array of messages: %v", name, err)
		}
	case trimmed[0] == '{' && !strings.HasSuffix(name, ".jsonl") && json.Valid(trimmed):
		var doc struct {
			Messages []json.RawMessage `json:"messages"`
			Model    string            `json:"model"`
			Title    string            `json:"title"`
		}
		if err := json.Unmarshal(trimmed, &doc); err != nil {
			return t, fmt.Errorf("%s: %v", name, err)
		}
		if doc.Messages == nil {
			// One message alone is a one-line jsonl file.
			raws = []json.RawMessage{trimmed}
		} else {
			raws = doc.Messages
			t.Run.Model, t.Run.Title = doc.Model, model.OneLine(doc.Title, 120)
		}
	default:
		return parseLines(data, name)
	}
	for i, raw := range raws {
		m, warn, err := convert(raw)
		if err != nil {
			t.Skipped = append(t.Skipped, harness.Skip{File: name, Line: i + 1, Reason: "message " + fmt.Sprint(i+1) + ": " + err.Error()})
			continue
		}
		if warn != "" {
			t.Skipped = append(t.Skipped, harness.Skip{File: name, Line: i + 1, Reason: "message " + fmt.Sprint(i+1) + ": " + warn})
		}
		t.Messages = append(t.Messages, m)
	}
	finish(&t, name)
	return t, nil
}

func parseLines(data []byte, name string) (harness.Transcript, error) {
	var t harness.Transcript
	// The file is whole: its last line counts without a newline too.
	lr := jsonl.NewReader(bytes.NewReader(data), jsonl.DefaultMax)
	defer lr.Close()
	for lr.Next() {
		l := lr.Line()
		line := l.Number
		if l.TooLong {
			t.Skipped = append(t.Skipped, harness.Skip{File: name, Line: line, Reason: lr.TooLongReason()})
			continue
		}
		b := bytes.TrimSpace(l.Text)
		if len(b) == 0 {
			continue
		}
		m, warn, err := convert(b)
		if err != nil {
			t.Skipped = append(t.Skipped, harness.Skip{File: name, Line: line, Reason: err.Error()})
			continue
		}
		if warn != "" {
			t.Skipped = append(t.Skipped, harness.Skip{File: name, Line: line, Reason: warn})
		}
		t.Messages = append(t.Messages, m)
	}
	if len(t.Messages) == 0 {
		return t, fmt.Errorf("%s: no messages (%d lines skipped)", name, len(t.Skipped))
	}
	finish(&t, name)
	return t, nil
}

func finish(t *harness.Transcript, name string) {
	t.Run.Harness = "openai"
	if t.Run.Title == "" {
		t.Run.Title = model.TitleOf(t.Messages)
	}
	if t.Run.Title == "" {
		t.Run.Title = filepath.Base(name)
	}
	for _, m := range t.Messages {
		if m.Model != "" && t.Run.Model == "" {
			t.Run.Model = m.Model
		}
	}
	// Name tool results after the call they answer.
	names := map[string]string{}
	for i := range t.Messages {
		for j, p := range t.Messages[i].Parts {
			switch p.Kind {
			case model.ToolCall:
				names[p.ToolCallID] = p.ToolName
			case model.ToolResult:
				if p.ToolName == "" {
					t.Messages[i].Parts[j].ToolName = names[p.ToolCallID]
				}
			}
		}
	}
}

// convert turns one Chat Completions message into a model.Message. warn
// says what was left out of a message that is still kept (a usage whose
// counts are corrupt).
func convert(raw []byte) (m model.Message, warn string, err error) {
	m, err = convertMessage(raw, &warn)
	return m, warn, err
}

// noRole says why raw, a JSON object without a role, is no chat message,
// naming the keys it has: a record of an agent's own transcript (its
// message inside, under "message") is not "a message without a role".
func noRole(raw []byte) error {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || len(obj) == 0 {
		return errors.New(`not a chat message: no "role"`)
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) > 8 {
		keys = append(keys[:8], "...")
	}
	what := ""
	if _, inner := obj["message"]; inner {
		what = ", a record holding a message, as an agent's transcript has them"
	}
	return fmt.Errorf(`not a chat message: no "role" at its top%s (its keys: %s)`, what, model.OneLine(strings.Join(keys, ", "), 200))
}

func convertMessage(raw []byte, warn *string) (model.Message, error) {
	var cm chatMessage
	if err := json.Unmarshal(raw, &cm); err != nil {
		return model.Message{}, fmt.Errorf("not a JSON message: %s", shortErr(err))
	}
	m := model.Message{Model: cm.Model}
	switch cm.Role {
	case "system", "developer":
		m.Role = model.System
	case "user":
		m.Role = model.User
	case "assistant":
		m.Role = model.Assistant
	case "tool", "function":
		m.Role = model.Tool
	case "":
		return m, noRole(raw)
	default:
		return m, fmt.Errorf("unknown role %q", cm.Role)
	}
	if u := cm.Usage; u != nil {
		if bad := apihttp.FirstBad(map[string]apihttp.Tokens{"prompt_tokens": u.PromptTokens, "completion_tokens": u.CompletionTokens}); bad != "" {
			*warn = "usage dropped: " + bad
		} else {
			m.Usage = model.Usage{InputTokens: u.PromptTokens.N, OutputTokens: u.CompletionTokens.N}
		}
	}
	if cm.Reasoning != "" {
		m.Parts = append(m.Parts, model.Part{Kind: model.Thinking, Text: cm.Reasoning})
	}
	content, err := contentParts(cm.Content)
	if err != nil {
		return m, err
	}
	if m.Role == model.Tool {
		if cm.ToolCallID == "" {
			return m, fmt.Errorf("tool message has no tool_call_id")
		}
		var out strings.Builder
		for _, p := range content {
			out.WriteString(p.Text)
		}
		m.Parts = append(m.Parts, model.Part{Kind: model.ToolResult, ToolCallID: cm.ToolCallID, ToolName: cm.Name, Text: out.String()})
		return m, nil
	}
	m.Parts = append(m.Parts, content...)
	for i, tc := range cm.ToolCalls {
		args := string(tc.Function.Arguments)
		// arguments is a JSON string holding JSON; keep the inner JSON.
		var s string
		if json.Unmarshal(tc.Function.Arguments, &s) == nil {
			args = s
		}
		id := tc.ID
		if id == "" {
			id = fmt.Sprintf("call_%d", i)
		}
		m.Parts = append(m.Parts, model.Part{Kind: model.ToolCall, ToolCallID: id, ToolName: tc.Function.Name, ToolInput: args})
	}
	return m, nil
}

// contentParts reads content given as a string, null, or an array of parts.
func contentParts(raw json.RawMessage) ([]model.Part, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("bad content: %s", shortErr(err))
		}
		if s == "" {
			return nil, nil
		}
		return []model.Part{{Kind: model.Text, Text: s}}, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("content is neither text nor a list of parts")
	}
	var parts []model.Part
	for _, it := range items {
		var p struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(it, &p); err != nil {
			return nil, fmt.Errorf("bad content part: %s", shortErr(err))
		}
		switch p.Type {
		case "text", "input_text", "output_text":
			parts = append(parts, model.Part{Kind: model.Text, Text: p.Text})
		case "image_url", "input_image", "image":
			parts = append(parts, model.Part{Kind: model.Image, Raw: string(it)})
		default:
			parts = append(parts, model.Part{Kind: model.Other, Raw: string(it)})
		}
	}
	return parts, nil
}

func shortErr(err error) string {
	s := err.Error()
	if len(s) > 80 {
		s = s[:80]
	}
	return s
}
