package anthropic

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/internal/apihttp"
	"tine/internal/modelserver"
	"tine/model"
)

const testKey = "sk-ant-test-very-secret"

func startServer(t *testing.T) *modelserver.Server {
	t.Helper()
	s := modelserver.New(modelserver.Options{})
	t.Cleanup(func() { s.Close() })
	return s
}

// testHarness points a Harness at baseURL; its waits between retries are
// recorded, not slept.
func testHarness(baseURL string, edit func(*Config)) (*Harness, *[]time.Duration) {
	cfg := Config{BaseURL: baseURL, APIKey: testKey, Model: "claude-test", StallTimeout: 2 * time.Second}
	if edit != nil {
		edit(&cfg)
	}
	h := New(cfg)
	var waits []time.Duration
	h.api.Sleep = func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		return ctx.Err()
	}
	return h, &waits
}

type events struct {
	mu  sync.Mutex
	all []harness.Event
}

func (e *events) emit(ev harness.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, ev)
}

func (e *events) deltas() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, ev := range e.all {
		if ev.Kind == harness.EventDelta {
			out = append(out, ev.Delta)
		}
	}
	return out
}

func (e *events) messages() []model.Message {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []model.Message
	for _, ev := range e.all {
		if ev.Kind == harness.EventMessage {
			out = append(out, ev.Message)
		}
	}
	return out
}

func turn(t *testing.T, h *Harness, req harness.TurnRequest) (*events, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ev := &events{}
	return ev, h.Turn(ctx, req, ev.emit)
}

func text(role model.Role, s string) model.Message {
	return model.Message{Role: role, Parts: []model.Part{{Kind: model.Text, Text: s}}}
}

func fault(kind modelserver.FaultKind) modelserver.Reply {
	return modelserver.Reply{Fault: &modelserver.Fault{Kind: kind}}
}

func TestStreamedReply(t *testing.T) {
	s := startServer(t)
	const answer = "Hello there, this answer arrives in several small pieces."
	s.Push(modelserver.Reply{Thinking: "hmm, let me see", Text: answer, Model: "claude-x",
		Usage: modelserver.Usage{InputTokens: 12, OutputTokens: 7, CacheReadTokens: 30, CacheWriteTokens: 5}})
	h, _ := testHarness(s.URL(), nil)

	ev, err := turn(t, h, harness.TurnRequest{Input: "hi"})
	require.NoError(t, err)

	require.Equal(t, harness.EventMessage, ev.all[0].Kind, "the user message comes first")
	assert.Equal(t, text(model.User, "hi").Parts, ev.all[0].Message.Parts)
	deltas := ev.deltas()
	assert.Greater(t, len(deltas), 3, "text streams in pieces")
	assert.Equal(t, answer, strings.Join(deltas, ""), "deltas arrive in order, thinking is not among them")

	last := ev.all[len(ev.all)-1]
	require.Equal(t, harness.EventMessage, last.Kind, "the assistant message comes last")
	m := last.Message
	assert.Equal(t, model.Assistant, m.Role)
	assert.Equal(t, []model.Part{{Kind: model.Thinking, Text: "hmm, let me see"}, {Kind: model.Text, Text: answer}}, m.Parts)
	assert.Equal(t, "claude-x", m.Model)
	assert.Equal(t, model.Usage{InputTokens: 12, OutputTokens: 7, CacheReadTokens: 30, CacheWriteTokens: 5}, m.Usage)
	assert.Equal(t, "msg_tine0001", m.NativeID)
	assert.False(t, m.Time.IsZero())

	reqs := s.ModelRequests()
	require.Len(t, reqs, 1)
	assert.Equal(t, "/v1/messages", reqs[0].Path)
	assert.Equal(t, testKey, reqs[0].Header.Get("x-api-key"))
	assert.Equal(t, "2023-06-01", reqs[0].Header.Get("anthropic-version"))
	var body map[string]any
	require.NoError(t, reqs[0].JSON(&body))
	assert.Equal(t, true, body["stream"])
	assert.Equal(t, "claude-test", body["model"])
	assert.EqualValues(t, DefaultMaxTokens, body["max_tokens"])
}

func TestToolCallReply(t *testing.T) {
	s := startServer(t)
	s.Push(modelserver.Reply{Text: "Let me look.", ToolCalls: []modelserver.ToolCall{
		modelserver.Call("bash", map[string]any{"command": "ls -la /tmp/some/long/path"}),
		{ID: "toolu_custom", Name: "read", Input: json.RawMessage(`{"path":"main.go","limit":20}`)},
		modelserver.Call("noargs", nil),
	}})
	h, _ := testHarness(s.URL()+"/v1", nil)

	ev, err := turn(t, h, harness.TurnRequest{Input: "look around", Model: "other-model"})
	require.NoError(t, err)
	msgs := ev.messages()
	require.Len(t, msgs, 2)
	m := msgs[1]
	assert.Equal(t, "other-model", m.Model)
	require.Equal(t, model.Text, m.Parts[0].Kind)
	calls := m.ToolCalls()
	require.Len(t, calls, 3)
	assert.Equal(t, "toolu_tine0001_0", calls[0].ToolCallID)
	assert.Equal(t, "bash", calls[0].ToolName)
	assert.JSONEq(t, `{"command":"ls -la /tmp/some/long/path"}`, calls[0].ToolInput)
	assert.Equal(t, "toolu_custom", calls[1].ToolCallID)
	assert.JSONEq(t, `{"path":"main.go","limit":20}`, calls[1].ToolInput)
	assert.Equal(t, "noargs", calls[2].ToolName)
	assert.JSONEq(t, `{}`, calls[2].ToolInput)
	assert.Equal(t, "/v1/messages", s.ModelRequests()[0].Path, "a base URL ending in /v1 is not doubled")
}

func TestRequestShape(t *testing.T) {
	s := startServer(t)
	h, _ := testHarness(s.URL(), nil)
	prefix := []model.Message{
		text(model.System, "be brief"),
		text(model.User, "what is here?"),
		text(model.User, "and be quick"),
		{Role: model.Assistant, Parts: []model.Part{
			{Kind: model.Thinking, Text: "secret thoughts"},
			{Kind: model.Text, Text: "checking"},
			{Kind: model.ToolCall, ToolCallID: "c1", ToolName: "bash", ToolInput: `{"command":"ls"}`},
			{Kind: model.ToolCall, ToolCallID: "c2", ToolName: "mcp.read", ToolInput: `*** Begin Patch`},
		}},
		{Role: model.Tool, Parts: []model.Part{{Kind: model.ToolResult, ToolCallID: "c1", Text: "a.go\n"}}},
		{Role: model.Tool, Parts: []model.Part{{Kind: model.ToolResult, ToolCallID: "c2", Text: "no such file", IsError: true}}},
		{Role: model.User, Parts: []model.Part{
			{Kind: model.Text, Text: "look at this"},
			{Kind: model.Image, Raw: `{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}`},
		}},
		text(model.Assistant, "there is a.go"),
		// Left unanswered, the way this harness ends a turn with calls.
		{Role: model.Assistant, Parts: []model.Part{{Kind: model.ToolCall, ToolCallID: "c3", ToolName: "bash"}}},
	}
	_, err := turn(t, h, harness.TurnRequest{Prefix: prefix, Input: "and now?"})
	require.NoError(t, err)

	reqs := s.ModelRequests()
	require.Len(t, reqs, 1)
	var body struct {
		System   string          `json:"system"`
		Messages json.RawMessage `json:"messages"`
		Tools    json.RawMessage `json:"tools"`
	}
	require.NoError(t, reqs[0].JSON(&body))
	assert.Equal(t, "be brief", body.System)
	assert.JSONEq(t, `[
		{"role":"user","content":[
			{"type":"text","text":"what is here?"},
			{"type":"text","text":"and be quick"}]},
		{"role":"assistant","content":[
			{"type":"text","text":"checking"},
			{"type":"tool_use","id":"c1","name":"bash","input":{"command":"ls"}},
			{"type":"tool_use","id":"c2","name":"mcp_read","input":{"input":"*** Begin Patch"}}]},
		{"role":"user","content":[
			{"type":"tool_result","tool_use_id":"c1","content":"a.go\n"},
			{"type":"tool_result","tool_use_id":"c2","content":"no such file","is_error":true},
			{"type":"text","text":"look at this"},
			{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]},
		{"role":"assistant","content":[
			{"type":"text","text":"there is a.go"},
			{"type":"tool_use","id":"c3","name":"bash","input":{}}]},
		{"role":"user","content":[
			{"type":"tool_result","tool_use_id":"c3","content":"`+notRun+`","is_error":true},
			{"type":"text","text":"and now?"}]}
	]`, string(body.Messages))
	assert.JSONEq(t, `[
		{"name":"bash","description":"A tool used earlier in this conversation.","input_schema":{"type":"object"}},
		{"name":"mcp_read","description":"A tool used earlier in this conversation.","input_schema":{"type":"object"}}
	]`, string(body.Tools))
	assert.NotContains(t, string(reqs[0].Body), "secret thoughts")
}

func TestServerErrorThenSuccess(t *testing.T) {
	s := startServer(t)
	s.Push(fault(modelserver.FaultHTTP500), modelserver.Text("recovered"))
	h, waits := testHarness(s.URL(), nil)

	ev, err := turn(t, h, harness.TurnRequest{Input: "hi"})
	require.NoError(t, err)
	assert.Equal(t, "recovered", ev.messages()[1].Parts[0].Text)
	assert.Len(t, s.ModelRequests(), 2)
	require.Len(t, *waits, 1)
	assert.GreaterOrEqual(t, (*waits)[0], 500*time.Millisecond, "backoff when the server names no wait")
}

func TestOverloadedIsRetried(t *testing.T) {
	s := startServer(t)
	s.Push(modelserver.Reply{Fault: &modelserver.Fault{Kind: modelserver.FaultStatus, Status: 529, Message: "Overloaded"}}, modelserver.Text("ok now"))
	h, _ := testHarness(s.URL(), nil)

	ev, err := turn(t, h, harness.TurnRequest{Input: "hi"})
	require.NoError(t, err)
	assert.Equal(t, "ok now", ev.messages()[1].Parts[0].Text)
	assert.Len(t, s.ModelRequests(), 2)
}

func TestRateLimitHonoursRetryAfter(t *testing.T) {
	s := startServer(t)
	s.Push(modelserver.Reply{Fault: &modelserver.Fault{Kind: modelserver.FaultRateLimit, RetryAfter: "1"}}, modelserver.Text("after the wait"))
	h, waits := testHarness(s.URL(), nil)

	ev, err := turn(t, h, harness.TurnRequest{Input: "hi"})
	require.NoError(t, err)
	assert.Equal(t, "after the wait", ev.messages()[1].Parts[0].Text)
	assert.Equal(t, []time.Duration{time.Second}, *waits)
}

func TestRetryWaitIsCappedAndReal(t *testing.T) {
	s := startServer(t)
	s.Push(modelserver.Reply{Fault: &modelserver.Fault{Kind: modelserver.FaultRateLimit, RetryAfter: "30"}}, modelserver.Text("ok"))
	h, _ := testHarness(s.URL(), func(c *Config) { c.MaxRetryWait = 20 * time.Millisecond })
	h.api.Sleep = apihttp.Sleep

	start := time.Now()
	_, err := turn(t, h, harness.TurnRequest{Input: "hi"})
	require.NoError(t, err)
	assert.Less(t, time.Since(start), time.Second, "a 30 s retry-after is cut to MaxRetryWait")
}

func TestRateLimitForever(t *testing.T) {
	s := startServer(t)
	for range 10 {
		s.Push(modelserver.Reply{Fault: &modelserver.Fault{Kind: modelserver.FaultRateLimit, Message: "slow down " + testKey}})
	}
	h, waits := testHarness(s.URL(), func(c *Config) { c.MaxRetries = 2 })

	_, err := turn(t, h, harness.TurnRequest{Input: "hi"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "HTTP 429")
	assert.Contains(t, err.Error(), "rate_limit_error")
	assert.Contains(t, err.Error(), "gave up after 3 attempts")
	assert.Contains(t, err.Error(), "slow down [redacted]")
	assert.NotContains(t, err.Error(), testKey)
	assert.Len(t, s.ModelRequests(), 3)
	assert.Len(t, *waits, 2)
}

func TestClientErrorIsNotRetried(t *testing.T) {
	s := startServer(t)
	s.Push(modelserver.Reply{Fault: &modelserver.Fault{Kind: modelserver.FaultStatus, Status: 400, Message: "max_tokens: must be positive"}})
	h, _ := testHarness(s.URL(), nil)

	_, err := turn(t, h, harness.TurnRequest{Input: "hi"})
	require.Error(t, err)
	assert.Equal(t, "anthropic: HTTP 400 from "+s.Addr()+": max_tokens: must be positive (invalid_request_error)", err.Error())
	assert.Len(t, s.ModelRequests(), 1)
}

func TestMalformedStream(t *testing.T) {
	s := startServer(t)
	s.Push(fault(modelserver.FaultMalformed))
	h, _ := testHarness(s.URL(), nil)

	_, err := turn(t, h, harness.TurnRequest{Input: "hi"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "malformed stream from "+s.Addr())
	assert.Len(t, s.ModelRequests(), 1, "a garbage stream is not retried")
}

func TestDroppedMidStream(t *testing.T) {
	s := startServer(t)
	// message_start, ping, content_block_start, two text deltas, then cut.
	s.Push(modelserver.Reply{Text: "this text is cut off before it ends", Fault: &modelserver.Fault{Kind: modelserver.FaultDrop, AfterEvents: 5}})
	h, _ := testHarness(s.URL(), nil)

	ev, err := turn(t, h, harness.TurnRequest{Input: "hi"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "stream ended early from "+s.Addr())
	assert.Contains(t, err.Error(), "kept as a partial answer")
	assert.NotEmpty(t, ev.deltas(), "text had arrived")
	assertPartialKept(t, ev)
	assert.Len(t, s.ModelRequests(), 1, "not retried once text was shown")
}

func TestDroppedBeforeTextIsRetried(t *testing.T) {
	s := startServer(t)
	s.Push(modelserver.Reply{Text: "lost", Fault: &modelserver.Fault{Kind: modelserver.FaultDrop, AfterEvents: 2}}, modelserver.Text("second try"))
	h, _ := testHarness(s.URL(), nil)

	ev, err := turn(t, h, harness.TurnRequest{Input: "hi"})
	require.NoError(t, err)
	assert.Equal(t, "second try", strings.Join(ev.deltas(), ""))
	assert.Len(t, s.ModelRequests(), 2)
}

func TestStallTimeout(t *testing.T) {
	for name, reply := range map[string]modelserver.Reply{
		"before headers": {Text: "late", Fault: &modelserver.Fault{Kind: modelserver.FaultDelay, Delay: 5 * time.Second}},
		"mid stream":     {Text: "one two three four five six", ChunkDelay: 5 * time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			s := startServer(t)
			s.Push(reply)
			h, _ := testHarness(s.URL(), func(c *Config) { c.StallTimeout = 150 * time.Millisecond })

			start := time.Now()
			_, err := turn(t, h, harness.TurnRequest{Input: "hi"})
			require.Error(t, err)
			assert.Contains(t, err.Error(), s.Addr()+" sent nothing for 150ms (stall timeout)")
			assert.Less(t, time.Since(start), time.Second)
			assert.Len(t, s.ModelRequests(), 1)
		})
	}
}

func TestCancelMidStream(t *testing.T) {
	s := startServer(t)
	s.Push(modelserver.Reply{Text: "a slow answer that takes a long while to arrive", ChunkDelay: 500 * time.Millisecond})
	h, _ := testHarness(s.URL(), nil)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// message_start arrives at once, the next event 500 ms later: cancel
	// in between.
	timer := time.AfterFunc(150*time.Millisecond, cancel)
	defer timer.Stop()
	start := time.Now()
	err := h.Turn(ctx, harness.TurnRequest{Input: "hi"}, func(harness.Event) {})
	require.ErrorIs(t, err, context.Canceled)
	assert.Less(t, time.Since(start), 400*time.Millisecond, "returns without waiting for the next event")
}

func TestCancelDuringRetryWait(t *testing.T) {
	s := startServer(t)
	s.Push(modelserver.Reply{Fault: &modelserver.Fault{Kind: modelserver.FaultRateLimit, RetryAfter: "10"}})
	h, _ := testHarness(s.URL(), nil)
	h.api.Sleep = apihttp.Sleep

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	timer := time.AfterFunc(100*time.Millisecond, cancel)
	defer timer.Stop()
	start := time.Now()
	err := h.Turn(ctx, harness.TurnRequest{Input: "hi"}, func(harness.Event) {})
	require.ErrorIs(t, err, context.Canceled)
	assert.Less(t, time.Since(start), time.Second, "the 10 s wait gives way to cancellation")
}

// sseServer serves one fixed SSE body on loopback, for events the model
// server does not script.
func sseServer(t *testing.T, body string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, body)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

func TestErrorEventMidStream(t *testing.T) {
	const start = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"m\",\"usage\":{\"input_tokens\":3}}}\n\n"
	const text = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"
	const overloaded = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"

	t.Run("after text: fails", func(t *testing.T) {
		url := sseServer(t, start+text+overloaded)
		h, waits := testHarness(url, nil)
		_, err := turn(t, h, harness.TurnRequest{Input: "hi"})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "reported overloaded_error mid-stream: Overloaded")
		assert.Empty(t, *waits)
	})
	t.Run("before text: retried", func(t *testing.T) {
		url := sseServer(t, start+overloaded)
		h, waits := testHarness(url, func(c *Config) { c.MaxRetries = 1 })
		_, err := turn(t, h, harness.TurnRequest{Input: "hi"})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "gave up after 2 attempts")
		assert.Len(t, *waits, 1)
	})
}

func TestNoModel(t *testing.T) {
	h := New(Config{BaseURL: "http://127.0.0.1:1"})
	err := h.Turn(context.Background(), harness.TurnRequest{Input: "hi"}, func(harness.Event) {})
	require.ErrorContains(t, err, "--model")
}

func TestCost(t *testing.T) {
	h := New(Config{})
	usd, ok := h.Cost("claude-sonnet-4-5-20250929", model.Usage{InputTokens: 1_000_000, OutputTokens: 100_000, CacheReadTokens: 1_000_000, CacheWriteTokens: 100_000})
	require.True(t, ok)
	// Over 200k prompt tokens: the long-context rate.
	assert.InDelta(t, 2*(3+0.30+0.375)+1.5*1.5, usd, 1e-9)
	usd, ok = h.Cost("claude-haiku-4-5", model.Usage{InputTokens: 1000, OutputTokens: 1000})
	require.True(t, ok)
	assert.InDelta(t, 0.006, usd, 1e-12)
	for _, name := range []string{"claude-sonnet-9", "claude-opus-4-5-preview", "gpt-4o", ""} {
		_, ok := h.Cost(name, model.Usage{InputTokens: 1})
		assert.False(t, ok, name)
	}
}
