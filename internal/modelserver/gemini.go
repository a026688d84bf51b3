package modelserver

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The Gemini API (generativelanguage.googleapis.com, as Gemini CLI's
// @google/genai speaks it): POST .../models/M:generateContent answers one
// GenerateContentResponse, .../models/M:streamGenerateContent?alt=sse the
// same response cut into chunks, each an SSE "data:" line without an event
// name and without a closing [DONE]; the last chunk carries finishReason
// and usageMetadata. The model is in the path, not the body.

// geminiMethod is what a path below .../models/ asks, and of which model:
// "generateContent", "streamGenerateContent" or "countTokens".
func geminiMethod(path string) (model, method string, ok bool) {
	i := strings.LastIndex(path, "/models/")
	if i < 0 {
		return "", "", false
	}
	model, method, ok = strings.Cut(path[i+len("/models/"):], ":")
	if !ok || model == "" || strings.Contains(model, "/") {
		return "", "", false
	}
	switch method {
	case "generateContent", "streamGenerateContent", "countTokens":
		return model, method, true
	}
	return "", "", false
}

// geminiToolNames are the names of the function declarations a Gemini
// request offers.
func geminiToolNames(body []byte) []string {
	var req struct {
		Tools []struct {
			FunctionDeclarations []struct {
				Name string `json:"name"`
			} `json:"functionDeclarations"`
		} `json:"tools"`
	}
	if json.Unmarshal(body, &req) != nil {
		return nil
	}
	var out []string
	for _, t := range req.Tools {
		for _, f := range t.FunctionDeclarations {
			out = append(out, f.Name)
		}
	}
	return out
}

// geminiEnc renders a reply as a Gemini API GenerateContentResponse.
type geminiEnc struct{ encBase }

func (e *geminiEnc) id() string { return fmt.Sprintf("resp_tine%04d", e.seq) }

// finishReason is the candidate's: STOP, whatever the parts (the Gemini
// API says STOP for an answer that calls functions too), unless the reply
// says otherwise.
func (e *geminiEnc) finishReason() string {
	if e.reply.StopReason != "" {
		return e.reply.StopReason
	}
	return "STOP"
}

// usage is usageMetadata: promptTokenCount counts the cached tokens too,
// candidatesTokenCount the answer without its thoughts.
func (e *geminiEnc) usage() map[string]any {
	u := e.reply.Usage
	prompt := u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens
	m := map[string]any{
		"promptTokenCount":     prompt,
		"candidatesTokenCount": u.OutputTokens,
		"totalTokenCount":      prompt + u.OutputTokens + u.ReasoningTokens,
	}
	if u.CacheReadTokens > 0 {
		m["cachedContentTokenCount"] = u.CacheReadTokens
	}
	if u.ReasoningTokens > 0 {
		m["thoughtsTokenCount"] = u.ReasoningTokens
	}
	return m
}

func (e *geminiEnc) call(i int) map[string]any {
	tc := e.reply.ToolCalls[i]
	return map[string]any{"functionCall": map[string]any{"id": e.toolID("call_tine", i), "name": tc.Name, "args": json.RawMessage(compactJSON(tc.Input))}}
}

func (e *geminiEnc) parts() []any {
	var out []any
	if e.reply.Thinking != "" {
		out = append(out, map[string]any{"text": e.reply.Thinking, "thought": true})
	}
	if e.reply.Text != "" {
		out = append(out, map[string]any{"text": e.reply.Text})
	}
	for i := range e.reply.ToolCalls {
		out = append(out, e.call(i))
	}
	if out == nil {
		out = []any{}
	}
	return out
}

// response is one GenerateContentResponse holding parts; the last one
// of an answer says why it finished and what it used.
func (e *geminiEnc) response(parts []any, last bool) map[string]any {
	cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
	r := map[string]any{"candidates": []any{cand}, "modelVersion": e.reply.Model, "responseId": e.id()}
	if last {
		cand["finishReason"] = e.finishReason()
		r["usageMetadata"] = e.usage()
	}
	return r
}

func (e *geminiEnc) full() []byte {
	b, _ := json.Marshal(e.response(e.parts(), true))
	return b
}

func (e *geminiEnc) stream(sw *sseWriter) {
	var chunks [][]any
	for _, p := range split(e.reply.Thinking, e.chunk) {
		chunks = append(chunks, []any{map[string]any{"text": p, "thought": true}})
	}
	for _, p := range split(e.reply.Text, e.chunk) {
		chunks = append(chunks, []any{map[string]any{"text": p}})
	}
	// A function call arrives whole, in a chunk of its own.
	for i := range e.reply.ToolCalls {
		chunks = append(chunks, []any{e.call(i)})
	}
	if len(chunks) == 0 {
		chunks = [][]any{{map[string]any{"text": ""}}}
	}
	for i, parts := range chunks {
		sw.event("", e.response(parts, i == len(chunks)-1))
	}
}

// geminiError is the Gemini API's error body: {"error": {code, message,
// status}}.
func geminiError(status int, msg string) map[string]any {
	st := "INTERNAL"
	switch {
	case status == 429:
		st = "RESOURCE_EXHAUSTED"
	case status == 400:
		st = "INVALID_ARGUMENT"
	case status == 404:
		st = "NOT_FOUND"
	case status == 503:
		st = "UNAVAILABLE"
	}
	return map[string]any{"error": map[string]any{"code": status, "message": msg, "status": st}}
}
