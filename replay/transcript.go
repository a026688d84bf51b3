package replay

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"tine/model"
)

// A tape made from an imported transcript has no requests: only what the
// agent wrote down, each model answer and the tool outputs that answered
// its calls. A replay of it serves the answers and checks, at each request,
// the tool outputs the request carries against the transcript's (kind tool
// or network); it cannot check the rest of the request (no model kind) nor
// the working tree (no tree kind). Built for Claude Code transcripts.

// TranscriptTape makes a tape without requests from a run's messages:
// step i answers with its i-th assistant message from k0 on, in wire's
// non-streaming shape, and lists the outputs of that message's tool calls.
func TranscriptTape(wire Wire, msgs []model.Message, k0 int) (Tape, error) {
	if wire != WireAnthropic {
		return nil, fmt.Errorf("tapes from %s transcripts are not built yet (Claude Code's are)", wire)
	}
	results := map[string]string{}
	for _, m := range msgs[k0:] {
		for _, p := range m.Parts {
			if p.Kind == model.ToolResult && p.ToolCallID != "" {
				results[p.ToolCallID] = p.Text
			}
		}
	}
	var tape Tape
	for _, m := range msgs[k0:] {
		if m.Role != model.Assistant {
			continue
		}
		answer, outputs, err := anthropicAnswer(m, len(tape)+1, results)
		if err != nil {
			return nil, err
		}
		tape = append(tape, Step{N: len(tape) + 1, Wire: wire, Method: "POST", Path: "/v1/messages", Status: 200,
			ContentType: "application/json", Answer: answer, Source: FromTape, ToolOutputs: outputs})
	}
	return tape, nil
}

// anthropicAnswer is m as an Anthropic Messages response. Thinking is left
// out: its signature is not in the transcript, and Claude Code sends it
// back as it got it.
func anthropicAnswer(m model.Message, n int, results map[string]string) (json.RawMessage, map[string]string, error) {
	content := []map[string]any{}
	outputs := map[string]string{}
	stop := "end_turn"
	for _, p := range m.Parts {
		switch p.Kind {
		case model.Text:
			content = append(content, map[string]any{"type": "text", "text": p.Text})
		case model.ToolCall:
			input := json.RawMessage(p.ToolInput)
			if !json.Valid(input) {
				input = json.RawMessage(`{}`)
			}
			content = append(content, map[string]any{"type": "tool_use", "id": p.ToolCallID, "name": p.ToolName, "input": input})
			outputs[p.ToolCallID] = results[p.ToolCallID]
			stop = "tool_use"
		}
	}
	mdl := m.Model
	if mdl == "" {
		mdl = "claude"
	}
	b, err := json.Marshal(map[string]any{"id": fmt.Sprintf("msg_tine_transcript_%d", n), "type": "message", "role": "assistant",
		"model": mdl, "content": content, "stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": m.Usage.InputTokens, "output_tokens": m.Usage.OutputTokens}})
	return b, outputs, err
}

// compareOutputs checks the tool outputs a request carries against the
// ones the transcript recorded for the calls they answer; cwds are
// replaced by "<cwd>" in both first.
func compareOutputs(wire Wire, taped map[string]string, body []byte, cwds []string) *Mismatch {
	if wire != WireAnthropic || len(taped) == 0 {
		return nil
	}
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil || len(req.Messages) == 0 {
		return &Mismatch{Kind: KindModel, Path: "(request)", Note: "the request is not an Anthropic Messages request"}
	}
	cwds = slices.Clone(cwds)
	slices.SortFunc(cwds, func(a, b string) int { return len(b) - len(a) })
	norm := func(s string) string {
		for _, c := range cwds {
			if c != "" {
				s = strings.ReplaceAll(s, c, "<cwd>")
			}
		}
		return strings.TrimRight(s, "\n")
	}
	i := len(req.Messages) - 1
	var blocks []struct {
		Type      string          `json:"type"`
		ToolUseID string          `json:"tool_use_id"`
		Content   json.RawMessage `json:"content"`
	}
	_ = json.Unmarshal(req.Messages[i].Content, &blocks)
	seen := 0
	for j, b := range blocks {
		if b.Type != "tool_result" {
			continue
		}
		want, ok := taped[b.ToolUseID]
		if !ok {
			continue
		}
		seen++
		got := resultText(b.Content)
		if norm(got) == norm(want) {
			continue
		}
		kind := KindTool
		if networkError.MatchString(got) && !networkError.MatchString(want) {
			kind = KindNetwork
		}
		path := fmt.Sprintf("messages[%d].content[%d].content", i, j)
		return &Mismatch{Kind: kind, Path: path, Fields: []string{path}, Taped: norm(want), Actual: norm(got),
			Diff: unifiedDiff(norm(want), norm(got))}
	}
	if seen < len(taped) {
		return &Mismatch{Kind: KindModel, Path: "(tool results)",
			Note: fmt.Sprintf("the request answers %d of the %d tool calls the transcript's step made", seen, len(taped))}
	}
	return nil
}

// resultText is a tool_result's content: a string, or its text blocks.
func resultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type, Text string
	}
	_ = json.Unmarshal(raw, &blocks)
	var texts []string
	for _, b := range blocks {
		if b.Type == "text" {
			texts = append(texts, b.Text)
		}
	}
	return strings.Join(texts, "\n")
}
