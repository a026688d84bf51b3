package modelserver

import (
	"encoding/json"
	"fmt"
)

// chatEnc renders a reply as an OpenAI Chat Completions response.
type chatEnc struct {
	encBase
	includeUsage bool
}

func (e *chatEnc) id() string { return fmt.Sprintf("chatcmpl-tine%04d", e.seq) }

func (e *chatEnc) finishReason() string {
	if e.reply.StopReason != "" {
		return e.reply.StopReason
	}
	if len(e.reply.ToolCalls) > 0 {
		return "tool_calls"
	}
	return "stop"
}

func (e *chatEnc) usage() map[string]any {
	u := e.reply.Usage
	prompt := u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens
	return map[string]any{
		"prompt_tokens":             prompt,
		"completion_tokens":         u.OutputTokens,
		"total_tokens":              prompt + u.OutputTokens,
		"prompt_tokens_details":     map[string]any{"cached_tokens": u.CacheReadTokens},
		"completion_tokens_details": map[string]any{"reasoning_tokens": u.ReasoningTokens},
	}
}

func (e *chatEnc) args(i int) string { return string(compactJSON(e.reply.ToolCalls[i].Input)) }

func (e *chatEnc) full() []byte {
	msg := map[string]any{"role": "assistant", "content": nil}
	if e.reply.Text != "" {
		msg["content"] = e.reply.Text
	}
	if e.reply.Thinking != "" {
		msg["reasoning_content"] = e.reply.Thinking
	}
	if len(e.reply.ToolCalls) > 0 {
		var calls []any
		for i, tc := range e.reply.ToolCalls {
			calls = append(calls, map[string]any{
				"id": e.toolID("call_tine", i), "type": "function",
				"function": map[string]any{"name": tc.Name, "arguments": e.args(i)},
			})
		}
		msg["tool_calls"] = calls
	}
	b, _ := json.Marshal(map[string]any{
		"id": e.id(), "object": "chat.completion", "created": e.created, "model": e.reply.Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": e.finishReason(), "logprobs": nil}},
		"usage":   e.usage(),
	})
	return b
}

func (e *chatEnc) chunk(delta map[string]any, finish any) map[string]any {
	return map[string]any{
		"id": e.id(), "object": "chat.completion.chunk", "created": e.created, "model": e.reply.Model,
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil}},
	}
}

func (e *chatEnc) stream(sw *sseWriter) {
	sw.event("", e.chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	for _, p := range split(e.reply.Thinking, e.encBase.chunk) {
		sw.event("", e.chunk(map[string]any{"reasoning_content": p}, nil))
	}
	for _, p := range split(e.reply.Text, e.encBase.chunk) {
		sw.event("", e.chunk(map[string]any{"content": p}, nil))
	}
	for i, tc := range e.reply.ToolCalls {
		sw.event("", e.chunk(map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "id": e.toolID("call_tine", i), "type": "function",
			"function": map[string]any{"name": tc.Name, "arguments": ""},
		}}}, nil))
		for _, p := range split(e.args(i), 2*e.encBase.chunk) {
			sw.event("", e.chunk(map[string]any{"tool_calls": []any{map[string]any{
				"index": i, "function": map[string]any{"arguments": p},
			}}}, nil))
		}
	}
	sw.event("", e.chunk(map[string]any{}, e.finishReason()))
	if e.includeUsage {
		sw.event("", map[string]any{
			"id": e.id(), "object": "chat.completion.chunk", "created": e.created, "model": e.reply.Model,
			"choices": []any{}, "usage": e.usage(),
		})
	}
	sw.event("", "[DONE]")
}

// responsesEnc renders a reply as an OpenAI Responses API response.
type responsesEnc struct{ encBase }

func (e *responsesEnc) id() string { return fmt.Sprintf("resp_tine%04d", e.seq) }

func (e *responsesEnc) usage() map[string]any {
	u := e.reply.Usage
	in := u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens
	return map[string]any{
		"input_tokens":          in,
		"input_tokens_details":  map[string]any{"cached_tokens": u.CacheReadTokens},
		"output_tokens":         u.OutputTokens,
		"output_tokens_details": map[string]any{"reasoning_tokens": u.ReasoningTokens},
		"total_tokens":          in + u.OutputTokens,
	}
}

func (e *responsesEnc) response(status string, output []any, withUsage bool) map[string]any {
	r := map[string]any{
		"id": e.id(), "object": "response", "created_at": e.created, "status": status,
		"model": e.reply.Model, "output": output, "error": nil, "incomplete_details": nil,
		"parallel_tool_calls": true, "tool_choice": "auto", "tools": []any{},
	}
	if withUsage {
		r["usage"] = e.usage()
	} else {
		r["usage"] = nil
	}
	return r
}

func (e *responsesEnc) reasoningItem(done bool) map[string]any {
	it := map[string]any{"id": fmt.Sprintf("rs_tine%04d", e.seq), "type": "reasoning", "summary": []any{}}
	if done {
		it["summary"] = []any{map[string]any{"type": "summary_text", "text": e.reply.Thinking}}
	}
	return it
}

func (e *responsesEnc) messageItem(done bool) map[string]any {
	it := map[string]any{"id": fmt.Sprintf("msg_tine%04d", e.seq), "type": "message", "role": "assistant"}
	if done {
		it["status"] = "completed"
		it["content"] = []any{e.textPart(e.reply.Text)}
	} else {
		it["status"] = "in_progress"
		it["content"] = []any{}
	}
	return it
}

func (e *responsesEnc) textPart(s string) map[string]any {
	return map[string]any{"type": "output_text", "text": s, "annotations": []any{}, "logprobs": []any{}}
}

func (e *responsesEnc) callItem(i int, done bool) map[string]any {
	tc := e.reply.ToolCalls[i]
	it := map[string]any{
		"id": fmt.Sprintf("fc_tine%04d_%d", e.seq, i), "type": "function_call",
		"call_id": e.toolID("call_tine", i), "name": tc.Name, "arguments": "",
		"status": "in_progress",
	}
	if done {
		it["arguments"] = string(compactJSON(tc.Input))
		it["status"] = "completed"
	}
	return it
}

func (e *responsesEnc) output() []any {
	var out []any
	if e.reply.Thinking != "" {
		out = append(out, e.reasoningItem(true))
	}
	if e.reply.Text != "" {
		out = append(out, e.messageItem(true))
	}
	for i := range e.reply.ToolCalls {
		out = append(out, e.callItem(i, true))
	}
	if out == nil {
		out = []any{}
	}
	return out
}

func (e *responsesEnc) full() []byte {
	b, _ := json.Marshal(e.response("completed", e.output(), true))
	return b
}

func (e *responsesEnc) stream(sw *sseWriter) {
	seq := 0
	ev := func(typ string, fields map[string]any) {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		sw.event(typ, fields)
	}
	ev("response.created", map[string]any{"response": e.response("in_progress", []any{}, false)})
	ev("response.in_progress", map[string]any{"response": e.response("in_progress", []any{}, false)})
	oi := 0
	if e.reply.Thinking != "" {
		item := e.reasoningItem(false)
		id := item["id"]
		ev("response.output_item.added", map[string]any{"output_index": oi, "item": item})
		ev("response.reasoning_summary_part.added", map[string]any{"item_id": id, "output_index": oi, "summary_index": 0, "part": map[string]any{"type": "summary_text", "text": ""}})
		for _, p := range split(e.reply.Thinking, e.chunk) {
			ev("response.reasoning_summary_text.delta", map[string]any{"item_id": id, "output_index": oi, "summary_index": 0, "delta": p})
		}
		ev("response.reasoning_summary_text.done", map[string]any{"item_id": id, "output_index": oi, "summary_index": 0, "text": e.reply.Thinking})
		ev("response.reasoning_summary_part.done", map[string]any{"item_id": id, "output_index": oi, "summary_index": 0, "part": map[string]any{"type": "summary_text", "text": e.reply.Thinking}})
		ev("response.output_item.done", map[string]any{"output_index": oi, "item": e.reasoningItem(true)})
		oi++
	}
	if e.reply.Text != "" {
		item := e.messageItem(false)
		id := item["id"]
		ev("response.output_item.added", map[string]any{"output_index": oi, "item": item})
		ev("response.content_part.added", map[string]any{"item_id": id, "output_index": oi, "content_index": 0, "part": e.textPart("")})
		for _, p := range split(e.reply.Text, e.chunk) {
			ev("response.output_text.delta", map[string]any{"item_id": id, "output_index": oi, "content_index": 0, "delta": p, "logprobs": []any{}})
		}
		ev("response.output_text.done", map[string]any{"item_id": id, "output_index": oi, "content_index": 0, "text": e.reply.Text, "logprobs": []any{}})
		ev("response.content_part.done", map[string]any{"item_id": id, "output_index": oi, "content_index": 0, "part": e.textPart(e.reply.Text)})
		ev("response.output_item.done", map[string]any{"output_index": oi, "item": e.messageItem(true)})
		oi++
	}
	for i := range e.reply.ToolCalls {
		item := e.callItem(i, false)
		id := item["id"]
		ev("response.output_item.added", map[string]any{"output_index": oi, "item": item})
		args := string(compactJSON(e.reply.ToolCalls[i].Input))
		for _, p := range split(args, 2*e.chunk) {
			ev("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": oi, "delta": p})
		}
		ev("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": oi, "arguments": args})
		ev("response.output_item.done", map[string]any{"output_index": oi, "item": e.callItem(i, true)})
		oi++
	}
	ev("response.completed", map[string]any{"response": e.response("completed", e.output(), true)})
}
