package replay

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"tine/internal/sse"
)

// sseReader splits a text/event-stream into events with the shared
// framer (internal/sse), keeping each event's raw bytes so the gateway can
// pass them on unchanged.
type sseReader struct {
	r *sse.Reader
}

// newSSEReader reads r's events, none longer than max bytes
// (sse.DefaultMax, the API harnesses' bound, when 0).
func newSSEReader(r io.Reader, max int) *sseReader {
	sr := sse.NewReader(r, max)
	sr.KeepRaw = true
	return &sseReader{r: sr}
}

// next returns the raw bytes of the next event (through its blank line,
// valid until the next call) and the event parsed; ok is false for a
// block without data or a name (comments). At the end of the stream it
// returns what is left (possibly a partial event) with io.EOF; an event
// over the bound returns nothing and an *sse.TooLargeError.
func (s *sseReader) next() (raw []byte, ev Event, ok bool, err error) {
	e, err := s.r.Next()
	return e.Raw, Event{Event: e.Name, Data: e.Data}, e.HasData || e.Name != "", err
}

// writeEvent writes one event and flushes it.
func writeEvent(w http.ResponseWriter, ev Event) error {
	var b bytes.Buffer
	if ev.Event != "" {
		b.WriteString("event: ")
		b.WriteString(ev.Event)
		b.WriteByte('\n')
	}
	for _, l := range strings.Split(ev.Data, "\n") {
		b.WriteString("data: ")
		b.WriteString(l)
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	if _, err := w.Write(b.Bytes()); err != nil {
		return err
	}
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	return nil
}

// Assemble turns a streamed answer into one answer in the wire format's
// non-streaming shape. It returns nil when the events do not make one (a
// stream cut short, an error event).
func Assemble(wire Wire, events []Event) json.RawMessage {
	switch wire {
	case WireAnthropic:
		return assembleAnthropic(events)
	case WireChat:
		return assembleChat(events)
	case WireResponses:
		return assembleResponses(events)
	case WireGemini:
		return assembleGemini(events)
	}
	return nil
}

func assembleAnthropic(events []Event) json.RawMessage {
	var msg map[string]any
	var blocks []map[string]any
	partial := map[int]*strings.Builder{}
	done := false
	for _, e := range events {
		var d map[string]any
		if json.Unmarshal([]byte(e.Data), &d) != nil {
			continue
		}
		switch d["type"] {
		case "message_start":
			msg, _ = d["message"].(map[string]any)
		case "content_block_start":
			b, _ := d["content_block"].(map[string]any)
			if b == nil {
				return nil
			}
			blocks = append(blocks, b)
		case "content_block_delta":
			i := intOf(d["index"])
			if i < 0 || i >= len(blocks) {
				return nil
			}
			delta, _ := d["delta"].(map[string]any)
			b := blocks[i]
			switch delta["type"] {
			case "text_delta":
				b["text"] = str(b["text"]) + str(delta["text"])
			case "thinking_delta":
				b["thinking"] = str(b["thinking"]) + str(delta["thinking"])
			case "signature_delta":
				b["signature"] = str(b["signature"]) + str(delta["signature"])
			case "input_json_delta":
				if partial[i] == nil {
					partial[i] = &strings.Builder{}
				}
				partial[i].WriteString(str(delta["partial_json"]))
			case "citations_delta":
				c, _ := b["citations"].([]any)
				b["citations"] = append(c, delta["citation"])
			}
		case "content_block_stop":
			i := intOf(d["index"])
			if p := partial[i]; p != nil && i >= 0 && i < len(blocks) {
				s := p.String()
				if s == "" {
					s = "{}"
				}
				blocks[i]["input"] = json.RawMessage(s)
			}
		case "message_delta":
			if msg == nil {
				return nil
			}
			if delta, ok := d["delta"].(map[string]any); ok {
				for k, v := range delta {
					msg[k] = v
				}
			}
			if u, ok := d["usage"].(map[string]any); ok {
				mu, _ := msg["usage"].(map[string]any)
				if mu == nil {
					mu = map[string]any{}
				}
				for k, v := range u {
					mu[k] = v
				}
				msg["usage"] = mu
			}
		case "message_stop":
			done = true
		case "error":
			return nil
		}
	}
	if msg == nil || !done {
		return nil
	}
	if blocks == nil {
		blocks = []map[string]any{}
	}
	msg["content"] = blocks
	b, _ := json.Marshal(msg)
	return b
}

func assembleChat(events []Event) json.RawMessage {
	var out map[string]any
	var content, reasoning strings.Builder
	hasContent, hasReasoning := false, false
	type call struct {
		id, typ, name string
		args          strings.Builder
	}
	var calls []*call
	var finish any
	var usage any
	done := false
	for _, e := range events {
		if strings.TrimSpace(e.Data) == "[DONE]" {
			done = true
			continue
		}
		var d map[string]any
		if json.Unmarshal([]byte(e.Data), &d) != nil {
			continue
		}
		if _, bad := d["error"]; bad {
			return nil
		}
		if out == nil {
			out = map[string]any{"id": d["id"], "object": "chat.completion", "created": d["created"], "model": d["model"]}
			if fp, ok := d["system_fingerprint"]; ok {
				out["system_fingerprint"] = fp
			}
		}
		if u, ok := d["usage"]; ok && u != nil {
			usage = u
		}
		choices, _ := d["choices"].([]any)
		for _, c := range choices {
			cm, _ := c.(map[string]any)
			if intOf(cm["index"]) != 0 {
				continue
			}
			if f := cm["finish_reason"]; f != nil {
				finish = f
			}
			delta, _ := cm["delta"].(map[string]any)
			if s, ok := delta["content"].(string); ok {
				content.WriteString(s)
				hasContent = hasContent || s != ""
			}
			for _, k := range []string{"reasoning_content", "reasoning"} {
				if s, ok := delta[k].(string); ok {
					reasoning.WriteString(s)
					hasReasoning = true
				}
			}
			tcs, _ := delta["tool_calls"].([]any)
			for _, t := range tcs {
				tm, _ := t.(map[string]any)
				i := intOf(tm["index"])
				if i < 0 {
					return nil
				}
				for len(calls) <= i {
					calls = append(calls, &call{})
				}
				cl := calls[i]
				if s := str(tm["id"]); s != "" {
					cl.id = s
				}
				if s := str(tm["type"]); s != "" {
					cl.typ = s
				}
				fn, _ := tm["function"].(map[string]any)
				if s := str(fn["name"]); s != "" {
					cl.name = s
				}
				cl.args.WriteString(str(fn["arguments"]))
			}
		}
	}
	if out == nil || (!done && finish == nil) {
		return nil
	}
	msg := map[string]any{"role": "assistant", "content": nil}
	if hasContent {
		msg["content"] = content.String()
	}
	if hasReasoning {
		msg["reasoning_content"] = reasoning.String()
	}
	if len(calls) > 0 {
		var tc []any
		for _, c := range calls {
			typ := c.typ
			if typ == "" {
				typ = "function"
			}
			tc = append(tc, map[string]any{"id": c.id, "type": typ, "function": map[string]any{"name": c.name, "arguments": c.args.String()}})
		}
		msg["tool_calls"] = tc
	}
	out["choices"] = []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}
	if usage != nil {
		out["usage"] = usage
	}
	b, _ := json.Marshal(out)
	return b
}

func assembleResponses(events []Event) json.RawMessage {
	for _, e := range events {
		var d struct {
			Type     string          `json:"type"`
			Response json.RawMessage `json:"response"`
		}
		if json.Unmarshal([]byte(e.Data), &d) != nil {
			continue
		}
		switch d.Type {
		case "response.completed", "response.incomplete":
			if len(d.Response) > 0 {
				return d.Response
			}
		}
	}
	return nil
}

// encodeStream renders an assembled answer as the wire format's stream: the
// minimal event sequence the agents' SDKs accept (whole blocks, one delta
// each). req is the request (for Chat Completions' include_usage).
func encodeStream(wire Wire, answer json.RawMessage, req []byte) []Event {
	if wire == WireGemini {
		return encodeGemini(answer)
	}
	var a map[string]any
	if json.Unmarshal(answer, &a) != nil {
		return nil
	}
	ev := func(name string, v any) Event {
		b, _ := json.Marshal(v)
		return Event{Event: name, Data: string(b)}
	}
	var out []Event
	switch wire {
	case WireAnthropic:
		content, _ := a["content"].([]any)
		start := map[string]any{}
		for k, v := range a {
			start[k] = v
		}
		start["content"] = []any{}
		start["stop_reason"] = nil
		start["stop_sequence"] = nil
		out = append(out, ev("message_start", map[string]any{"type": "message_start", "message": start}))
		for i, c := range content {
			b, _ := c.(map[string]any)
			shell := map[string]any{}
			for k, v := range b {
				shell[k] = v
			}
			var deltas []map[string]any
			switch b["type"] {
			case "text":
				shell["text"] = ""
				deltas = append(deltas, map[string]any{"type": "text_delta", "text": b["text"]})
			case "thinking":
				shell["thinking"], shell["signature"] = "", ""
				deltas = append(deltas, map[string]any{"type": "thinking_delta", "thinking": b["thinking"]})
				if s := str(b["signature"]); s != "" {
					deltas = append(deltas, map[string]any{"type": "signature_delta", "signature": s})
				}
			case "tool_use", "server_tool_use":
				shell["input"] = map[string]any{}
				in, _ := json.Marshal(b["input"])
				deltas = append(deltas, map[string]any{"type": "input_json_delta", "partial_json": string(in)})
			}
			out = append(out, ev("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": shell}))
			for _, d := range deltas {
				out = append(out, ev("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d}))
			}
			out = append(out, ev("content_block_stop", map[string]any{"type": "content_block_stop", "index": i}))
		}
		out = append(out, ev("message_delta", map[string]any{"type": "message_delta",
			"delta": map[string]any{"stop_reason": a["stop_reason"], "stop_sequence": a["stop_sequence"]}, "usage": a["usage"]}))
		out = append(out, ev("message_stop", map[string]any{"type": "message_stop"}))
	case WireChat:
		chunk := func(delta map[string]any, finish any) map[string]any {
			return map[string]any{"id": a["id"], "object": "chat.completion.chunk", "created": a["created"], "model": a["model"],
				"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
		}
		choices, _ := a["choices"].([]any)
		var msg map[string]any
		var finish any
		if len(choices) > 0 {
			c, _ := choices[0].(map[string]any)
			msg, _ = c["message"].(map[string]any)
			finish = c["finish_reason"]
		}
		out = append(out, ev("", chunk(map[string]any{"role": "assistant", "content": ""}, nil)))
		if s, ok := msg["reasoning_content"].(string); ok {
			out = append(out, ev("", chunk(map[string]any{"reasoning_content": s}, nil)))
		}
		if s, ok := msg["content"].(string); ok && s != "" {
			out = append(out, ev("", chunk(map[string]any{"content": s}, nil)))
		}
		tcs, _ := msg["tool_calls"].([]any)
		for i, t := range tcs {
			tm, _ := t.(map[string]any)
			tc := map[string]any{"index": i}
			for k, v := range tm {
				tc[k] = v
			}
			out = append(out, ev("", chunk(map[string]any{"tool_calls": []any{tc}}, nil)))
		}
		out = append(out, ev("", chunk(map[string]any{}, finish)))
		var o struct {
			StreamOptions struct {
				IncludeUsage bool `json:"include_usage"`
			} `json:"stream_options"`
		}
		_ = json.Unmarshal(req, &o)
		if u, ok := a["usage"]; ok && o.StreamOptions.IncludeUsage {
			c := chunk(nil, nil)
			delete(c, "choices")
			c["choices"] = []any{}
			c["usage"] = u
			out = append(out, ev("", c))
		}
		out = append(out, Event{Data: "[DONE]"})
	case WireResponses:
		seq := 0
		rev := func(typ string, f map[string]any) {
			f["type"] = typ
			f["sequence_number"] = seq
			seq++
			out = append(out, ev(typ, f))
		}
		pending := map[string]any{}
		for k, v := range a {
			pending[k] = v
		}
		pending["status"] = "in_progress"
		pending["output"] = []any{}
		rev("response.created", map[string]any{"response": pending})
		items, _ := a["output"].([]any)
		for i, it := range items {
			rev("response.output_item.added", map[string]any{"output_index": i, "item": it})
			rev("response.output_item.done", map[string]any{"output_index": i, "item": it})
		}
		rev("response.completed", map[string]any{"response": a})
	}
	return out
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func intOf(v any) int {
	f, ok := v.(float64)
	if !ok {
		return -1
	}
	return int(f)
}
