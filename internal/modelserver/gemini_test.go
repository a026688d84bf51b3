package modelserver

import (
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// geminiBody is a request as Gemini CLI sends one: contents of parts with
// text, functionCall and functionResponse, and function declarations.
var geminiBody = map[string]any{
	"contents": []any{
		map[string]any{"role": "user", "parts": []any{map[string]any{"text": "run it"}}},
		map[string]any{"role": "model", "parts": []any{map[string]any{"functionCall": map[string]any{"id": "c1", "name": "run_shell_command", "args": map[string]any{"command": "ls"}}}}},
		map[string]any{"role": "user", "parts": []any{map[string]any{"functionResponse": map[string]any{"id": "c1", "name": "run_shell_command", "response": map[string]any{"output": "a.txt"}}}}},
	},
	"systemInstruction": map[string]any{"parts": []any{map[string]any{"text": "You are an agent."}}},
	"tools":             []any{map[string]any{"functionDeclarations": []any{map[string]any{"name": "run_shell_command"}, map[string]any{"name": "read_file"}}}},
}

type geminiResponse struct {
	Candidates []struct {
		Content struct {
			Role  string `json:"role"`
			Parts []struct {
				Text         *string `json:"text"`
				Thought      bool    `json:"thought"`
				FunctionCall *struct {
					ID   string          `json:"id"`
					Name string          `json:"name"`
					Args json.RawMessage `json:"args"`
				} `json:"functionCall"`
			} `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	UsageMetadata *struct {
		Prompt   int `json:"promptTokenCount"`
		Output   int `json:"candidatesTokenCount"`
		Cached   int `json:"cachedContentTokenCount"`
		Thoughts int `json:"thoughtsTokenCount"`
		Total    int `json:"totalTokenCount"`
	} `json:"usageMetadata"`
	ModelVersion string `json:"modelVersion"`
}

func TestGeminiStream(t *testing.T) {
	s := start(t, Options{})
	s.Push(Reply{
		Thinking:  "let me think about this",
		Text:      "I'll run a command for you now.",
		ToolCalls: []ToolCall{Call("run_shell_command", map[string]any{"command": "echo hi"})},
		Usage:     Usage{InputTokens: 11, OutputTokens: 22, CacheReadTokens: 33, ReasoningTokens: 5},
	})
	resp := post(t, s.URL()+"/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", geminiBody)
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content-type %q", ct)
	}
	evs, err := readSSE(t, resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var text, thinking string
	var calls int
	for i, e := range evs {
		if e.Name != "" || e.Data == "[DONE]" {
			t.Errorf("event %d: name %q data %q: the Gemini API's stream has neither names nor [DONE]", i, e.Name, e.Data)
		}
		r := decode[geminiResponse](t, e.Data)
		if len(r.Candidates) != 1 || r.Candidates[0].Content.Role != "model" || r.ModelVersion != "gemini-2.5-pro" {
			t.Fatalf("chunk %d: %s", i, e.Data)
		}
		last := i == len(evs)-1
		if (r.Candidates[0].FinishReason != "") != last || (r.UsageMetadata != nil) != last {
			t.Errorf("chunk %d of %d: finishReason %q, usage %v", i, len(evs), r.Candidates[0].FinishReason, r.UsageMetadata)
		}
		for _, p := range r.Candidates[0].Content.Parts {
			switch {
			case p.FunctionCall != nil:
				calls++
				if p.FunctionCall.Name != "run_shell_command" || p.FunctionCall.ID == "" || string(p.FunctionCall.Args) != `{"command":"echo hi"}` {
					t.Errorf("call %+v", p.FunctionCall)
				}
			case p.Thought:
				thinking += *p.Text
			case p.Text != nil:
				text += *p.Text
			}
		}
		if last {
			u := r.UsageMetadata
			if r.Candidates[0].FinishReason != "STOP" || u.Prompt != 44 || u.Output != 22 || u.Cached != 33 || u.Thoughts != 5 || u.Total != 71 {
				t.Errorf("last chunk %s", e.Data)
			}
		}
	}
	if text != "I'll run a command for you now." || thinking != "let me think about this" || calls != 1 || len(evs) < 4 {
		t.Errorf("text %q thinking %q calls %d in %d chunks", text, thinking, calls, len(evs))
	}
	reqs := s.ModelRequests()
	if len(reqs) != 1 || !reqs[0].Scripted || reqs[0].API != APIGemini || !reqs[0].Stream || reqs[0].Model != "gemini-2.5-pro" ||
		!reflect.DeepEqual(reqs[0].ToolNames, []string{"run_shell_command", "read_file"}) || reqs[0].Query != "alt=sse" {
		t.Errorf("recorded %+v", reqs)
	}
}

func TestGeminiNonStream(t *testing.T) {
	s := start(t, Options{})
	s.Push(Reply{Text: "hello", ToolCalls: []ToolCall{{ID: "fixed", Name: "read_file", Input: json.RawMessage(`{"file_path":"a"}`)}}, Usage: Usage{InputTokens: 5, OutputTokens: 6}})
	resp := post(t, s.URL()+"/v1beta/models/m1:generateContent", geminiBody)
	defer resp.Body.Close()
	var r geminiResponse
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	parts := r.Candidates[0].Content.Parts
	if len(parts) != 2 || *parts[0].Text != "hello" || parts[1].FunctionCall.ID != "fixed" || parts[1].FunctionCall.Name != "read_file" ||
		r.Candidates[0].FinishReason != "STOP" || r.UsageMetadata.Prompt != 5 || r.UsageMetadata.Output != 6 || r.UsageMetadata.Total != 11 || r.ModelVersion != "m1" {
		t.Errorf("%+v", r)
	}
	if reqs := s.ModelRequests(); len(reqs) != 1 || reqs[0].Stream || reqs[0].API != APIGemini {
		t.Errorf("recorded %+v", reqs)
	}
	// Not a model call: counting tokens, and a path that only looks like one.
	resp = post(t, s.URL()+"/v1beta/models/m1:countTokens", geminiBody)
	var ct map[string]int
	_ = json.NewDecoder(resp.Body).Decode(&ct)
	resp.Body.Close()
	if ct["totalTokens"] <= 0 {
		t.Errorf("countTokens %v", ct)
	}
	resp = post(t, s.URL()+"/v1beta/models/m1:embedContent", geminiBody)
	resp.Body.Close()
	if n := len(s.ModelRequests()); n != 1 {
		t.Errorf("%d model requests", n)
	}
}

func TestGeminiFaults(t *testing.T) {
	s := start(t, Options{})
	s.Push(
		Reply{Fault: &Fault{Kind: FaultHTTP500}},
		Reply{Fault: &Fault{Kind: FaultRateLimit, RetryAfter: "2"}},
		Reply{Fault: &Fault{Kind: FaultMalformed}},
		Reply{Text: "this will never finish", Fault: &Fault{Kind: FaultDrop, AfterEvents: 2}},
		Text("after faults"),
	)
	url := s.URL() + "/v1beta/models/m:streamGenerateContent?alt=sse"
	resp := post(t, url, geminiBody)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var e struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Status  string `json:"status"`
		} `json:"error"`
	}
	if resp.StatusCode != 500 || json.Unmarshal(b, &e) != nil || e.Error.Code != 500 || e.Error.Status != "INTERNAL" || e.Error.Message == "" {
		t.Errorf("500: %d %s", resp.StatusCode, b)
	}
	resp = post(t, url, geminiBody)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "2" || !strings.Contains(string(b), "RESOURCE_EXHAUSTED") {
		t.Errorf("429: %d %v %s", resp.StatusCode, resp.Header, b)
	}
	resp = post(t, url, geminiBody)
	_, err := readSSE(t, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || err == nil {
		t.Errorf("malformed stream parsed fine: %d %v", resp.StatusCode, err)
	}
	resp = post(t, url, geminiBody)
	evs, err := readSSE(t, resp.Body)
	resp.Body.Close()
	if err == nil || len(evs) != 2 {
		t.Errorf("drop: %d events, err %v", len(evs), err)
	}
	resp, err = http.Post(url, "application/json", strings.NewReader(`{"contents":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "after") {
		t.Errorf("recovery: %d %s", resp.StatusCode, b)
	}
}

func TestGeminiMethod(t *testing.T) {
	for p, want := range map[string][2]string{
		"/v1beta/models/gemini-2.5-pro:generateContent":       {"gemini-2.5-pro", "generateContent"},
		"/r/tok/v1beta/models/m:streamGenerateContent":        {"m", "streamGenerateContent"},
		"/v1beta/models/m:countTokens":                        {"m", "countTokens"},
		"/v1beta/models/m":                                    {},
		"/v1beta/models/m:embedContent":                       {},
		"/v1beta/models/a/b:generateContent":                  {},
		"/v1beta/tunedModels/x:generateContent":               {},
		"/v1beta/models/:generateContent":                     {},
		"/v1/projects/p/locations/l/publishers/google/models": {},
	} {
		m, meth, ok := geminiMethod(p)
		if ok != (want[0] != "") || m != want[0] || meth != want[1] {
			t.Errorf("%s: %q %q %v", p, m, meth, ok)
		}
	}
}
