package qwen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"tine/harness"
	"tine/internal/jsonl"
	"tine/model"
)

// record is one line of a session file, as far as tine reads it.
type record struct {
	UUID       string  `json:"uuid"`
	ParentUUID *string `json:"parentUuid"`
	SessionID  string  `json:"sessionId"`
	Timestamp  string  `json:"timestamp"`
	Type       string  `json:"type"`
	Subtype    string  `json:"subtype"`
	Cwd        string  `json:"cwd"`
	Model      string  `json:"model"`
	Message    *struct {
		Role  string `json:"role"`
		Parts []part `json:"parts"`
	} `json:"message"`
	Usage *struct {
		Prompt   int64 `json:"promptTokenCount"`
		Output   int64 `json:"candidatesTokenCount"`
		Thoughts int64 `json:"thoughtsTokenCount"`
		Cached   int64 `json:"cachedContentTokenCount"`
	} `json:"usageMetadata"`
	ForkedFrom *struct {
		SessionID   string `json:"sessionId"`
		MessageUUID string `json:"messageUuid"`
	} `json:"forkedFrom"`
	ToolCallResult *struct {
		Status string `json:"status"`
	} `json:"toolCallResult"`
}

// part is one part of a message, in the Gemini API's shape.
type part struct {
	Text         *string `json:"text"`
	Thought      bool    `json:"thought"`
	FunctionCall *struct {
		ID   string          `json:"id"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall"`
	FunctionResponse *struct {
		ID       string          `json:"id"`
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse"`
	raw json.RawMessage
}

func (p *part) UnmarshalJSON(b []byte) error {
	type plain part
	if err := json.Unmarshal(b, (*plain)(p)); err != nil {
		return err
	}
	p.raw = append(json.RawMessage(nil), b...)
	return nil
}

// ParseFile reads the Qwen Code session file at path.
func ParseFile(path string) (harness.ParsedFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return harness.ParsedFile{}, err
	}
	defer f.Close()
	return Parse(f, path)
}

// node is one record of the session tree.
type node struct {
	parent int // index in parser.nodes, -1 for a root
	msg    int // the message this record is, -1 for bookkeeping
	// children says whether any record hangs off this one.
	children bool
}

// parser reads one session file.
type parser struct {
	name  string
	file  harness.ParsedFile
	nodes []node
	byID  map[string]int
	msgs  []model.Message
	// of each message: the record it is, its parent message (-1 for the
	// first), whether it is a fork's copy, and which run owns it.
	msgNode, msgParent []int
	copied             []bool
	owner              []int
	session, cwd, mdl  string
	forkedFrom         string
	start              time.Time
}

// Parse reads a Qwen Code session from r; name labels skips and errors.
//
// The file's runs are its main line, the path from the first record to
// the last one written (where the session stands), then one run per other
// leaf that adds messages, each holding only the messages it does not
// share with a run before it. Lines that cannot be read are skipped and
// listed; an incomplete last line (Qwen Code is still writing) is left
// unread and Offset ends before it.
func Parse(r io.Reader, name string) (harness.ParsedFile, error) {
	p := &parser{name: name, byID: map[string]int{}}
	lr := jsonl.NewReader(r, jsonl.DefaultMax)
	defer lr.Close()
	for lr.Next() {
		l := lr.Line()
		if l.Partial {
			break // still being written
		}
		p.file.Offset += l.Size
		text := bytes.TrimSpace(l.Text)
		switch {
		case l.TooLong:
			p.skip(l.Number, lr.TooLongReason())
		case len(text) == 0:
		default:
			p.record(l.Number, text)
		}
	}
	if err := lr.Err(); err != nil {
		return p.file, fmt.Errorf("%s: %w", name, err)
	}
	p.file.Runs = p.runs()
	return p.file, nil
}

func (p *parser) skip(line int, reason string) {
	p.file.Skipped = append(p.file.Skipped, harness.Skip{File: p.name, Line: line, Reason: reason})
}

// record takes one line.
func (p *parser) record(line int, text []byte) {
	var rec record
	if err := json.Unmarshal(text, &rec); err != nil {
		p.skip(line, "not a JSON record: "+model.OneLine(err.Error(), 120))
		return
	}
	if rec.UUID == "" {
		p.skip(line, "a record without a uuid")
		return
	}
	if _, dup := p.byID[rec.UUID]; dup {
		p.skip(line, "a second record with uuid "+model.OneLine(rec.UUID, 60))
		return
	}
	if p.session == "" {
		p.session, p.cwd = rec.SessionID, rec.Cwd
		if t, err := time.Parse(time.RFC3339Nano, rec.Timestamp); err == nil {
			p.start = t
		}
	}
	parent := -1
	if rec.ParentUUID != nil && *rec.ParentUUID != "" {
		var ok bool
		if parent, ok = p.byID[*rec.ParentUUID]; !ok {
			// The first record of a grown file's new part hangs off one
			// read before; any other is out of place.
			parent = len(p.nodes) - 1
			if len(p.nodes) > 0 {
				p.skip(line, fmt.Sprintf("its parent %s is not in the file; placed after the record before it", model.OneLine(*rec.ParentUUID, 60)))
			}
		}
	}
	n := node{parent: parent, msg: -1}
	if parent >= 0 {
		p.nodes[parent].children = true
	}
	if m, ok := p.message(rec); ok {
		n.msg = len(p.msgs)
		p.msgs = append(p.msgs, m)
		p.msgNode = append(p.msgNode, len(p.nodes))
		p.msgParent = append(p.msgParent, p.lastMessage(parent))
		p.copied = append(p.copied, rec.ForkedFrom != nil)
		p.owner = append(p.owner, -1)
		if rec.ForkedFrom != nil && p.forkedFrom == "" {
			p.forkedFrom = rec.ForkedFrom.SessionID
		}
		if rec.Model != "" {
			p.mdl = rec.Model
		}
	}
	p.byID[rec.UUID] = len(p.nodes)
	p.nodes = append(p.nodes, n)
}

// lastMessage is the nearest message at or above node i, -1 for none.
func (p *parser) lastMessage(i int) int {
	for ; i >= 0; i = p.nodes[i].parent {
		if p.nodes[i].msg >= 0 {
			return p.nodes[i].msg
		}
	}
	return -1
}

// message converts a record to a message; ok is false for bookkeeping.
func (p *parser) message(rec record) (model.Message, bool) {
	if rec.Message == nil {
		return model.Message{}, false
	}
	m := model.Message{NativeID: rec.UUID}
	if t, err := time.Parse(time.RFC3339Nano, rec.Timestamp); err == nil {
		m.Time = t
	}
	switch rec.Type {
	case "user":
		m.Role = model.User
	case "assistant":
		m.Role, m.Model = model.Assistant, rec.Model
		if u := rec.Usage; u != nil {
			m.Usage = model.Usage{InputTokens: max(u.Prompt-u.Cached, 0), OutputTokens: u.Output + u.Thoughts, CacheReadTokens: u.Cached}
		}
	case "tool_result":
		m.Role = model.Tool
	default:
		return model.Message{}, false
	}
	failed := rec.ToolCallResult != nil && rec.ToolCallResult.Status == "error"
	for _, pt := range rec.Message.Parts {
		switch {
		case pt.FunctionCall != nil:
			args := string(pt.FunctionCall.Args)
			if args == "" || args == "null" {
				args = "{}"
			}
			m.Parts = append(m.Parts, model.Part{Kind: model.ToolCall, ToolCallID: pt.FunctionCall.ID, ToolName: pt.FunctionCall.Name, ToolInput: args})
		case pt.FunctionResponse != nil:
			out, isErr := responseText(pt.FunctionResponse.Response)
			m.Parts = append(m.Parts, model.Part{Kind: model.ToolResult, ToolCallID: pt.FunctionResponse.ID, ToolName: pt.FunctionResponse.Name,
				Text: out, IsError: isErr || failed})
		case pt.Text != nil && pt.Thought:
			m.Parts = append(m.Parts, model.Part{Kind: model.Thinking, Text: *pt.Text})
		case pt.Text != nil:
			m.Parts = append(m.Parts, model.Part{Kind: model.Text, Text: *pt.Text})
		default:
			m.Parts = append(m.Parts, model.Part{Kind: model.Other, Raw: string(pt.raw)})
		}
	}
	if m.Role == model.User && len(m.Parts) > 0 && m.Parts[0].Kind == model.ToolResult {
		m.Role = model.Tool
	}
	return m, len(m.Parts) > 0
}

// responseText is what a function response says: its output (or error)
// when it is text, else its JSON.
func responseText(raw json.RawMessage) (string, bool) {
	var r struct {
		Output *string `json:"output"`
		Error  *string `json:"error"`
	}
	if json.Unmarshal(raw, &r) == nil {
		switch {
		case r.Error != nil && r.Output == nil:
			return *r.Error, true
		case r.Output != nil:
			return *r.Output, false
		}
	}
	return strings.TrimSpace(string(raw)), false
}

// runs lays the tree out as runs: the main line ends at the last record
// written, then each other leaf that adds messages, in file order.
func (p *parser) runs() []harness.ParsedRun {
	if len(p.msgs) == 0 {
		return nil
	}
	var runs []harness.ParsedRun
	leaves := []int{len(p.nodes) - 1}
	for i := range p.nodes[:len(p.nodes)-1] {
		if !p.nodes[i].children {
			leaves = append(leaves, i)
		}
	}
	for li, leaf := range leaves {
		main := li == 0
		var own []int // leaf first
		m := p.lastMessage(leaf)
		for ; m >= 0 && p.owner[m] < 0; m = p.msgParent[m] {
			own = append(own, m)
		}
		if len(own) == 0 && !main {
			continue // a leaf that adds no message (bookkeeping)
		}
		for _, j := range own {
			p.owner[j] = len(runs)
		}
		pr := harness.ParsedRun{Parent: -1}
		if !main {
			pr.Parent, pr.ForkAt = 0, 0
			if m >= 0 {
				pr.Parent, pr.ForkAt = p.owner[m], p.depthOf(m)
			}
		}
		pr.Run, pr.Messages = p.run(own)
		if main {
			pr.Fork = p.forkHint(pr.Messages, own)
		}
		runs = append(runs, pr)
	}
	return runs
}

// depthOf is how many messages lead to message m, m included.
func (p *parser) depthOf(m int) int {
	d := 0
	for ; m >= 0; m = p.msgParent[m] {
		d++
	}
	return d
}

// run is the Run of the messages own (leaf first), and those messages.
func (p *parser) run(own []int) (model.Run, []model.Message) {
	r := model.Run{Harness: Harness, NativeID: p.session, Cwd: p.cwd, Model: p.mdl, Status: model.Completed, CreatedAt: p.start}
	msgs := make([]model.Message, len(own))
	for k, j := range own {
		msgs[len(own)-1-k] = p.msgs[j]
		if !p.copied[j] { // a fork's own spending only (rule 6 in ARCHITECTURE.md)
			r.Usage = r.Usage.Add(p.msgs[j].Usage)
		}
	}
	if len(msgs) > 0 {
		if r.CreatedAt.IsZero() {
			r.CreatedAt = msgs[0].Time
		}
		r.FinishedAt = msgs[len(msgs)-1].Time
	}
	r.Title = model.TitleOf(msgs)
	return r, msgs
}

// forkHint says the main line was forked from another session (its
// leading records are forkedFrom copies); nil when it was not.
func (p *parser) forkHint(msgs []model.Message, own []int) *harness.ForkHint {
	if p.forkedFrom == "" {
		return nil
	}
	n := 0
	for n < len(own) && p.copied[own[len(own)-1-n]] {
		n++
	}
	if n == 0 {
		return nil
	}
	return &harness.ForkHint{ParentSession: p.forkedFrom, Inherited: n, AfterMessage: msgs[n-1].NativeID}
}
