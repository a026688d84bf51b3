package modelserver

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func start(t *testing.T, opts Options) *Server {
	t.Helper()
	s, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

type sseEvent struct {
	Name string
	Data string
}

// readSSE parses an SSE body strictly: every data line must be JSON or [DONE].
func readSSE(t *testing.T, r io.Reader) ([]sseEvent, error) {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.Data != "" || cur.Name != "" {
				if cur.Data != "[DONE]" && !json.Valid([]byte(cur.Data)) {
					return out, errors.New("invalid JSON in SSE data: " + cur.Data)
				}
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.Name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.Data += strings.TrimPrefix(line, "data: ")
		case strings.HasPrefix(line, ":"):
		default:
			return out, errors.New("bad SSE line: " + line)
		}
	}
	return out, sc.Err()
}

func post(t *testing.T, url string, body any) *http.Response {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func decode[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return v
}

var bashCall = Call("Bash", map[string]any{"command": "echo hi && ls", "description": "Print hi"})

func TestAnthropicStream(t *testing.T) {
	s := start(t, Options{})
	s.Push(Reply{
		Thinking:  "let me think about this",
		Text:      "I'll run a command for you now.",
		ToolCalls: []ToolCall{bashCall},
		Usage:     Usage{InputTokens: 11, OutputTokens: 22, CacheReadTokens: 33, CacheWriteTokens: 44},
	})
	resp := post(t, s.URL()+"/v1/messages", map[string]any{
		"model": "claude-x", "stream": true, "max_tokens": 100,
		"messages": []any{map[string]any{"role": "user", "content": "hi"}},
		"tools":    []any{map[string]any{"name": "Bash", "input_schema": map[string]any{}}},
	})
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content-type %q", ct)
	}
	evs, err := readSSE(t, resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	blocks := map[int]map[string]any{}
	texts := map[int]string{}
	var startUsage, deltaUsage map[string]any
	var stop string
	for _, e := range evs {
		names = append(names, e.Name)
		m := decode[map[string]any](t, e.Data)
		if m["type"] != e.Name {
			t.Errorf("event %q has type %v", e.Name, m["type"])
		}
		switch e.Name {
		case "message_start":
			msg := m["message"].(map[string]any)
			startUsage = msg["usage"].(map[string]any)
			if msg["model"] != "claude-x" || msg["role"] != "assistant" {
				t.Errorf("message_start %v", msg)
			}
		case "content_block_start":
			blocks[int(m["index"].(float64))] = m["content_block"].(map[string]any)
		case "content_block_delta":
			i := int(m["index"].(float64))
			d := m["delta"].(map[string]any)
			switch d["type"] {
			case "text_delta":
				texts[i] += d["text"].(string)
			case "thinking_delta":
				texts[i] += d["thinking"].(string)
			case "input_json_delta":
				texts[i] += d["partial_json"].(string)
			case "signature_delta":
			default:
				t.Errorf("delta type %v", d["type"])
			}
		case "message_delta":
			deltaUsage = m["usage"].(map[string]any)
			stop = m["delta"].(map[string]any)["stop_reason"].(string)
		}
	}
	if names[0] != "message_start" || names[len(names)-1] != "message_stop" || names[len(names)-2] != "message_delta" {
		t.Errorf("event order %v", names)
	}
	if blocks[0]["type"] != "thinking" || texts[0] != "let me think about this" {
		t.Errorf("thinking block %v %q", blocks[0], texts[0])
	}
	if blocks[1]["type"] != "text" || texts[1] != "I'll run a command for you now." {
		t.Errorf("text block %v %q", blocks[1], texts[1])
	}
	if blocks[2]["type"] != "tool_use" || blocks[2]["name"] != "Bash" || blocks[2]["id"] == "" {
		t.Errorf("tool block %v", blocks[2])
	}
	in := decode[map[string]any](t, texts[2])
	if !reflect.DeepEqual(in, map[string]any{"command": "echo hi && ls", "description": "Print hi"}) {
		t.Errorf("tool input %v", in)
	}
	if stop != "tool_use" {
		t.Errorf("stop_reason %q", stop)
	}
	if startUsage["input_tokens"] != 11.0 || startUsage["cache_read_input_tokens"] != 33.0 || startUsage["cache_creation_input_tokens"] != 44.0 || startUsage["output_tokens"] != 1.0 {
		t.Errorf("message_start usage %v", startUsage)
	}
	if deltaUsage["output_tokens"] != 22.0 || deltaUsage["input_tokens"] != 11.0 {
		t.Errorf("message_delta usage %v", deltaUsage)
	}
	reqs := s.ModelRequests()
	if len(reqs) != 1 || !reqs[0].Scripted || reqs[0].API != APIAnthropic || !reqs[0].Stream || !reflect.DeepEqual(reqs[0].ToolNames, []string{"Bash"}) {
		t.Errorf("recorded %+v", reqs)
	}
}

func TestAnthropicNonStream(t *testing.T) {
	s := start(t, Options{})
	s.Push(Reply{Text: "hello", ToolCalls: []ToolCall{{ID: "toolu_fixed", Name: "Read", Input: json.RawMessage(`{"path":"a"}`)}}, Usage: Usage{InputTokens: 5, OutputTokens: 6}})
	resp := post(t, s.URL()+"/v1/messages", map[string]any{"model": "m", "messages": []any{}})
	defer resp.Body.Close()
	var msg struct {
		ID         string `json:"id"`
		Type       string `json:"type"`
		StopReason string `json:"stop_reason"`
		Content    []struct {
			Type  string          `json:"type"`
			Text  string          `json:"text"`
			ID    string          `json:"id"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		} `json:"content"`
		Usage struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
		t.Fatal(err)
	}
	if msg.Type != "message" || msg.StopReason != "tool_use" || len(msg.Content) != 2 ||
		msg.Content[0].Text != "hello" || msg.Content[1].ID != "toolu_fixed" || string(msg.Content[1].Input) != `{"path":"a"}` ||
		msg.Usage.InputTokens != 5 || msg.Usage.OutputTokens != 6 {
		t.Errorf("%+v", msg)
	}
}

func TestChatStream(t *testing.T) {
	s := start(t, Options{})
	s.Push(Reply{
		Thinking: "hmm", Text: "calling two tools",
		ToolCalls: []ToolCall{bashCall, Call("read", map[string]any{"path": "README.md"})},
		Usage:     Usage{InputTokens: 100, CacheReadTokens: 50, OutputTokens: 7, ReasoningTokens: 3},
	})
	resp := post(t, s.URL()+"/v1/chat/completions", map[string]any{
		"model": "gpt-x", "stream": true, "stream_options": map[string]any{"include_usage": true},
		"messages": []any{map[string]any{"role": "user", "content": "hi"}},
		"tools":    []any{map[string]any{"type": "function", "function": map[string]any{"name": "bash"}}},
	})
	defer resp.Body.Close()
	evs, err := readSSE(t, resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if evs[len(evs)-1].Data != "[DONE]" {
		t.Fatalf("last event %q", evs[len(evs)-1].Data)
	}
	type chunk struct {
		Object  string `json:"object"`
		Model   string `json:"model"`
		Choices []struct {
			Delta struct {
				Role             string `json:"role"`
				Content          string `json:"content"`
				ReasoningContent string `json:"reasoning_content"`
				ToolCalls        []struct {
					Index    int    `json:"index"`
					ID       string `json:"id"`
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"delta"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Usage *struct {
			PromptTokens        int `json:"prompt_tokens"`
			CompletionTokens    int `json:"completion_tokens"`
			TotalTokens         int `json:"total_tokens"`
			PromptTokensDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	var text, reasoning, finish string
	names := map[int]string{}
	args := map[int]string{}
	ids := map[int]string{}
	var usageSeen int
	for _, e := range evs[:len(evs)-1] {
		c := decode[chunk](t, e.Data)
		if c.Object != "chat.completion.chunk" || c.Model != "gpt-x" {
			t.Errorf("chunk %s", e.Data)
		}
		if c.Usage != nil {
			usageSeen++
			if len(c.Choices) != 0 || c.Usage.PromptTokens != 150 || c.Usage.CompletionTokens != 7 || c.Usage.TotalTokens != 157 || c.Usage.PromptTokensDetails.CachedTokens != 50 {
				t.Errorf("usage chunk %s", e.Data)
			}
		}
		for _, ch := range c.Choices {
			text += ch.Delta.Content
			reasoning += ch.Delta.ReasoningContent
			for _, tc := range ch.Delta.ToolCalls {
				names[tc.Index] += tc.Function.Name
				args[tc.Index] += tc.Function.Arguments
				if tc.ID != "" {
					ids[tc.Index] = tc.ID
				}
			}
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	}
	if text != "calling two tools" || reasoning != "hmm" || finish != "tool_calls" || usageSeen != 1 {
		t.Errorf("text %q reasoning %q finish %q usage chunks %d", text, reasoning, finish, usageSeen)
	}
	if names[0] != "Bash" || names[1] != "read" || ids[0] == ids[1] || ids[0] == "" {
		t.Errorf("tool names %v ids %v", names, ids)
	}
	if a := decode[map[string]any](t, args[1]); a["path"] != "README.md" {
		t.Errorf("args %v", args)
	}

	// Without include_usage there is no usage chunk.
	resp2 := post(t, s.URL()+"/v1/chat/completions", map[string]any{"model": "m", "stream": true})
	defer resp2.Body.Close()
	evs2, err := readSSE(t, resp2.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs2 {
		if strings.Contains(e.Data, `"usage"`) {
			t.Errorf("unexpected usage chunk %s", e.Data)
		}
	}
	if !strings.Contains(evs2[1].Data, `"content":"ok"`) {
		t.Errorf("default reply: %v", evs2)
	}
}

func TestChatNonStream(t *testing.T) {
	s := start(t, Options{})
	s.Push(Tools(bashCall))
	resp := post(t, s.URL()+"/v1/chat/completions", map[string]any{"model": "m"})
	defer resp.Body.Close()
	var out struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct {
				Content   *string `json:"content"`
				ToolCalls []struct {
					Type     string `json:"type"`
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	c := out.Choices[0]
	if out.Object != "chat.completion" || c.Message.Content != nil || c.FinishReason != "tool_calls" ||
		c.Message.ToolCalls[0].Function.Name != "Bash" || c.Message.ToolCalls[0].Type != "function" ||
		out.Usage.PromptTokens != DefaultInputTokens {
		t.Errorf("%+v", out)
	}
}

func TestResponsesStream(t *testing.T) {
	s := start(t, Options{})
	s.Push(Reply{
		Thinking: "reasoning summary", Text: "running it",
		ToolCalls: []ToolCall{Call("exec_command", map[string]any{"cmd": "echo hi"})},
		Usage:     Usage{InputTokens: 300, CacheReadTokens: 1100, OutputTokens: 60, ReasoningTokens: 12},
	})
	resp := post(t, s.URL()+"/v1/responses", map[string]any{
		"model": "gpt-5.5", "stream": true, "input": []any{},
		"tools": []any{map[string]any{"type": "function", "name": "exec_command"}, map[string]any{"type": "web_search"}},
	})
	defer resp.Body.Close()
	evs, err := readSSE(t, resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var text, args string
	var done []map[string]any
	var completed map[string]any
	for i, e := range evs {
		names = append(names, e.Name)
		m := decode[map[string]any](t, e.Data)
		if m["type"] != e.Name || m["sequence_number"] != float64(i) {
			t.Errorf("event %d: %s", i, e.Data)
		}
		switch e.Name {
		case "response.output_text.delta":
			text += m["delta"].(string)
		case "response.function_call_arguments.delta":
			args += m["delta"].(string)
		case "response.output_item.done":
			done = append(done, m["item"].(map[string]any))
		case "response.completed":
			completed = m["response"].(map[string]any)
		}
	}
	if names[0] != "response.created" || names[len(names)-1] != "response.completed" {
		t.Errorf("order %v", names)
	}
	if text != "running it" || args != `{"cmd":"echo hi"}` {
		t.Errorf("text %q args %q", text, args)
	}
	if len(done) != 3 || done[0]["type"] != "reasoning" || done[1]["type"] != "message" || done[2]["type"] != "function_call" ||
		done[2]["name"] != "exec_command" || done[2]["arguments"] != `{"cmd":"echo hi"}` || done[2]["call_id"] == "" {
		t.Errorf("items %v", done)
	}
	u := completed["usage"].(map[string]any)
	if completed["status"] != "completed" || u["input_tokens"] != 1400.0 || u["output_tokens"] != 60.0 || u["total_tokens"] != 1460.0 ||
		u["input_tokens_details"].(map[string]any)["cached_tokens"] != 1100.0 ||
		u["output_tokens_details"].(map[string]any)["reasoning_tokens"] != 12.0 {
		t.Errorf("completed %v", completed)
	}
	if got := s.Requests()[0].ToolNames; !reflect.DeepEqual(got, []string{"exec_command", "web_search"}) {
		t.Errorf("tool names %v", got)
	}
}

func TestResponsesNonStream(t *testing.T) {
	s := start(t, Options{})
	resp := post(t, s.URL()+"/v1/responses", map[string]any{"model": "m"})
	defer resp.Body.Close()
	var out struct {
		Object string `json:"object"`
		Status string `json:"status"`
		Output []struct {
			Type    string `json:"type"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if out.Object != "response" || out.Status != "completed" || out.Output[0].Content[0].Text != "ok" {
		t.Errorf("%+v", out)
	}
}

func TestOtherEndpoints(t *testing.T) {
	s := start(t, Options{Model: "my-model"})
	for _, p := range []string{"/v1/models", "/models"} {
		resp, err := http.Get(s.URL() + p)
		if err != nil {
			t.Fatal(err)
		}
		var list struct {
			Object string `json:"object"`
			Data   []struct {
				ID   string `json:"id"`
				Type string `json:"type"`
			} `json:"data"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		if list.Object != "list" || len(list.Data) != 1 || list.Data[0].ID != "my-model" || list.Data[0].Type != "model" {
			t.Errorf("%s: %+v", p, list)
		}
	}
	resp, _ := http.Get(s.URL() + "/v1/models/my-model")
	var one map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&one)
	resp.Body.Close()
	if one["id"] != "my-model" {
		t.Errorf("model: %v", one)
	}

	resp = post(t, s.URL()+"/v1/messages/count_tokens", map[string]any{"model": "m", "messages": []any{"0123456789abcdef"}})
	var ct map[string]int
	_ = json.NewDecoder(resp.Body).Decode(&ct)
	resp.Body.Close()
	if ct["input_tokens"] <= 0 {
		t.Errorf("count_tokens %v", ct)
	}

	req, _ := http.NewRequest(http.MethodHead, s.URL()+"/", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("HEAD /: %v %v", resp, err)
	}
	resp, _ = http.Get(s.URL() + "/nope")
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("unknown path: %d", resp.StatusCode)
	}
	if n := len(s.ModelRequests()); n != 0 {
		t.Errorf("model requests %d", n)
	}
	if n := len(s.Requests()); n != 6 {
		t.Errorf("requests %d", n)
	}
}

func TestQueueMatchAndDefault(t *testing.T) {
	yes := true
	s := start(t, Options{Default: &Reply{Text: "fallback"}})
	s.Push(Reply{Text: "main loop", Match: &Match{Tools: &yes}}, Reply{Text: "second"})
	text := func(body map[string]any) string {
		body["model"] = "m"
		resp := post(t, s.URL()+"/v1/messages", body)
		defer resp.Body.Close()
		var m struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return m.Content[0].Text
	}
	withTools := map[string]any{"tools": []any{map[string]any{"name": "Bash"}}}
	// A side request without tools skips the tools-only reply and takes the next one.
	if got := text(map[string]any{}); got != "second" {
		t.Errorf("side request got %q", got)
	}
	if got := text(withTools); got != "main loop" {
		t.Errorf("main request got %q", got)
	}
	if got := text(withTools); got != "fallback" {
		t.Errorf("exhausted got %q", got)
	}
	reqs := s.Requests()
	if !reqs[0].Scripted || !reqs[1].Scripted || reqs[2].Scripted || s.Pending() != 0 {
		t.Errorf("scripted flags %v %v %v", reqs[0].Scripted, reqs[1].Scripted, reqs[2].Scripted)
	}

	s.SetHandler(func(r *Request) (Reply, bool) {
		if strings.Contains(string(r.Body), "magic") {
			return Text("from handler"), true
		}
		return Reply{}, false
	})
	s.Push(Text("queued"))
	if got := text(map[string]any{"x": "magic"}); got != "from handler" {
		t.Errorf("handler got %q", got)
	}
	if got := text(map[string]any{}); got != "queued" {
		t.Errorf("fallthrough got %q", got)
	}
	s.Reset()
	if len(s.Requests()) != 0 || s.Pending() != 0 {
		t.Error("reset")
	}
}

func TestRecordsGzipBodyAndHeaders(t *testing.T) {
	s := start(t, Options{})
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write([]byte(`{"model":"m","stream":false,"input":"hello"}`))
	_ = zw.Close()
	req, _ := http.NewRequest(http.MethodPost, s.URL()+"/v1/responses?x=1", &buf)
	req.Header.Set("Content-Encoding", "gzip")
	req.Header.Set("Authorization", "Bearer test")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	r := s.Requests()[0]
	var body map[string]any
	if err := r.JSON(&body); err != nil || body["input"] != "hello" {
		t.Errorf("body %s %v", r.Body, err)
	}
	if r.Header.Get("Authorization") != "Bearer test" || r.Query != "x=1" || r.Model != "m" || r.Reply == nil || r.Reply.Text != "ok" {
		t.Errorf("%+v", r)
	}
	b, err := json.Marshal(r)
	if err != nil || !bytes.Contains(b, []byte(`"body":{"model":"m"`)) {
		t.Errorf("marshal %s %v", b, err)
	}
}

func TestFaultHTTPErrors(t *testing.T) {
	s := start(t, Options{})
	s.Push(
		Reply{Fault: &Fault{Kind: FaultHTTP500}},
		Reply{Fault: &Fault{Kind: FaultRateLimit, RetryAfter: "3"}},
		Reply{Fault: &Fault{Kind: FaultStatus, Status: 529, Message: "overloaded"}},
		Text("after faults"),
	)
	resp := post(t, s.URL()+"/v1/messages", map[string]any{"model": "m", "stream": true})
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 500 || !strings.Contains(string(b), `"type":"api_error"`) {
		t.Errorf("500: %d %s", resp.StatusCode, b)
	}
	resp = post(t, s.URL()+"/v1/chat/completions", map[string]any{"model": "m", "stream": true})
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "3" || resp.Header.Get("retry-after-ms") != "3000" || !strings.Contains(string(b), "rate_limit") {
		t.Errorf("429: %d %v %s", resp.StatusCode, resp.Header, b)
	}
	resp = post(t, s.URL()+"/v1/messages", map[string]any{"model": "m"})
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 529 || !strings.Contains(string(b), "overloaded") {
		t.Errorf("529: %d %s", resp.StatusCode, b)
	}
	resp = post(t, s.URL()+"/v1/messages", map[string]any{"model": "m"})
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "after faults") {
		t.Errorf("recovery: %d %s", resp.StatusCode, b)
	}
}

func TestFaultMalformed(t *testing.T) {
	s := start(t, Options{})
	s.Push(Reply{Fault: &Fault{Kind: FaultMalformed}}, Reply{Fault: &Fault{Kind: FaultMalformed}})
	resp := post(t, s.URL()+"/v1/responses", map[string]any{"model": "m", "stream": true})
	_, err := readSSE(t, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || err == nil {
		t.Errorf("malformed stream parsed fine: %d %v", resp.StatusCode, err)
	}
	resp = post(t, s.URL()+"/v1/responses", map[string]any{"model": "m"})
	var v any
	err = json.NewDecoder(resp.Body).Decode(&v)
	resp.Body.Close()
	if err == nil {
		t.Error("malformed JSON decoded fine")
	}
}

func TestFaultDrop(t *testing.T) {
	s := start(t, Options{})
	s.Push(Reply{Text: "this will never finish", Fault: &Fault{Kind: FaultDrop, AfterEvents: 3}}, Reply{Text: "x", Fault: &Fault{Kind: FaultDrop}})
	resp := post(t, s.URL()+"/v1/messages", map[string]any{"model": "m", "stream": true})
	evs, err := readSSE(t, resp.Body)
	resp.Body.Close()
	if err == nil || len(evs) != 3 {
		t.Errorf("drop: %d events, err %v", len(evs), err)
	}
	resp = post(t, s.URL()+"/v1/chat/completions", map[string]any{"model": "m"})
	_, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("non-stream drop: %v", err)
	}
}

func TestFaultDelay(t *testing.T) {
	s := start(t, Options{})
	s.Push(Reply{Text: "slow", Fault: &Fault{Kind: FaultDelay, Delay: 2 * time.Second}}, Reply{Text: "slowish", Fault: &Fault{Kind: FaultDelay, Delay: 100 * time.Millisecond}})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"/v1/messages", strings.NewReader(`{"model":"m","stream":true}`))
	t0 := time.Now()
	_, err := http.DefaultClient.Do(req)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(t0) > time.Second {
		t.Errorf("too-slow: %v after %v", err, time.Since(t0))
	}
	t0 = time.Now()
	resp := post(t, s.URL()+"/v1/messages", map[string]any{"model": "m"})
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if time.Since(t0) < 100*time.Millisecond || !strings.Contains(string(b), "slowish") {
		t.Errorf("delay: %v %s", time.Since(t0), b)
	}
}

func TestChunkDelay(t *testing.T) {
	s := start(t, Options{ChunkSize: 4})
	s.Push(Reply{Text: "one two three four", ChunkDelay: 20 * time.Millisecond})
	t0 := time.Now()
	resp := post(t, s.URL()+"/v1/chat/completions", map[string]any{"model": "m", "stream": true})
	evs, err := readSSE(t, resp.Body)
	resp.Body.Close()
	if err != nil || len(evs) < 6 || time.Since(t0) < time.Duration(len(evs)-1)*20*time.Millisecond {
		t.Errorf("%d events in %v, %v", len(evs), time.Since(t0), err)
	}
}

func TestScriptJSONAndControl(t *testing.T) {
	sc, err := ParseScript([]byte(`{"model":"mm","default":{"text":"dflt"},"replies":[
		{"text":"a","usage":{"input_tokens":1,"output_tokens":2}},
		{"tool_calls":[{"name":"Bash","input":{"command":"ls"}}],"match":{"tools":true,"api":"anthropic"}},
		{"fault":{"kind":"delay","delay":"1.5s"},"chunk_delay":"10ms"},
		{"fault":{"kind":"ratelimit","retry_after":"2"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if sc.Model != "mm" || sc.Default.Text != "dflt" || len(sc.Replies) != 4 ||
		sc.Replies[0].Usage.OutputTokens != 2 || string(sc.Replies[1].ToolCalls[0].Input) != `{"command":"ls"}` ||
		!*sc.Replies[1].Match.Tools || sc.Replies[1].Match.API != APIAnthropic ||
		sc.Replies[2].Fault.Delay != 1500*time.Millisecond || sc.Replies[2].ChunkDelay != 10*time.Millisecond ||
		sc.Replies[3].Fault.RetryAfter != "2" {
		t.Errorf("%+v", sc)
	}
	arr, err := ParseScript([]byte(`[{"text":"x"},{"text":"y"}]`))
	if err != nil || len(arr.Replies) != 2 {
		t.Errorf("array: %+v %v", arr, err)
	}
	one, err := ParseScript([]byte(`{"text":"solo"}`))
	if err != nil || len(one.Replies) != 1 || one.Replies[0].Text != "solo" {
		t.Errorf("single: %+v %v", one, err)
	}

	s := start(t, Options{Control: true})
	resp := post(t, s.URL()+"/_control/replies", []any{map[string]any{"text": "pushed"}})
	resp.Body.Close()
	if s.Pending() != 1 {
		t.Fatalf("pending %d", s.Pending())
	}
	resp = post(t, s.URL()+"/v1/messages", map[string]any{"model": "m"})
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "pushed") {
		t.Errorf("%s", b)
	}
	resp, _ = http.Get(s.URL() + "/_control/requests")
	var reqs []map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&reqs)
	resp.Body.Close()
	if len(reqs) != 1 || reqs[0]["api"] != "anthropic" || reqs[0]["body"].(map[string]any)["model"] != "m" {
		t.Errorf("requests %v", reqs)
	}
	resp = post(t, s.URL()+"/_control/reset", nil)
	resp.Body.Close()
	if len(s.Requests()) != 0 {
		t.Error("reset")
	}
}

func TestSplit(t *testing.T) {
	s := "héllo wörld, ünïcode ✓ text that is long enough to split several times"
	parts := split(s, 5)
	if strings.Join(parts, "") != s || len(parts) < 5 {
		t.Errorf("%q", parts)
	}
	for _, p := range parts {
		if !utf8.ValidString(p) {
			t.Errorf("invalid utf-8 piece %q", p)
		}
	}
	if split("", 4) != nil {
		t.Error("empty")
	}
}

func TestNonLoopbackRefused(t *testing.T) {
	if _, err := Start(Options{Addr: "0.0.0.0:0"}); err == nil {
		t.Error("listening on 0.0.0.0 allowed")
	}
}
