package apihttp

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"tine/model"
)

// ErrorMessage pulls one line out of an API error body: OpenAI's and
// Anthropic's {"error": {"message", "type"}}, Ollama's {"error": "..."}, or
// the body itself.
func ErrorMessage(b []byte) string {
	var e struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(b, &e) == nil {
		var inner struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		}
		var s string
		switch {
		case json.Unmarshal(e.Error, &inner) == nil && inner.Message != "":
			if inner.Type != "" && !strings.Contains(inner.Message, inner.Type) {
				return model.OneLine(inner.Message+" ("+inner.Type+")", 300)
			}
			return model.OneLine(inner.Message, 300)
		case json.Unmarshal(e.Error, &s) == nil && s != "":
			return model.OneLine(s, 300)
		case e.Message != "":
			return model.OneLine(e.Message, 300)
		}
	}
	if s := model.OneLine(string(b), 300); s != "" {
		return s
	}
	return "(empty body)"
}

// redact keeps the key out of anything a server echoed back.
func redact(s, key string) string {
	if key == "" {
		return s
	}
	return strings.ReplaceAll(s, key, "[redacted]")
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Partial says that a turn failed with err after part of its answer, m,
// had streamed, and that m is kept: note is stored with the run, the
// returned error ends the turn.
func Partial(err error, m model.Message) (note string, _ error) {
	chars := 0
	for _, p := range m.Parts {
		if p.Kind == model.Text {
			chars += utf8.RuneCountInString(p.Text)
		}
	}
	note = fmt.Sprintf("the last answer is partial: the stream failed after %d characters of text, which are kept", chars)
	return note, fmt.Errorf("%w (the %d characters streamed before that are kept as a partial answer)", err, chars)
}
