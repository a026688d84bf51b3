package pi

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
)

// The JSON shapes of a pi session file (pi 0.73.1, session version 3; see
// dist/core/session-manager.d.ts and docs/session-format.md in the package).
// Only what tine shows is declared; everything else is skipped by the
// decoder without being kept.

// header is the first line of a session file.
type header struct {
	Type      string `json:"type"`
	Version   *int   `json:"version"` // absent in version 1
	ID        string `json:"id"`
	Timestamp string `json:"timestamp"`
	Cwd       string `json:"cwd"`
	// ParentSession is the parent's file path, as it was on the machine
	// that forked it.
	ParentSession string `json:"parentSession"`
}

// entry is every entry type at once: pi entries share id/parentId/timestamp
// and differ in a few fields, so one struct keeps decoding to one pass.
type entry struct {
	Type      string  `json:"type"`
	ID        string  `json:"id"`
	ParentID  *string `json:"parentId"`
	Timestamp string  `json:"timestamp"`
	// message
	Message *message `json:"message"`
	// model_change
	Provider string `json:"provider"`
	ModelID  string `json:"modelId"`
	// compaction, branch_summary
	Summary      string  `json:"summary"`
	TokensBefore float64 `json:"tokensBefore"`
	FromID       string  `json:"fromId"`
	// custom_message
	CustomType string  `json:"customType"`
	Content    []block `json:"content"`
	// session_info
	Name *string `json:"name"`
}

// link is what every entry has, whatever its type: enough to keep an entry
// of an unknown type (or one that failed to decode) in the tree.
type link struct {
	ID        string  `json:"id"`
	ParentID  *string `json:"parentId"`
	Timestamp string  `json:"timestamp"`
}

// message is an AgentMessage: user, assistant, toolResult, and pi's own
// bashExecution, custom (hookMessage before version 3), branchSummary and
// compactionSummary.
type message struct {
	Role    string  `json:"role"`
	Content []block `json:"content"`
	// Timestamp is unix ms; the entry's ISO timestamp is preferred.
	Timestamp json.RawMessage `json:"timestamp"`
	// assistant
	Provider     string `json:"provider"`
	Model        string `json:"model"`
	Usage        *usage `json:"usage"`
	StopReason   string `json:"stopReason"`
	ErrorMessage string `json:"errorMessage"`
	// toolResult
	ToolCallID string `json:"toolCallId"`
	ToolName   string `json:"toolName"`
	IsError    bool   `json:"isError"`
	// bashExecution
	Command            string `json:"command"`
	Output             string `json:"output"`
	ExitCode           *int64 `json:"exitCode"`
	Cancelled          bool   `json:"cancelled"`
	Truncated          bool   `json:"truncated"`
	FullOutputPath     string `json:"fullOutputPath"`
	ExcludeFromContext bool   `json:"excludeFromContext"`
	// branchSummary, compactionSummary
	Summary      string  `json:"summary"`
	TokensBefore float64 `json:"tokensBefore"`
}

// block is one content block: text, thinking, toolCall or image.
type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	Redacted  bool            `json:"redacted"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	// Data is an image's base64: only its size is kept, never the bytes.
	Data     json.RawMessage `json:"data"`
	MimeType string          `json:"mimeType"`
}

// usage is pi-ai's Usage. input excludes cached tokens (cacheRead).
// Numbers are float64 so that a stray 1e3 does not cost the whole line.
type usage struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cacheRead"`
	CacheWrite float64 `json:"cacheWrite"`
	Cost       *struct {
		Total float64 `json:"total"`
	} `json:"cost"`
}

// UnmarshalJSON reads usage as encoding/json does, except that a number
// beyond float64 (1e400) is read as ±Inf instead of failing the line:
// usageOf then drops the usage with why, and the message is kept.
func (u *usage) UnmarshalJSON(b []byte) error {
	var w struct {
		Input      usageNumber `json:"input"`
		Output     usageNumber `json:"output"`
		CacheRead  usageNumber `json:"cacheRead"`
		CacheWrite usageNumber `json:"cacheWrite"`
		Cost       *struct {
			Total usageNumber `json:"total"`
		} `json:"cost"`
	}
	w.Input, w.Output, w.CacheRead, w.CacheWrite = usageNumber(u.Input), usageNumber(u.Output), usageNumber(u.CacheRead), usageNumber(u.CacheWrite)
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	u.Input, u.Output, u.CacheRead, u.CacheWrite = float64(w.Input), float64(w.Output), float64(w.CacheRead), float64(w.CacheWrite)
	u.Cost = nil
	if w.Cost != nil {
		u.Cost = &struct {
			Total float64 `json:"total"`
		}{float64(w.Cost.Total)}
	}
	return nil
}

// usageNumber is a float64 that takes a number beyond float64 as ±Inf.
type usageNumber float64

func (n *usageNumber) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil // as for a float64: left as it was
	}
	f, err := strconv.ParseFloat(string(b), 64)
	var ne *strconv.NumError
	if err != nil && !(errors.As(err, &ne) && ne.Err == strconv.ErrRange) {
		return &json.UnmarshalTypeError{Value: "non-number " + string(b), Type: reflect.TypeFor[float64]()}
	}
	*n = usageNumber(f)
	return nil
}

// looseEntry decodes an entry whose content is a string (user messages and
// custom_message may have "content":"text"); the outer fields shadow the
// embedded ones of the same name.
type looseEntry struct {
	entry
	Message *looseMessage   `json:"message"`
	Content json.RawMessage `json:"content"`
}

type looseMessage struct {
	message
	Content json.RawMessage `json:"content"`
}

// decodeEntry decodes one entry line. The common shape (content an array)
// takes one json.Unmarshal; only a type mismatch pays for a second, loose
// decode that accepts string content.
func decodeEntry(line []byte, e *entry) error {
	err := json.Unmarshal(line, e)
	var typeErr *json.UnmarshalTypeError
	if err == nil || !errors.As(err, &typeErr) {
		return err
	}
	var le looseEntry
	if err := json.Unmarshal(line, &le); err != nil {
		return err
	}
	*e = le.entry
	if e.Content, err = flexContent(le.Content); err != nil {
		return err
	}
	e.Message = nil
	if le.Message != nil {
		m := le.Message.message
		if m.Content, err = flexContent(le.Message.Content); err != nil {
			return err
		}
		e.Message = &m
	}
	return nil
}

// flexContent reads content that is either a string or an array of blocks.
func flexContent(raw json.RawMessage) ([]block, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return []block{{Type: "text", Text: s}}, nil
	}
	var bs []block
	err := json.Unmarshal(raw, &bs)
	return bs, err
}

// rawBlocks re-reads the original JSON of an entry's content blocks, so that
// blocks of a type tine does not know keep their JSON. It is only called
// when such a block turns up.
func rawBlocks(line []byte) []json.RawMessage {
	var le struct {
		Message struct {
			Content json.RawMessage `json:"content"`
		} `json:"message"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(line, &le) != nil {
		return nil
	}
	raw := le.Message.Content
	if len(raw) == 0 {
		raw = le.Content
	}
	var out []json.RawMessage
	if json.Unmarshal(raw, &out) != nil {
		return nil
	}
	return out
}
