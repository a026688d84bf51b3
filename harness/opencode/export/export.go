// Package export reads an opencode session as `opencode export` writes it
// (and as the opencode backend reads each session of opencode's database)
// into tine's messages. It is apart from its backend, which links SQLite
// and runs the CLI: in the backend's package its fuzzer (FuzzParse) ran a
// few inputs a minute, here it runs tens of thousands a second.
package export

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"tine/harness"
	"tine/model"
)

// MaxSession bounds a session read whole (an export file, or a session of
// the database).
const MaxSession = 1 << 30

// Detect reports whether head, a file's first bytes, is a session as
// `opencode export` writes it: a JSON object whose info has an opencode
// session id ("ses_...") and which has messages.
func Detect(head []byte) bool {
	head = bytes.TrimLeft(bytes.TrimPrefix(head, []byte("\xef\xbb\xbf")), " \t\r\n")
	if len(head) == 0 || head[0] != '{' {
		return false
	}
	return bytes.Contains(head, []byte(`"info"`)) && bytes.Contains(head, []byte(`"ses_`)) &&
		(bytes.Contains(head, []byte(`"messages"`)) || len(head) >= 64<<10)
}

// Harness is the backend's name in runs and the registry.
const Harness = "opencode"

// ForkOf says a session is a fork opencode made of Session: its first
// Messages messages are copies of Session's, the last of them After. tine
// adds it to an export (as "tineForkOf") when opencode made the fork.
type ForkOf struct {
	Session  string `json:"session"`
	Messages int    `json:"messages"`
	After    string `json:"after"`
}

// sessionInfo is an export's info, as far as tine reads it.
type sessionInfo struct {
	ID        string `json:"id"`
	Title     string `json:"title"`
	Directory string `json:"directory"`
	ParentID  string `json:"parentID"`
	Time      struct {
		Created int64 `json:"created"`
		Updated int64 `json:"updated"`
	} `json:"time"`
}

// MessageInfo is a message's info.
type MessageInfo struct {
	ID         string `json:"id"`
	Role       string `json:"role"`
	ModelID    string `json:"modelID"`
	ProviderID string `json:"providerID"`
	ParentID   string `json:"parentID"`
	Time       struct {
		Created   int64 `json:"created"`
		Completed int64 `json:"completed"`
	} `json:"time"`
	Tokens *tokens  `json:"tokens"`
	Cost   float64  `json:"cost"`
	Error  *errInfo `json:"error"`
	Model  *struct {
		ProviderID string `json:"providerID"`
		ModelID    string `json:"modelID"`
	} `json:"model"`
}

// model is the message's model as opencode names one: provider/model.
func (mi MessageInfo) model() string {
	switch {
	case mi.ModelID != "":
		return qualified(mi.ProviderID, mi.ModelID)
	case mi.Model != nil && mi.Model.ModelID != "":
		return qualified(mi.Model.ProviderID, mi.Model.ModelID)
	}
	return ""
}

func qualified(provider, id string) string {
	if provider == "" {
		return id
	}
	return provider + "/" + id
}

type tokens struct {
	Input     int64 `json:"input"`
	Output    int64 `json:"output"`
	Reasoning int64 `json:"reasoning"`
	Cache     struct {
		Read  int64 `json:"read"`
		Write int64 `json:"write"`
	} `json:"cache"`
}

// usage is opencode's count as tine keeps it: the input it reports (the
// cached tokens apart), the output with the reasoning.
func (t *tokens) usage() model.Usage {
	if t == nil {
		return model.Usage{}
	}
	return model.Usage{InputTokens: t.Input, OutputTokens: t.Output + t.Reasoning, CacheReadTokens: t.Cache.Read, CacheWriteTokens: t.Cache.Write}
}

type errInfo struct {
	Name string `json:"name"`
	Data struct {
		Message string `json:"message"`
	} `json:"data"`
}

// Part is a part's data, as far as tine reads it.
type Part struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Text      string `json:"text"`
	Synthetic bool   `json:"synthetic"`
	Ignored   bool   `json:"ignored"`
	CallID    string `json:"callID"`
	Tool      string `json:"tool"`
	State     *struct {
		Status string          `json:"status"`
		Input  json.RawMessage `json:"input"`
		Output string          `json:"output"`
		Error  string          `json:"error"`
	} `json:"state"`
	Mime string `json:"mime"`
	URL  string `json:"url"`
}

// Parse reads one session as `opencode export` writes it (as tine reads
// the database's sessions too) into its run.
func Parse(r io.Reader, name string) (harness.ParsedFile, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxSession+1))
	if err != nil {
		return harness.ParsedFile{}, err
	}
	if len(data) > MaxSession {
		return harness.ParsedFile{}, fmt.Errorf("%s: an opencode session over %d bytes", name, MaxSession)
	}
	var ex struct {
		Info     json.RawMessage `json:"info"`
		Messages []struct {
			Info  json.RawMessage   `json:"info"`
			Parts []json.RawMessage `json:"parts"`
		} `json:"messages"`
		ForkOf *ForkOf `json:"tineForkOf"`
	}
	if err := json.Unmarshal(data, &ex); err != nil {
		return harness.ParsedFile{}, fmt.Errorf("%s: not an opencode session: %w", name, err)
	}
	var info sessionInfo
	if err := json.Unmarshal(ex.Info, &info); err != nil || info.ID == "" {
		return harness.ParsedFile{}, fmt.Errorf("%s: an opencode session without its id", name)
	}
	pf := harness.ParsedFile{Offset: int64(len(data))}
	skip := func(i int, why string) {
		pf.Skipped = append(pf.Skipped, harness.Skip{File: name, Line: i + 1, Reason: why})
	}
	var msgs []model.Message
	ends := make([]int, 0, len(ex.Messages)) // how many tine messages the first i+1 make
	var mdl string
	var usage model.Usage
	var lastErr string
	for i, m := range ex.Messages {
		var mi MessageInfo
		if err := json.Unmarshal(m.Info, &mi); err != nil || mi.ID == "" {
			skip(i, "a message that is not opencode's")
			ends = append(ends, len(msgs))
			continue
		}
		parts := make([]Part, 0, len(m.Parts))
		for _, raw := range m.Parts {
			var p Part
			if json.Unmarshal(raw, &p) != nil {
				skip(i, "a part of message "+model.OneLine(mi.ID, 40)+" that is not opencode's")
				continue
			}
			parts = append(parts, p)
		}
		out := Convert(mi, parts, m.Parts)
		if i >= inherited(ex.ForkOf) {
			for _, o := range out {
				usage = usage.Add(o.Usage)
			}
		}
		if m := mi.model(); m != "" {
			mdl = m
		}
		if mi.Role == "assistant" {
			lastErr = ""
			if mi.Error != nil && mi.Error.Name != "MessageAbortedError" {
				lastErr = model.OneLine(strings.TrimSpace(mi.Error.Name+": "+mi.Error.Data.Message), 300)
			}
		}
		msgs = append(msgs, out...)
		ends = append(ends, len(msgs))
	}
	if len(msgs) == 0 {
		return pf, nil
	}
	run := model.Run{Harness: Harness, NativeID: info.ID, Cwd: info.Directory, Model: mdl, Status: model.Completed,
		Title: info.Title, CreatedAt: msTime(info.Time.Created), Usage: usage}
	if run.CreatedAt.IsZero() {
		run.CreatedAt = msgs[0].Time
	}
	run.FinishedAt = msgs[len(msgs)-1].Time
	if lastErr != "" {
		run.Status, run.Error = model.Failed, lastErr
	}
	if strings.HasPrefix(run.Title, "New session - ") {
		run.Title = model.TitleOf(msgs) // opencode's placeholder says nothing
	}
	pr := harness.ParsedRun{Transcript: harness.Transcript{Run: run, Messages: msgs}, Parent: -1}
	if f := ex.ForkOf; f != nil && f.Messages > 0 && f.Messages <= len(ends) && ends[f.Messages-1] > 0 {
		pr.Fork = &harness.ForkHint{ParentSession: f.Session, Inherited: ends[f.Messages-1], AfterMessage: f.After}
	} else if info.ParentID != "" {
		pr.Subagent = &harness.SubagentHint{ParentSession: info.ParentID}
	}
	pf.Runs = []harness.ParsedRun{pr}
	return pf, nil
}

func inherited(f *ForkOf) int {
	if f == nil {
		return 0
	}
	return f.Messages
}

func msTime(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// Convert is one opencode message as tine's messages: a user message,
// or an assistant message split after each run of tool calls that have
// results, their results in a tool message. The last carries mi.ID.
func Convert(mi MessageInfo, parts []Part, raws []json.RawMessage) []model.Message {
	at := msTime(mi.Time.Created)
	if mi.Role == "user" {
		m := model.Message{Role: model.User, Time: at, NativeID: mi.ID}
		for i, p := range parts {
			switch p.Type {
			case "text":
				if !p.Ignored {
					m.Parts = append(m.Parts, model.Part{Kind: model.Text, Text: p.Text})
				}
			case "file":
				kind := model.Other
				if strings.HasPrefix(p.Mime, "image/") {
					kind = model.Image
				}
				m.Parts = append(m.Parts, model.Part{Kind: kind, Raw: string(raws[min(i, len(raws)-1)])})
			}
		}
		m.Model = mi.model()
		return []model.Message{m}
	}
	if mi.Role != "assistant" {
		return nil
	}
	var out []model.Message
	mdl := mi.model()
	cur := model.Message{Role: model.Assistant, Time: at, Model: mdl, Usage: mi.Tokens.usage()}
	var results []model.Part
	flush := func() {
		if len(cur.Parts) > 0 {
			out = append(out, cur)
		}
		if len(results) > 0 {
			out = append(out, model.Message{Role: model.Tool, Time: at, Parts: results})
		}
		cur = model.Message{Role: model.Assistant, Time: at, Model: mdl}
		results = nil
	}
	for _, p := range parts {
		switch p.Type {
		case "text":
			if len(results) > 0 {
				flush()
			}
			if p.Text != "" || !p.Synthetic {
				cur.Parts = append(cur.Parts, model.Part{Kind: model.Text, Text: p.Text})
			}
		case "reasoning":
			if len(results) > 0 {
				flush()
			}
			if p.Text != "" {
				cur.Parts = append(cur.Parts, model.Part{Kind: model.Thinking, Text: p.Text})
			}
		case "tool":
			if len(results) > 0 {
				flush()
			}
			call := model.Part{Kind: model.ToolCall, ToolCallID: p.CallID, ToolName: p.Tool, ToolInput: "{}"}
			if p.State != nil && len(p.State.Input) > 0 && string(p.State.Input) != "null" {
				call.ToolInput = string(p.State.Input)
			}
			cur.Parts = append(cur.Parts, call)
			if p.State == nil {
				continue
			}
			switch p.State.Status {
			case "completed":
				results = append(results, model.Part{Kind: model.ToolResult, ToolCallID: p.CallID, ToolName: p.Tool, Text: p.State.Output})
			case "error":
				results = append(results, model.Part{Kind: model.ToolResult, ToolCallID: p.CallID, ToolName: p.Tool, Text: p.State.Error, IsError: true})
			}
			// pending or running: no result yet (an interrupted turn
			// leaves the call unanswered, rule 1 in ARCHITECTURE.md).
		}
	}
	flush()
	if len(out) == 0 {
		// A model call that wrote nothing (aborted, or failed) still
		// counted its tokens.
		if u := mi.Tokens.usage(); !u.IsZero() {
			out = append(out, model.Message{Role: model.Assistant, Time: at, Model: mdl, Usage: u})
		} else {
			return nil
		}
	}
	for i := range out {
		out[i].NativeID = mi.ID
		if i < len(out)-1 {
			out[i].NativeID = mi.ID + "#" + strconv.Itoa(i+1)
		}
	}
	return out
}
