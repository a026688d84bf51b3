package replay

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"tine/model"
)

// The Gemini API (Gemini CLI's wire): POST .../models/M:generateContent
// answers one GenerateContentResponse, .../models/M:streamGenerateContent
// (?alt=sse) the same answer in chunks, each an SSE data line without an
// event name, the last carrying finishReason and usageMetadata, and no
// closing [DONE]. Unlike the other wires, the model and whether the answer
// streams are in the path, not the body: the gateway reads both there,
// and a replayed call that asks another model than the taped one diverges
// as model (the bodies alone would not show it).

// geminiPath reads a Gemini API path: the model and the method
// (generateContent, streamGenerateContent, countTokens).
func geminiPath(p string) (mdl, method string, ok bool) {
	p = strings.TrimRight(p, "/")
	i := strings.LastIndex(p, "/models/")
	if i < 0 {
		return "", "", false
	}
	mdl, method, ok = strings.Cut(p[i+len("/models/"):], ":")
	if !ok || mdl == "" || strings.Contains(mdl, "/") {
		return "", "", false
	}
	switch method {
	case "generateContent", "streamGenerateContent", "countTokens":
		return mdl, method, true
	}
	return "", "", false
}

// geminiStep reports whether p is a Gemini model call, and whether its
// answer streams.
func geminiStep(p string) (stream, ok bool) {
	_, m, ok := geminiPath(p)
	if !ok || m == "countTokens" {
		return false, false
	}
	return m == "streamGenerateContent", true
}

// geminiModelMismatch is a model divergence when a replayed Gemini call
// asks another model than the taped one did.
func geminiModelMismatch(tapedPath, actualPath string) *Mismatch {
	t, _, _ := geminiPath(tapedPath)
	a, _, _ := geminiPath(actualPath)
	if t == a {
		return nil
	}
	return &Mismatch{Kind: KindModel, Path: "(model in the path)", Fields: []string{"(model in the path)"}, Taped: t, Actual: a,
		Diff: unifiedDiff(t, a)}
}

// geminiError is the Gemini API's error body.
func geminiError(status int, msg string) any {
	st := "INTERNAL"
	switch status {
	case http.StatusBadRequest:
		st = "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		st = "UNAUTHENTICATED"
	case http.StatusTooManyRequests:
		st = "RESOURCE_EXHAUSTED"
	case http.StatusBadGateway, http.StatusServiceUnavailable:
		st = "UNAVAILABLE"
	}
	return map[string]any{"error": map[string]any{"code": status, "message": msg, "status": st}}
}

// geminiToolNames lists the functions an answer calls.
func geminiToolNames(answer json.RawMessage) []string {
	var a struct {
		Candidates []struct {
			Content struct {
				Parts []struct {
					FunctionCall *struct {
						Name string `json:"name"`
					} `json:"functionCall"`
				} `json:"parts"`
			} `json:"content"`
		} `json:"candidates"`
	}
	if json.Unmarshal(answer, &a) != nil || len(a.Candidates) == 0 {
		return nil
	}
	var names []string
	for _, p := range a.Candidates[0].Content.Parts {
		if p.FunctionCall != nil {
			names = append(names, p.FunctionCall.Name)
		}
	}
	return names
}

// assembleGemini merges a stream's chunks into one answer: the first
// candidate's parts in order (adjacent text parts of one kind, thought or
// not, joined, as the SDK's text does), the last finishReason and
// usageMetadata. nil when the stream did not finish (no finishReason) or
// carried an error.
func assembleGemini(events []Event) json.RawMessage {
	var out map[string]any
	var parts []any
	var finish, usage any
	var cand map[string]any
	for _, e := range events {
		var d map[string]any
		if json.Unmarshal([]byte(e.Data), &d) != nil {
			continue
		}
		if _, bad := d["error"]; bad {
			return nil
		}
		if out == nil {
			out = map[string]any{}
		}
		for k, v := range d {
			if k != "candidates" && k != "usageMetadata" {
				if _, ok := out[k]; !ok {
					out[k] = v
				}
			}
		}
		if u, ok := d["usageMetadata"]; ok && u != nil {
			usage = u
		}
		cs, _ := d["candidates"].([]any)
		if len(cs) == 0 {
			continue
		}
		c, _ := cs[0].(map[string]any)
		if cand == nil {
			cand = map[string]any{}
		}
		for k, v := range c {
			if k != "content" && k != "finishReason" {
				cand[k] = v
			}
		}
		if f := c["finishReason"]; f != nil {
			finish = f
		}
		content, _ := c["content"].(map[string]any)
		if r, ok := content["role"]; ok {
			cand["role"] = r
		}
		ps, _ := content["parts"].([]any)
		for _, p := range ps {
			pm, _ := p.(map[string]any)
			if pm == nil {
				continue
			}
			if len(parts) > 0 {
				prev, _ := parts[len(parts)-1].(map[string]any)
				if joinable(prev, pm) {
					prev["text"] = str(prev["text"]) + str(pm["text"])
					if sig, ok := pm["thoughtSignature"]; ok {
						prev["thoughtSignature"] = sig
					}
					continue
				}
			}
			cp := map[string]any{}
			for k, v := range pm {
				cp[k] = v
			}
			parts = append(parts, cp)
		}
	}
	if out == nil || cand == nil || finish == nil {
		return nil
	}
	role := cand["role"]
	delete(cand, "role")
	if role == nil {
		role = "model"
	}
	if parts == nil {
		parts = []any{}
	}
	cand["content"] = map[string]any{"role": role, "parts": parts}
	cand["finishReason"] = finish
	out["candidates"] = []any{cand}
	if usage != nil {
		out["usageMetadata"] = usage
	}
	b, _ := json.Marshal(out)
	return b
}

// joinable: two streamed parts that are pieces of one text.
func joinable(a, b map[string]any) bool {
	if a == nil || b == nil {
		return false
	}
	_, at := a["text"].(string)
	_, bt := b["text"].(string)
	if !at || !bt {
		return false
	}
	for _, p := range []map[string]any{a, b} {
		for k := range p {
			if k != "text" && k != "thought" && k != "thoughtSignature" {
				return false
			}
		}
	}
	return a["thought"] == b["thought"]
}

// encodeGemini is an answer as a stream: the whole answer in one chunk,
// which the Gemini API's clients read as they read a stream of many.
func encodeGemini(answer json.RawMessage) []Event {
	if !json.Valid(answer) {
		return nil
	}
	return []Event{{Data: string(compact(answer))}}
}

func compact(b []byte) []byte {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return b
	}
	out, _ := json.Marshal(v)
	return out
}

// geminiAnswer is m as a Gemini API answer (Gemini CLI). Thinking is left
// out: Gemini CLI keeps only the thoughts' summaries.
func geminiAnswer(m model.Message, n int, results map[string]string) (json.RawMessage, map[string]string, error) {
	parts := []any{}
	outputs := map[string]string{}
	for _, p := range m.Parts {
		switch p.Kind {
		case model.Text:
			parts = append(parts, map[string]any{"text": p.Text})
		case model.ToolCall:
			args := json.RawMessage(p.ToolInput)
			if !json.Valid(args) {
				args = json.RawMessage(`{}`)
			}
			fc := map[string]any{"name": p.ToolName, "args": args}
			if p.ToolCallID != "" {
				fc["id"] = p.ToolCallID
			}
			parts = append(parts, map[string]any{"functionCall": fc})
			outputs[p.ToolCallID] = results[p.ToolCallID]
		}
	}
	mdl := m.Model
	if mdl == "" {
		mdl = "gemini"
	}
	u := m.Usage
	prompt := u.InputTokens + u.CacheReadTokens
	b, err := json.Marshal(map[string]any{
		"candidates":    []any{map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}},
		"usageMetadata": map[string]any{"promptTokenCount": prompt, "candidatesTokenCount": u.OutputTokens, "cachedContentTokenCount": u.CacheReadTokens, "totalTokenCount": prompt + u.OutputTokens},
		"modelVersion":  mdl, "responseId": fmt.Sprintf("resp_tine_transcript_%d", n),
	})
	return b, outputs, err
}

// geminiOutputs lists the function responses a request carries: every one
// in its contents (the whole conversation; the caller picks by call id).
func geminiOutputs(body []byte) ([]output, error) {
	var req struct {
		Contents []struct {
			Parts []struct {
				FunctionResponse *struct {
					ID       string          `json:"id"`
					Response json.RawMessage `json:"response"`
				} `json:"functionResponse"`
			} `json:"parts"`
		} `json:"contents"`
	}
	if json.Unmarshal(body, &req) != nil {
		return nil, fmt.Errorf("the request is not a Gemini API request")
	}
	var out []output
	for i, c := range req.Contents {
		for j, p := range c.Parts {
			if fr := p.FunctionResponse; fr != nil {
				out = append(out, output{fr.ID, responseOutput(fr.Response), fmt.Sprintf("contents[%d].parts[%d].functionResponse.response", i, j)})
			}
		}
	}
	return out, nil
}

// responseOutput is a function response's output (or error) when it is
// text, else its JSON.
func responseOutput(raw json.RawMessage) string {
	var r struct {
		Output *string `json:"output"`
		Error  *string `json:"error"`
	}
	if json.Unmarshal(raw, &r) == nil {
		switch {
		case r.Output != nil:
			return *r.Output
		case r.Error != nil:
			return *r.Error
		}
	}
	return strings.TrimSpace(string(raw))
}
