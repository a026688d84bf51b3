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
	answer, path := answerer(wire)
	if answer == nil {
		return nil, fmt.Errorf("tapes from %s transcripts are not built (those of agents speaking Anthropic Messages, OpenAI Responses, Chat Completions or the Gemini API are)", orWire(wire))
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
		answer, outputs, err := answer(m, len(tape)+1, results)
		if err != nil {
			return nil, err
		}
		tape = append(tape, Step{N: len(tape) + 1, Wire: wire, Method: "POST", Path: path, Status: 200,
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

// answerBuilder turns an assistant message into an answer in a wire
// format's non-streaming shape, with the outputs its calls got.
type answerBuilder func(m model.Message, n int, results map[string]string) (json.RawMessage, map[string]string, error)

// answerer is wire's answerBuilder and the path its calls go to; nil for
// a wire format it does not know.
func answerer(wire Wire) (answerBuilder, string) {
	switch wire {
	case WireAnthropic:
		return anthropicAnswer, "/v1/messages"
	case WireResponses:
		return responsesAnswer, "/v1/responses"
	case WireChat:
		return chatAnswer, "/v1/chat/completions"
	case WireGemini:
		return geminiAnswer, "/v1beta/models/gemini:generateContent"
	}
	return nil, ""
}

func orWire(w Wire) string {
	if w == "" {
		return "this agent's"
	}
	return string(w)
}

// responsesAnswer is m as an OpenAI Responses answer (Codex). Reasoning is
// left out: Codex's is encrypted in its rollout. A call whose input is a
// JSON string was a freeform (custom) tool call, such as apply_patch.
func responsesAnswer(m model.Message, n int, results map[string]string) (json.RawMessage, map[string]string, error) {
	output := []map[string]any{}
	outputs := map[string]string{}
	for i, p := range m.Parts {
		switch p.Kind {
		case model.Text:
			output = append(output, map[string]any{"type": "message", "id": fmt.Sprintf("msg_tine_%d_%d", n, i), "role": "assistant",
				"status": "completed", "content": []map[string]any{{"type": "output_text", "text": p.Text, "annotations": []any{}}}})
		case model.ToolCall:
			var freeform string
			if json.Unmarshal([]byte(p.ToolInput), &freeform) == nil {
				output = append(output, map[string]any{"type": "custom_tool_call", "id": fmt.Sprintf("ctc_tine_%d_%d", n, i),
					"status": "completed", "call_id": p.ToolCallID, "name": p.ToolName, "input": freeform})
			} else {
				output = append(output, map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_tine_%d_%d", n, i),
					"status": "completed", "call_id": p.ToolCallID, "name": p.ToolName, "arguments": p.ToolInput})
			}
			outputs[p.ToolCallID] = results[p.ToolCallID]
		}
	}
	mdl := m.Model
	if mdl == "" {
		mdl = "gpt"
	}
	u := m.Usage
	b, err := json.Marshal(map[string]any{"id": fmt.Sprintf("resp_tine_transcript_%d", n), "object": "response", "created_at": 0,
		"status": "completed", "model": mdl, "output": output,
		"usage": map[string]any{"input_tokens": u.InputTokens + u.CacheReadTokens, "output_tokens": u.OutputTokens,
			"total_tokens":         u.InputTokens + u.CacheReadTokens + u.OutputTokens,
			"input_tokens_details": map[string]any{"cached_tokens": u.CacheReadTokens}, "output_tokens_details": map[string]any{"reasoning_tokens": 0}}})
	return b, outputs, err
}

// chatAnswer is m as a Chat Completions answer (pi).
func chatAnswer(m model.Message, n int, results map[string]string) (json.RawMessage, map[string]string, error) {
	var texts []string
	calls := []map[string]any{}
	outputs := map[string]string{}
	for _, p := range m.Parts {
		switch p.Kind {
		case model.Text:
			texts = append(texts, p.Text)
		case model.ToolCall:
			calls = append(calls, map[string]any{"id": p.ToolCallID, "type": "function",
				"function": map[string]any{"name": p.ToolName, "arguments": p.ToolInput}})
			outputs[p.ToolCallID] = results[p.ToolCallID]
		}
	}
	msg := map[string]any{"role": "assistant", "content": nil}
	if len(texts) > 0 {
		msg["content"] = strings.Join(texts, "\n")
	}
	finish := "stop"
	if len(calls) > 0 {
		msg["tool_calls"], finish = calls, "tool_calls"
	}
	mdl := m.Model
	if mdl == "" {
		mdl = "model"
	}
	u := m.Usage
	b, err := json.Marshal(map[string]any{"id": fmt.Sprintf("chatcmpl-tine-transcript-%d", n), "object": "chat.completion",
		"created": 0, "model": mdl, "choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage": map[string]any{"prompt_tokens": u.InputTokens + u.CacheReadTokens, "completion_tokens": u.OutputTokens,
			"total_tokens": u.InputTokens + u.CacheReadTokens + u.OutputTokens}})
	return b, outputs, err
}

// compareOutputs checks the tool outputs a request carries against the
// ones the transcript recorded for the calls they answer; cwds are
// replaced by "<cwd>" in both first.
func (r *Rules) compareOutputs(wire Wire, taped map[string]string, body []byte, cwds []string) *Mismatch {
	if len(taped) == 0 {
		return nil
	}
	got, err := requestOutputs(wire, body)
	if err != nil {
		return &Mismatch{Kind: KindModel, Path: "(request)", Note: err.Error()}
	}
	cwds = slices.DeleteFunc(slices.Clone(cwds), func(c string) bool { return len(c) < 2 })
	slices.SortFunc(cwds, func(a, b string) int { return len(b) - len(a) })
	n := &normalizer{wire: wire, r: r.norm[wire], cwds: cwds}
	norm := func(s string) string {
		return strings.TrimRight(n.text(s, true), "\n")
	}
	seen := 0
	for _, o := range got {
		want, ok := taped[o.id]
		if !ok {
			continue
		}
		seen++
		if norm(o.text) == norm(want) {
			continue
		}
		kind := KindTool
		if networkError().MatchString(o.text) && !networkError().MatchString(want) {
			kind = KindNetwork
		}
		return &Mismatch{Kind: kind, Path: o.path, Fields: []string{o.path}, Taped: norm(want), Actual: norm(o.text),
			Diff: unifiedDiff(norm(want), norm(o.text))}
	}
	if seen < len(taped) {
		return &Mismatch{Kind: KindModel, Path: "(tool results)",
			Note: fmt.Sprintf("the request answers %d of the %d tool calls the transcript's step made", seen, len(taped))}
	}
	return nil
}

// output is one tool output a request carries.
type output struct{ id, text, path string }

// requestOutputs lists the tool outputs a request carries: those in its
// last message (Anthropic), or every call output of its input (Responses,
// whose input is the whole conversation; the caller picks by call id),
// or every tool message (Chat Completions) or function response (Gemini).
func requestOutputs(wire Wire, body []byte) ([]output, error) {
	var out []output
	switch wire {
	case WireAnthropic:
		var req struct {
			Messages []struct {
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		if json.Unmarshal(body, &req) != nil || len(req.Messages) == 0 {
			return nil, fmt.Errorf("the request is not an Anthropic Messages request")
		}
		i := len(req.Messages) - 1
		var blocks []struct {
			Type      string          `json:"type"`
			ToolUseID string          `json:"tool_use_id"`
			Content   json.RawMessage `json:"content"`
		}
		_ = json.Unmarshal(req.Messages[i].Content, &blocks)
		for j, b := range blocks {
			if b.Type == "tool_result" {
				out = append(out, output{b.ToolUseID, resultText(b.Content), fmt.Sprintf("messages[%d].content[%d].content", i, j)})
			}
		}
	case WireResponses:
		var req struct {
			Input []struct {
				Type   string          `json:"type"`
				CallID string          `json:"call_id"`
				Output json.RawMessage `json:"output"`
			} `json:"input"`
		}
		if json.Unmarshal(body, &req) != nil {
			return nil, fmt.Errorf("the request is not an OpenAI Responses request")
		}
		for i, it := range req.Input {
			if it.Type == "function_call_output" || it.Type == "custom_tool_call_output" {
				out = append(out, output{it.CallID, resultText(it.Output), fmt.Sprintf("input[%d].output", i)})
			}
		}
	case WireChat:
		var req struct {
			Messages []struct {
				Role       string          `json:"role"`
				ToolCallID string          `json:"tool_call_id"`
				Content    json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		if json.Unmarshal(body, &req) != nil {
			return nil, fmt.Errorf("the request is not a Chat Completions request")
		}
		for i, m := range req.Messages {
			if m.Role == "tool" {
				out = append(out, output{m.ToolCallID, resultText(m.Content), fmt.Sprintf("messages[%d].content", i)})
			}
		}
	case WireGemini:
		return geminiOutputs(body)
	default:
		return nil, fmt.Errorf("tool outputs of %s requests are not read", wire)
	}
	return out, nil
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
		if b.Type == "text" || b.Type == "input_text" || b.Type == "output_text" {
			texts = append(texts, b.Text)
		}
	}
	return strings.Join(texts, "\n")
}
