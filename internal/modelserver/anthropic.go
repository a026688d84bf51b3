package modelserver

import (
	"encoding/json"
	"fmt"
)

// anthropicEnc renders a reply as an Anthropic Messages API response.
type anthropicEnc struct{ encBase }

func (e *anthropicEnc) id() string { return fmt.Sprintf("msg_tine%04d", e.seq) }

func (e *anthropicEnc) stopReason() string {
	if e.reply.StopReason != "" {
		return e.reply.StopReason
	}
	if len(e.reply.ToolCalls) > 0 {
		return "tool_use"
	}
	return "end_turn"
}

func (e *anthropicEnc) signature() string { return fmt.Sprintf("sig_tine%04d", e.seq) }

func (e *anthropicEnc) usage(output int) map[string]any {
	u := e.reply.Usage
	return map[string]any{
		"input_tokens":                u.InputTokens,
		"cache_creation_input_tokens": u.CacheWriteTokens,
		"cache_read_input_tokens":     u.CacheReadTokens,
		"output_tokens":               output,
	}
}

func (e *anthropicEnc) blocks() []map[string]any {
	var out []map[string]any
	if e.reply.Thinking != "" {
		out = append(out, map[string]any{"type": "thinking", "thinking": e.reply.Thinking, "signature": e.signature()})
	}
	if e.reply.Text != "" {
		out = append(out, map[string]any{"type": "text", "text": e.reply.Text})
	}
	for i, tc := range e.reply.ToolCalls {
		out = append(out, map[string]any{"type": "tool_use", "id": e.toolID("toolu_tine", i), "name": tc.Name, "input": tc.Input})
	}
	if out == nil {
		out = []map[string]any{}
	}
	return out
}

func (e *anthropicEnc) full() []byte {
	b, _ := json.Marshal(map[string]any{
		"id":            e.id(),
		"type":          "message",
		"role":          "assistant",
		"model":         e.reply.Model,
		"content":       e.blocks(),
		"stop_reason":   e.stopReason(),
		"stop_sequence": nil,
		"usage":         e.usage(e.reply.Usage.OutputTokens),
	})
	return b
}

func (e *anthropicEnc) stream(sw *sseWriter) {
	start := 1
	if e.reply.Usage.OutputTokens < start {
		start = e.reply.Usage.OutputTokens
	}
	sw.event("message_start", map[string]any{
		"type": "message_start",
		"message": map[string]any{
			"id": e.id(), "type": "message", "role": "assistant", "model": e.reply.Model,
			"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
			"usage": e.usage(start),
		},
	})
	sw.event("ping", map[string]any{"type": "ping"})
	idx := 0
	blockStart := func(block map[string]any) {
		sw.event("content_block_start", map[string]any{"type": "content_block_start", "index": idx, "content_block": block})
	}
	delta := func(d map[string]any) {
		sw.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": d})
	}
	blockStop := func() {
		sw.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
		idx++
	}
	if e.reply.Thinking != "" {
		blockStart(map[string]any{"type": "thinking", "thinking": "", "signature": ""})
		for _, p := range split(e.reply.Thinking, e.chunk) {
			delta(map[string]any{"type": "thinking_delta", "thinking": p})
		}
		delta(map[string]any{"type": "signature_delta", "signature": e.signature()})
		blockStop()
	}
	if e.reply.Text != "" {
		blockStart(map[string]any{"type": "text", "text": ""})
		for _, p := range split(e.reply.Text, e.chunk) {
			delta(map[string]any{"type": "text_delta", "text": p})
		}
		blockStop()
	}
	for i, tc := range e.reply.ToolCalls {
		blockStart(map[string]any{"type": "tool_use", "id": e.toolID("toolu_tine", i), "name": tc.Name, "input": map[string]any{}})
		for _, p := range split(string(compactJSON(tc.Input)), 2*e.chunk) {
			delta(map[string]any{"type": "input_json_delta", "partial_json": p})
		}
		blockStop()
	}
	sw.event("message_delta", map[string]any{
		"type":  "message_delta",
		"delta": map[string]any{"stop_reason": e.stopReason(), "stop_sequence": nil},
		"usage": e.usage(e.reply.Usage.OutputTokens),
	})
	sw.event("message_stop", map[string]any{"type": "message_stop"})
}

func compactJSON(raw json.RawMessage) []byte {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return raw
	}
	b, _ := json.Marshal(v)
	return b
}
