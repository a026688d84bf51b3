package modelserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
)

// Script is the JSON form of a reply queue, for cmd/modelserver and the
// /_control/replies endpoint:
//
//	{"model": "m", "default": {"text": "ok"}, "replies": [
//	  {"text": "hello", "usage": {"input_tokens": 12, "output_tokens": 3}},
//	  {"tool_calls": [{"name": "Bash", "input": {"command": "echo hi"}}], "match": {"tools": true}},
//	  {"fault": {"kind": "ratelimit", "retry_after": "2"}},
//	  {"fault": {"kind": "delay", "delay": "3s"}, "text": "slow"}
//	]}
//
// A bare JSON array of replies is accepted too.
type Script struct {
	Model   string  `json:"model,omitempty"`
	Default *Reply  `json:"default,omitempty"`
	Replies []Reply `json:"replies"`
}

// ParseScript reads a Script from JSON (an object or a bare array of replies).
func ParseScript(b []byte) (Script, error) {
	var sc Script
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' {
		err := json.Unmarshal(b, &sc.Replies)
		return sc, err
	}
	if len(b) > 0 && b[0] == '{' {
		// A single reply object is accepted by /_control/replies.
		var probe map[string]json.RawMessage
		if err := json.Unmarshal(b, &probe); err != nil {
			return sc, err
		}
		if _, ok := probe["replies"]; !ok {
			if _, ok := probe["model"]; !ok {
				if _, ok := probe["default"]; !ok {
					var r Reply
					err := json.Unmarshal(b, &r)
					sc.Replies = []Reply{r}
					return sc, err
				}
			}
		}
	}
	err := json.Unmarshal(b, &sc)
	return sc, err
}

// LoadScript reads a Script file.
func LoadScript(path string) (Script, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Script{}, err
	}
	sc, err := ParseScript(b)
	if err != nil {
		return sc, fmt.Errorf("%s: %w", path, err)
	}
	return sc, nil
}

// UnmarshalJSON accepts chunk_delay as "50ms" or nanoseconds.
func (r *Reply) UnmarshalJSON(b []byte) error {
	type plain Reply
	var aux struct {
		plain
		ChunkDelay json.RawMessage `json:"chunk_delay,omitempty"`
	}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	*r = Reply(aux.plain)
	if len(aux.ChunkDelay) > 0 {
		d, err := parseDuration(aux.ChunkDelay)
		if err != nil {
			return err
		}
		r.ChunkDelay = d
	}
	return nil
}

// serveControl implements, when Options.Control is set:
//
//	POST /_control/replies   push a reply, an array of replies or a Script
//	POST /_control/reset     clear queue, handler and recorded requests
//	GET  /_control/requests  recorded requests as a JSON array (bodies inline)
//	GET  /_control/pending   {"pending": N}
func (s *Server) serveControl(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/_control/replies":
		b, _ := io.ReadAll(r.Body)
		sc, err := ParseScript(b)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.Push(sc.Replies...)
		writeJSON(w, http.StatusOK, map[string]any{"pushed": len(sc.Replies), "pending": s.Pending()})
	case "/_control/reset":
		s.Reset()
		writeJSON(w, http.StatusOK, map[string]any{"ok": true})
	case "/_control/requests":
		writeJSON(w, http.StatusOK, s.Requests())
	case "/_control/pending":
		writeJSON(w, http.StatusOK, map[string]any{"pending": s.Pending()})
	default:
		http.NotFound(w, r)
	}
}
