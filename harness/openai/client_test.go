package openai

import (
	"context"
	"encoding/json"
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

const testKey = "sk-test-very-secret"

func startServer(t *testing.T) *modelserver.Server {
	t.Helper()
	s := modelserver.New(modelserver.Options{})
	t.Cleanup(func() { s.Close() })
	return s
}

// testHarness points a Harness at s; its waits between retries are
// recorded, not slept.
func testHarness(s *modelserver.Server, edit func(*Config)) (*Harness, *[]time.Duration) {
	cfg := Config{BaseURL: s.URL() + "/v1", APIKey: testKey, Model: "test-model", StallTimeout: 2 * time.Second}
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

func TestStreamedReply(t *testing.T) {
	s := startServer(t)
	const answer = "Hello there, this answer arrives in several small pieces."
	s.Push(modelserver.Reply{Text: answer, Model: "gpt-test-2", Usage: modelserver.Usage{InputTokens: 12, OutputTokens: 7, CacheReadTokens: 3}})
	h, _ := testHarness(s, nil)

	ev, err := turn(t, h, harness.TurnRequest{Prefix: []model.Message{text(model.User, "earlier"), text(model.Assistant, "sure")}, Input: "hi"})
	require.NoError(t, err)

	require.Equal(t, harness.EventMessage, ev.all[0].Kind, "the user message comes first")
	assert.Equal(t, text(model.User, "hi").Parts, ev.all[0].Message.Parts)
	deltas := ev.deltas()
	assert.Greater(t, len(deltas), 3, "text streams in pieces")
	assert.Equal(t, answer, strings.Join(deltas, ""), "deltas arrive in order")

	msgs := ev.messages()
	require.Len(t, msgs, 2)
	last := ev.all[len(ev.all)-1]
	require.Equal(t, harness.EventMessage, last.Kind, "the assistant message comes last")
	m := last.Message
	assert.Equal(t, model.Assistant, m.Role)
	assert.Equal(t, []model.Part{{Kind: model.Text, Text: answer}}, m.Parts)
	assert.Equal(t, "gpt-test-2", m.Model)
	assert.Equal(t, model.Usage{InputTokens: 12, OutputTokens: 7, CacheReadTokens: 3}, m.Usage)
	assert.Equal(t, "chatcmpl-tine0001", m.NativeID)
	assert.False(t, m.Time.IsZero())

	reqs := s.ModelRequests()
	require.Len(t, reqs, 1)
	assert.Equal(t, "Bearer "+testKey, reqs[0].Header.Get("Authorization"))
	assert.Equal(t, "test-model", reqs[0].Model)
	var body map[string]any
	require.NoError(t, reqs[0].JSON(&body))
	assert.Equal(t, true, body["stream"])
	assert.Equal(t, map[string]any{"include_usage": true}, body["stream_options"])
}

func TestToolCallReply(t *testing.T) {
	s := startServer(t)
	s.Push(modelserver.Reply{Text: "Let me look.", ToolCalls: []modelserver.ToolCall{
		modelserver.Call("bash", map[string]any{"command": "ls -la /tmp/some/long/path"}),
		{ID: "call_custom", Name: "read", Input: json.RawMessage(`{"path":"main.go","limit":20}`)},
	}})
	h, _ := testHarness(s, nil)

	ev, err := turn(t, h, harness.TurnRequest{Input: "look around", Model: "other-model"})
	require.NoError(t, err)
	msgs := ev.messages()
	require.Len(t, msgs, 2)
	m := msgs[1]
	assert.Equal(t, "other-model", m.Model, "the request's model wins over the config's")
	calls := m.ToolCalls()
	require.Len(t, calls, 2)
	assert.Equal(t, "call_tine0001_0", calls[0].ToolCallID)
	assert.Equal(t, "bash", calls[0].ToolName)
	assert.JSONEq(t, `{"command":"ls -la /tmp/some/long/path"}`, calls[0].ToolInput)
	assert.Equal(t, "call_custom", calls[1].ToolCallID)
	assert.Equal(t, "read", calls[1].ToolName)
	assert.JSONEq(t, `{"path":"main.go","limit":20}`, calls[1].ToolInput)
	assert.Equal(t, model.Text, m.Parts[0].Kind)
	assert.Equal(t, "Let me look.", m.Parts[0].Text)
}

func TestRequestShape(t *testing.T) {
	s := startServer(t)
	h, _ := testHarness(s, nil)
	prefix := []model.Message{
		text(model.System, "be brief"),
		{Role: model.User, Parts: []model.Part{
			{Kind: model.Text, Text: "what is here?"},
			{Kind: model.Image, Raw: `{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}`},
		}},
		{Role: model.Assistant, Parts: []model.Part{
			{Kind: model.Thinking, Text: "secret thoughts"},
			{Kind: model.Text, Text: "checking"},
			{Kind: model.ToolCall, ToolCallID: "c1", ToolName: "bash", ToolInput: `{"command":"ls"}`},
			{Kind: model.ToolCall, ToolCallID: "c2", ToolName: "cat", ToolInput: `{"path":"x"}`},
		}},
		{Role: model.Tool, Parts: []model.Part{{Kind: model.ToolResult, ToolCallID: "c1", Text: "a.go\n"}}},
		{Role: model.Tool, Parts: []model.Part{{Kind: model.ToolResult, ToolCallID: "c2", Text: "no such file", IsError: true}}},
		text(model.Assistant, "there is a.go"),
		// Left unanswered, the way this harness ends a turn with calls.
		{Role: model.Assistant, Parts: []model.Part{{Kind: model.ToolCall, ToolCallID: "c3", ToolName: "bash", ToolInput: ""}}},
	}
	_, err := turn(t, h, harness.TurnRequest{Prefix: prefix, Input: "and now?"})
	require.NoError(t, err)

	reqs := s.ModelRequests()
	require.Len(t, reqs, 1)
	var body struct {
		Messages json.RawMessage `json:"messages"`
	}
	require.NoError(t, reqs[0].JSON(&body))
	assert.JSONEq(t, `[
		{"role":"system","content":"be brief"},
		{"role":"user","content":[
			{"type":"text","text":"what is here?"},
			{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]},
		{"role":"assistant","content":"checking","tool_calls":[
			{"id":"c1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}},
			{"id":"c2","type":"function","function":{"name":"cat","arguments":"{\"path\":\"x\"}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"a.go\n"},
		{"role":"tool","tool_call_id":"c2","content":"Error: no such file"},
		{"role":"assistant","content":"there is a.go"},
		{"role":"assistant","content":null,"tool_calls":[
			{"id":"c3","type":"function","function":{"name":"bash","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"c3","content":"Error: `+notRun+`"},
		{"role":"user","content":"and now?"}
	]`, string(body.Messages))
	assert.NotContains(t, string(reqs[0].Body), "secret thoughts")
}

func TestServerErrorThenSuccess(t *testing.T) {
	s := startServer(t)
	s.Push(modelserver.Reply{Fault: &modelserver.Fault{Kind: modelserver.FaultHTTP500}}, modelserver.Text("recovered"))
	h, waits := testHarness(s, nil)

	ev, err := turn(t, h, harness.TurnRequest{Input: "hi"})
	require.NoError(t, err)
	assert.Equal(t, "recovered", ev.messages()[1].Parts[0].Text)
	assert.Len(t, s.ModelRequests(), 2)
	require.Len(t, *waits, 1)
	assert.GreaterOrEqual(t, (*waits)[0], 500*time.Millisecond, "backoff when the server names no wait")
}

func TestRateLimitHonoursRetryAfter(t *testing.T) {
	s := startServer(t)
	s.Push(modelserver.Reply{Fault: &modelserver.Fault{Kind: modelserver.FaultRateLimit, RetryAfter: "1"}}, modelserver.Text("after the wait"))
	h, waits := testHarness(s, nil)

	ev, err := turn(t, h, harness.TurnRequest{Input: "hi"})
	require.NoError(t, err)
	assert.Equal(t, "after the wait", ev.messages()[1].Parts[0].Text)
	assert.Equal(t, []time.Duration{time.Second}, *waits)
}

func TestRetryWaitIsCappedAndReal(t *testing.T) {
	s := startServer(t)
	s.Push(modelserver.Reply{Fault: &modelserver.Fault{Kind: modelserver.FaultRateLimit, RetryAfter: "30"}}, modelserver.Text("ok"))
	h, _ := testHarness(s, func(c *Config) { c.MaxRetryWait = 20 * time.Millisecond })
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
	h, waits := testHarness(s, nil)

	_, err := turn(t, h, harness.TurnRequest{Input: "hi"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "HTTP 429")
	assert.Contains(t, err.Error(), "gave up after 4 attempts")
	assert.Contains(t, err.Error(), "slow down [redacted]")
	assert.NotContains(t, err.Error(), testKey)
	assert.Len(t, s.ModelRequests(), 4)
	assert.Len(t, *waits, 3)
}

func TestClientErrorIsNotRetried(t *testing.T) {
	s := startServer(t)
	s.Push(modelserver.Reply{Fault: &modelserver.Fault{Kind: modelserver.FaultStatus, Status: http.StatusNotFound, Message: "The model `nope` does not exist"}})
	h, _ := testHarness(s, nil)

	_, err := turn(t, h, harness.TurnRequest{Input: "hi"})
	require.Error(t, err)
	assert.Equal(t, "openai: HTTP 404 from "+s.Addr()+": The model `nope` does not exist (server_error)", err.Error())
	assert.Len(t, s.ModelRequests(), 1)
}

func TestMalformedStream(t *testing.T) {
	s := startServer(t)
	s.Push(modelserver.Reply{Fault: &modelserver.Fault{Kind: modelserver.FaultMalformed}})
	h, _ := testHarness(s, nil)

	_, err := turn(t, h, harness.TurnRequest{Input: "hi"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "malformed stream from "+s.Addr())
	assert.Len(t, s.ModelRequests(), 1, "a garbage stream is not retried")
}

func TestDroppedMidStream(t *testing.T) {
	s := startServer(t)
	s.Push(modelserver.Reply{Text: "this text is cut off before it ends", Fault: &modelserver.Fault{Kind: modelserver.FaultDrop, AfterEvents: 3}})
	h, _ := testHarness(s, nil)

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
	s.Push(modelserver.Reply{Text: "lost", Fault: &modelserver.Fault{Kind: modelserver.FaultDrop, AfterEvents: 1}}, modelserver.Text("second try"))
	h, _ := testHarness(s, nil)

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
			h, _ := testHarness(s, func(c *Config) { c.StallTimeout = 150 * time.Millisecond })

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
	s.Push(modelserver.Reply{Text: "a slow answer that takes a long while to arrive", ChunkDelay: 400 * time.Millisecond})
	h, _ := testHarness(s, nil)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cancelledAt time.Time
	err := h.Turn(ctx, harness.TurnRequest{Input: "hi"}, func(ev harness.Event) {
		if ev.Kind == harness.EventDelta && cancelledAt.IsZero() {
			cancelledAt = time.Now()
			cancel()
		}
	})
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, cancelledAt.IsZero(), "cancelled after text arrived")
	assert.Less(t, time.Since(cancelledAt), 200*time.Millisecond, "returns without waiting for the next chunk")
}

func TestCancelDuringRetryWait(t *testing.T) {
	s := startServer(t)
	s.Push(modelserver.Reply{Fault: &modelserver.Fault{Kind: modelserver.FaultRateLimit, RetryAfter: "10"}})
	h, _ := testHarness(s, nil)
	h.api.Sleep = apihttp.Sleep

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := h.Turn(ctx, harness.TurnRequest{Input: "hi"}, func(harness.Event) {})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), time.Second)
}

func TestNoModel(t *testing.T) {
	h := New(Config{BaseURL: "http://127.0.0.1:1"})
	err := h.Turn(context.Background(), harness.TurnRequest{Input: "hi"}, func(harness.Event) {})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--model")
}

func TestNothingToSend(t *testing.T) {
	h := New(Config{BaseURL: "http://127.0.0.1:1", Model: "m"})
	err := h.Turn(context.Background(), harness.TurnRequest{}, func(harness.Event) {})
	require.ErrorContains(t, err, "nothing to send")
}

func TestCost(t *testing.T) {
	h := New(Config{})
	usd, ok := h.Cost("gpt-4o-2024-08-06", model.Usage{InputTokens: 1_000_000, OutputTokens: 100_000, CacheReadTokens: 1_000_000})
	require.True(t, ok)
	assert.InDelta(t, 2.50+1.00+1.25, usd, 1e-9)
	_, ok = h.Cost("gpt-4o-mini-2024-07-18", model.Usage{})
	assert.True(t, ok)
	for _, name := range []string{"llama3.2", "gpt-4o-turbo-preview", "openai/gpt-4o", ""} {
		_, ok := h.Cost(name, model.Usage{InputTokens: 1})
		assert.False(t, ok, name)
	}
}
