package qwen

import (
	"bytes"
	"cmp"
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
	Usage      *usage `json:"usageMetadata"`
	ForkedFrom *struct {
		SessionID   string `json:"sessionId"`
		MessageUUID string `json:"messageUuid"`
	} `json:"forkedFrom"`
	ToolCallResult *struct {
		Status string `json:"status"`
	} `json:"toolCallResult"`
}

// usage is an assistant record's usageMetadata.
type usage struct {
	Prompt   int64 `json:"promptTokenCount"`
	Output   int64 `json:"candidatesTokenCount"`
	Thoughts int64 `json:"thoughtsTokenCount"`
	Cached   int64 `json:"cachedContentTokenCount"`
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
	// head, for a user, assistant or tool_result record, is what the
	// message is made of besides its parts, as its fragments so far say.
	head *head
}

// head is a message record's fields besides its parts. Records that share
// a uuid are fragments of one message: Qwen Code's reader
// (prepareTranscriptRecords in 0.24.4, SessionService.aggregateRecords
// since its first JSONL sessions) merges them in file order: the parts of
// all of them, the parent, type and forkedFrom of the first, its first
// toolCallResult and model, the last usageMetadata, the latest timestamp.
// (0.24.4's own recorder gives every record a fresh uuid; a file holding
// fragments reads as its reader reads it.)
type head struct {
	typ, model string
	usage      *usage
	time       time.Time
	copied     bool // a fork's copy (forkedFrom)
	// result: a toolCallResult was read; failed: it said error.
	result, failed bool
}

// parser reads one session file.
type parser struct {
	name  string
	file  harness.ParsedFile
	nodes []node
	byID  map[string]int
	msgs  []model.Message
	// of each message: the record it is, its parent message (-1 for the
	// first; worked out once every record is read), and which run owns it.
	msgNode, msgParent []int
	owner              []int
	// last is the node of the last record written.
	last              int
	session, cwd, mdl string
	forkedFrom        string
	start             time.Time
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
	p.take(line, rec)
}

// take places record rec, of line, in the tree: a record of its own, or
// a later fragment of one (see head).
func (p *parser) take(line int, rec record) {
	if rec.UUID == "" {
		p.skip(line, "a record without a uuid")
		return
	}
	if i, ok := p.byID[rec.UUID]; ok {
		p.merge(i, rec)
		p.last = i
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
				p.file.Skipped = append(p.file.Skipped, harness.Skip{File: p.name, Line: line, MissingParent: *rec.ParentUUID,
					Reason: fmt.Sprintf("its parent %s is not in the file; placed after the record before it", model.OneLine(*rec.ParentUUID, 60))})
			}
		}
	}
	n := node{parent: parent, msg: -1}
	if parent >= 0 {
		p.nodes[parent].children = true
	}
	switch rec.Type {
	case "user", "assistant", "tool_result":
		n.head = &head{typ: rec.Type, copied: rec.ForkedFrom != nil}
		if rec.ForkedFrom != nil && p.forkedFrom == "" {
			p.forkedFrom = rec.ForkedFrom.SessionID
		}
	}
	p.byID[rec.UUID] = len(p.nodes)
	p.last = len(p.nodes)
	p.nodes = append(p.nodes, n)
	p.merge(p.last, rec)
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

// merge takes record rec, the first or a later fragment of node i's
// message (see head).
func (p *parser) merge(i int, rec record) {
	h := p.nodes[i].head
	if h == nil {
		return // bookkeeping
	}
	if rec.Usage != nil {
		h.usage = rec.Usage
	}
	h.model = cmp.Or(h.model, rec.Model)
	if t, err := time.Parse(time.RFC3339Nano, rec.Timestamp); err == nil && t.After(h.time) {
		h.time = t
	}
	failedNow := false
	if rec.ToolCallResult != nil && !h.result {
		h.result, h.failed = true, rec.ToolCallResult.Status == "error"
		failedNow = h.failed
	}
	var parts []model.Part
	if rec.Message != nil {
		parts = partsOf(rec.Message.Parts, h.failed)
	}
	m := p.nodes[i].msg
	if m < 0 {
		if len(parts) == 0 {
			return
		}
		m = len(p.msgs)
		p.nodes[i].msg = m
		p.msgs = append(p.msgs, model.Message{NativeID: rec.UUID})
		p.msgNode = append(p.msgNode, i)
		p.owner = append(p.owner, -1)
	}
	msg := &p.msgs[m]
	if failedNow {
		for k := range msg.Parts {
			if msg.Parts[k].Kind == model.ToolResult {
				msg.Parts[k].IsError = true
			}
		}
	}
	msg.Parts = append(msg.Parts, parts...)
	msg.Time = h.time
	switch h.typ {
	case "user":
		msg.Role = model.User
		if msg.Parts[0].Kind == model.ToolResult {
			msg.Role = model.Tool
		}
	case "assistant":
		msg.Role, msg.Model = model.Assistant, h.model
		if u := h.usage; u != nil {
			msg.Usage = model.Usage{InputTokens: max(u.Prompt-u.Cached, 0), OutputTokens: u.Output + u.Thoughts, CacheReadTokens: u.Cached}
		}
	case "tool_result":
		msg.Role = model.Tool
	}
	if msg.Model != "" {
		p.mdl = msg.Model
	}
}

// partsOf converts a record's parts; failed: its toolCallResult said
// error, so every function response in it is an error.
func partsOf(pts []part, failed bool) []model.Part {
	var out []model.Part
	for _, pt := range pts {
		switch {
		case pt.FunctionCall != nil:
			args := string(pt.FunctionCall.Args)
			if args == "" || args == "null" {
				args = "{}"
			}
			out = append(out, model.Part{Kind: model.ToolCall, ToolCallID: pt.FunctionCall.ID, ToolName: pt.FunctionCall.Name, ToolInput: args})
		case pt.FunctionResponse != nil:
			text, isErr := responseText(pt.FunctionResponse.Response)
			out = append(out, model.Part{Kind: model.ToolResult, ToolCallID: pt.FunctionResponse.ID, ToolName: pt.FunctionResponse.Name,
				Text: text, IsError: isErr || failed})
		case pt.Text != nil && pt.Thought:
			out = append(out, model.Part{Kind: model.Thinking, Text: *pt.Text})
		case pt.Text != nil:
			out = append(out, model.Part{Kind: model.Text, Text: *pt.Text})
		default:
			out = append(out, model.Part{Kind: model.Other, Raw: string(pt.raw)})
		}
	}
	return out
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
	p.msgParent = make([]int, len(p.msgs))
	for m, i := range p.msgNode {
		p.msgParent[m] = p.lastMessage(p.nodes[i].parent)
	}
	var runs []harness.ParsedRun
	leaves := []int{p.last}
	for i := range p.nodes {
		if i != p.last && !p.nodes[i].children {
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

// copiedMsg reports whether message m is a fork's copy of its origin's.
func (p *parser) copiedMsg(m int) bool { return p.nodes[p.msgNode[m]].head.copied }

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
		if !p.copiedMsg(j) { // a fork's own spending only (rule 6 in ARCHITECTURE.md)
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
	for n < len(own) && p.copiedMsg(own[len(own)-1-n]) {
		n++
	}
	if n == 0 {
		return nil
	}
	return &harness.ForkHint{ParentSession: p.forkedFrom, Inherited: n, AfterMessage: msgs[n-1].NativeID}
}
