package gemini

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"tine/harness"
	"tine/internal/jsonl"
	"tine/model"
)

// record is one line of a session file, or one message of a $set's
// messages or of a legacy file, as far as tine reads it. Gemini CLI tells
// the kinds apart in this order: a $rewindTo, a message (it has an id), a
// $set, a header (sessionId and projectHash).
type record struct {
	ID        *string         `json:"id"`
	Timestamp string          `json:"timestamp"`
	Type      string          `json:"type"`
	Content   json.RawMessage `json:"content"`
	Thoughts  []struct {
		Subject     string `json:"subject"`
		Description string `json:"description"`
	} `json:"thoughts"`
	Tokens *struct {
		Input    int64 `json:"input"`
		Output   int64 `json:"output"`
		Cached   int64 `json:"cached"`
		Thoughts int64 `json:"thoughts"`
		Tool     int64 `json:"tool"`
	} `json:"tokens"`
	Model     string     `json:"model"`
	ToolCalls []toolCall `json:"toolCalls"`

	meta
	Set      *setRecord        `json:"$set"`
	RewindTo *string           `json:"$rewindTo"`
	Messages []json.RawMessage `json:"messages"` // a header (or a legacy file) that holds them
}

// meta is what a header, a $set or a legacy file says of the session.
type meta struct {
	SessionID   *string `json:"sessionId"`
	ProjectHash *string `json:"projectHash"`
	StartTime   string  `json:"startTime"`
	Kind        string  `json:"kind"`
	Summary     string  `json:"summary"`
}

type setRecord struct {
	meta
	Messages *[]json.RawMessage `json:"messages"`
}

type toolCall struct {
	ID     string          `json:"id"`
	Name   string          `json:"name"`
	Args   json.RawMessage `json:"args"`
	Result json.RawMessage `json:"result"`
	Status string          `json:"status"`
}

// part is one part of a message's content, in the Gemini API's shape.
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
	InlineData json.RawMessage `json:"inlineData"`
	raw        json.RawMessage
}

func (p *part) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil { // a bare string is a text part
		p.Text = &s
		p.raw = append(json.RawMessage(nil), b...)
		return nil
	}
	type plain part
	if err := json.Unmarshal(b, (*plain)(p)); err != nil {
		return err
	}
	p.raw = append(json.RawMessage(nil), b...)
	return nil
}

// parts reads a content or a tool result: a string, a part or a list of
// parts (Gemini CLI's PartListUnion).
func parts(raw json.RawMessage) []part {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if raw[0] == '[' {
		var ps []part
		if json.Unmarshal(raw, &ps) == nil {
			return ps
		}
		return nil
	}
	var p part
	if json.Unmarshal(raw, &p) == nil {
		return []part{p}
	}
	return nil
}

// node is one message record of the session, as last written.
type node struct {
	rec    record
	raw    []byte // the record's JSON (kept when writing a branch)
	parent int    // the node before it on its line, -1 for the first
	line   int    // the line it was read on, for skips
}

// conv folds a session file's records into its messages, as Gemini CLI's
// loadConversationRecord does, keeping what that drops: messages a rewind
// or a rewrite took off the line stay as nodes off it.
type conv struct {
	name    string
	keepRaw bool
	skipped []harness.Skip
	nodes   []node
	line    []int          // the session's messages now, in order
	pos     map[string]int // id → index in line
	byID    map[string]int // id → its node, on the line or off it
	meta    meta
	// importedFrom is the file an "Imported session from ..." record
	// names; copies are the ids of the records after it and before the
	// first $set (what --session-file copied), and sets counts the $set
	// records seen.
	importedFrom string
	copies       map[string]bool
	sets         int
	// headerCopies: the records before the first $set follow the header
	// (a legacy file's messages, as a resume converting it writes them).
	headerCopies map[string]bool
	dir          string // the project root, once runs has found it
}

func newConv(name string) *conv {
	return &conv{name: name, pos: map[string]int{}, byID: map[string]int{}}
}

func (c *conv) skip(line int, reason string) {
	c.skipped = append(c.skipped, harness.Skip{File: c.name, Line: line, Reason: reason})
}

// take reads one line of the file.
func (c *conv) take(line int, text []byte) {
	var rec record
	if err := json.Unmarshal(text, &rec); err != nil {
		c.skip(line, "not a JSON record: "+model.OneLine(err.Error(), 120))
		return
	}
	switch {
	case rec.RewindTo != nil:
		c.rewind(*rec.RewindTo)
	case rec.ID != nil:
		c.message(line, rec, text)
	case rec.Set != nil:
		c.sets++
		c.setMeta(rec.Set.meta)
		if rec.Set.Messages != nil {
			c.rewrite(line, *rec.Set.Messages)
		}
	case rec.SessionID != nil && rec.ProjectHash != nil:
		c.setMeta(rec.meta)
		for _, m := range rec.Messages {
			c.messageJSON(line, m)
		}
	default:
		c.skip(line, "a record Gemini CLI does not write (no id, $set, $rewindTo or session header)")
	}
}

func (c *conv) setMeta(m meta) {
	if m.SessionID != nil {
		c.meta.SessionID = m.SessionID
	}
	if m.ProjectHash != nil {
		c.meta.ProjectHash = m.ProjectHash
	}
	if m.StartTime != "" {
		c.meta.StartTime = m.StartTime
	}
	if m.Kind != "" {
		c.meta.Kind = m.Kind
	}
	if m.Summary != "" {
		c.meta.Summary = m.Summary
	}
}

func (c *conv) messageJSON(line int, raw json.RawMessage) {
	var rec record
	if json.Unmarshal(raw, &rec) != nil || rec.ID == nil {
		c.skip(line, "a message without an id")
		return
	}
	c.message(line, rec, raw)
}

// message takes a message record: a new one goes at the end of the line,
// one written again (its tool calls or tokens added) replaces its earlier
// self in place, and one written again after it left the line (a rewind
// took it off) goes back, at the end, as Gemini CLI's map of messages
// puts it.
func (c *conv) message(line int, rec record, text []byte) {
	id := *rec.ID
	switch rec.Type {
	case "user", "gemini", "info", "error", "warning":
	default:
		c.skip(line, "a message of type "+model.OneLine(rec.Type, 40)+", which tine does not know")
	}
	if rec.Type == "info" && c.importedFrom == "" {
		var s string
		if json.Unmarshal(rec.Content, &s) == nil {
			if p, ok := strings.CutPrefix(s, importedPrefix); ok {
				c.importedFrom, c.copies = strings.TrimSpace(p), map[string]bool{}
			}
		}
	}
	if c.sets == 0 {
		if c.copies != nil && rec.Type != "info" {
			c.copies[id] = true
		}
		if c.headerCopies == nil {
			c.headerCopies = map[string]bool{}
		}
		c.headerCopies[id] = true
	}
	var raw []byte
	if c.keepRaw {
		raw = bytes.Clone(text)
	}
	if p, ok := c.pos[id]; ok {
		n := &c.nodes[c.line[p]]
		n.rec, n.raw = again(n.rec, rec), raw
		return
	}
	parent := -1
	if len(c.line) > 0 {
		parent = c.line[len(c.line)-1]
	}
	n, ok := c.byID[id]
	if ok {
		c.nodes[n].rec, c.nodes[n].raw, c.nodes[n].parent = again(c.nodes[n].rec, rec), raw, parent
	} else {
		n = len(c.nodes)
		c.byID[id] = n
		c.nodes = append(c.nodes, node{rec: rec, raw: raw, parent: parent, line: line})
	}
	c.pos[id] = len(c.line)
	c.line = append(c.line, n)
}

// rewind takes a $rewindTo: the message it names and every one after it
// leave the line (they stay, as a branch off it); a rewind to a message
// that is not there empties the line, as Gemini CLI does.
func (c *conv) rewind(id string) {
	p, ok := c.pos[id]
	if !ok {
		p = 0
	}
	for _, n := range c.line[p:] {
		delete(c.pos, *c.nodes[n].rec.ID)
	}
	c.line = c.line[:p]
}

// rewrite takes a $set of the messages: they are the line from now on. A
// message seen before keeps its node (its content rewritten), on the line
// or back on it (a resume may empty the line for a moment, then set it
// whole again); a new one is a new node; one that is no longer there
// stays off the line.
func (c *conv) rewrite(line int, msgs []json.RawMessage) {
	var nl []int
	npos := map[string]int{}
	for _, raw := range msgs {
		var rec record
		if json.Unmarshal(raw, &rec) != nil || rec.ID == nil {
			c.skip(line, "a message without an id in a $set of the messages")
			continue
		}
		id := *rec.ID
		var keep []byte
		if c.keepRaw {
			keep = bytes.Clone(raw)
		}
		if j, ok := npos[id]; ok { // listed twice: the later wins, in the earlier's place
			c.nodes[nl[j]].rec, c.nodes[nl[j]].raw = again(c.nodes[nl[j]].rec, rec), keep
			continue
		}
		n, ok := c.byID[id]
		if ok {
			c.nodes[n].rec, c.nodes[n].raw = again(c.nodes[n].rec, rec), keep
		} else {
			n = len(c.nodes)
			c.byID[id] = n
			c.nodes = append(c.nodes, node{rec: rec, raw: keep, line: line})
		}
		c.nodes[n].parent = -1
		if len(nl) > 0 {
			c.nodes[n].parent = nl[len(nl)-1]
		}
		npos[id] = len(nl)
		nl = append(nl, n)
	}
	c.line, c.pos = nl, npos
}

// again is a message written again (its calls added, or rewritten by a
// resume, which writes the earlier messages anew from what it sends the
// model): the new record, keeping what it no longer says of the old one,
// its time, its usage and model (so usage counts once per model call, as
// it was reported), and its tool calls with their results.
func again(old, rec record) record {
	if old.Timestamp != "" {
		rec.Timestamp = old.Timestamp
	}
	if rec.Tokens == nil {
		rec.Tokens = old.Tokens
	}
	if rec.Model == "" {
		rec.Model = old.Model
	}
	if len(rec.ToolCalls) == 0 {
		rec.ToolCalls = old.ToolCalls
	}
	return rec
}

// importedPrefix begins the info record a --session-file copy starts with.
const importedPrefix = "Imported session from "

// ParseFile reads the Gemini CLI session file at path.
func ParseFile(path string) (harness.ParsedFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return harness.ParsedFile{}, err
	}
	defer f.Close()
	return Parse(f, path)
}

// maxLegacy caps a legacy (one JSON object) session file.
const maxLegacy = 256 << 20

// Parse reads a Gemini CLI session from r; name labels skips and errors,
// and, being the file's path, says where to look for its project's root
// and for the file a copy was imported from.
//
// The file's runs are its messages as Gemini CLI would resume them (the
// main line), then one run per branch that a rewind or a rewrite left,
// each holding only its own messages. Lines that cannot be read are
// skipped and listed; an incomplete last line (Gemini CLI is still
// writing) is left unread and Offset ends before it.
func Parse(r io.Reader, name string) (harness.ParsedFile, error) {
	c, off, err := fold(r, name, false)
	if err != nil {
		return harness.ParsedFile{Skipped: c.skipped, Offset: off}, err
	}
	pf := harness.ParsedFile{Offset: off}
	pf.Runs = c.runs()
	pf.Skipped = c.skipped
	return pf, nil
}

// fold reads r into a conv: JSON lines, or one JSON object (the format
// Gemini CLI wrote before JSON lines, session-*.json).
func fold(r io.Reader, name string, keepRaw bool) (*conv, int64, error) {
	c := newConv(name)
	c.keepRaw = keepRaw
	br := bufio.NewReaderSize(r, 64<<10)
	if legacy(br) {
		b, err := io.ReadAll(io.LimitReader(br, maxLegacy+1))
		if err != nil {
			return c, 0, fmt.Errorf("%s: %w", name, err)
		}
		if len(b) > maxLegacy {
			c.skip(1, fmt.Sprintf("a session file of one JSON object over %d MiB", maxLegacy>>20))
			return c, int64(len(b)), nil
		}
		if !json.Valid(b) {
			// Still being written, or cut: read it again next time.
			c.skip(1, "a session file of one JSON object that is not whole JSON (yet)")
			return c, 0, nil
		}
		c.take(1, b)
		return c, int64(len(b)), nil
	}
	var off int64
	lr := jsonl.NewReader(br, jsonl.DefaultMax)
	defer lr.Close()
	for lr.Next() {
		l := lr.Line()
		if l.Partial {
			break // still being written
		}
		off += l.Size
		text := bytes.TrimSpace(l.Text)
		switch {
		case l.TooLong:
			c.skip(l.Number, lr.TooLongReason())
		case len(text) == 0:
		default:
			c.take(l.Number, text)
		}
	}
	if err := lr.Err(); err != nil {
		return c, off, fmt.Errorf("%s: %w", name, err)
	}
	return c, off, nil
}

// legacy reports whether the file is one JSON object spread over lines,
// as JSON.stringify(conversation, null, 2) writes it: its first line is
// "{" alone. (A JSON-lines file whose first line is broken is not one.)
func legacy(br *bufio.Reader) bool {
	head, _ := br.Peek(64 << 10)
	head = bytes.TrimPrefix(head, []byte("\xef\xbb\xbf"))
	first := head
	if i := bytes.IndexByte(first, '\n'); i >= 0 {
		first = first[:i]
	}
	return string(bytes.TrimSpace(first)) == "{"
}

// contextText reports whether a user message is context Gemini CLI adds
// itself (an environment block, a hook's context), which it leaves out of
// a resumed conversation: tine shows it as a system message.
func contextText(s string) bool {
	s = strings.TrimSpace(s)
	return strings.HasPrefix(s, "<session_context>") || strings.HasPrefix(s, "<hook_context>")
}

// callID is a call's id as the model API gave it: Gemini CLI prefixes
// the ids it keeps with the tool's name and "__" and takes that off again
// when it sends them.
func callID(name, id string) string {
	if n := strings.TrimSpace(name); n != "" {
		return strings.TrimPrefix(id, n+"__")
	}
	return id
}

// answers is, for each call id, the message record whose functionResponse
// stands for its result: one Gemini CLI wrote when the tool ran, else the
// "<id>_response" record a resume writes from the call's own result.
func (c *conv) answers() map[string]string {
	ans := map[string]string{}
	for _, n := range c.nodes {
		rec := n.rec
		if rec.Type != "user" {
			continue
		}
		id := *rec.ID
		for _, p := range parts(rec.Content) {
			if fr := p.FunctionResponse; fr != nil {
				cid := callID(fr.Name, fr.ID)
				if prev, ok := ans[cid]; !ok || (strings.HasSuffix(prev, "_response") && !strings.HasSuffix(id, "_response")) {
					ans[cid] = id
				}
			}
		}
	}
	return ans
}

// converter turns records into messages, knowing the whole file.
type converter struct {
	answers map[string]string
	status  map[string]string // call id → the status Gemini CLI gave it
}

func (c *conv) converter() *converter {
	cv := &converter{answers: c.answers(), status: map[string]string{}}
	for _, n := range c.nodes {
		for _, tc := range n.rec.ToolCalls {
			cv.status[callID(tc.Name, tc.ID)] = tc.Status
		}
	}
	return cv
}

// messages converts one record: none for bookkeeping (info, errors, an
// empty answer, tool results told elsewhere), one for most, two for an
// answer whose calls' results only it holds (Gemini CLI before it wrote
// them as records of their own).
func (cv *converter) messages(rec record) []model.Message {
	id := *rec.ID
	m := model.Message{NativeID: id}
	if t, err := time.Parse(time.RFC3339Nano, rec.Timestamp); err == nil {
		m.Time = t
	}
	switch rec.Type {
	case "user":
		m.Role = model.User
		for _, p := range parts(rec.Content) {
			if fr := p.FunctionResponse; fr != nil {
				cid := callID(fr.Name, fr.ID)
				if cv.answers[cid] != id {
					continue // a second copy of the result, told by another record
				}
				m.Parts = append(m.Parts, cv.result(cid, fr.Name, fr.Response))
				continue
			}
			m.Parts = append(m.Parts, plainPart(p))
		}
		if len(m.Parts) == 0 {
			return nil
		}
		if m.Parts[0].Kind == model.ToolResult {
			m.Role = model.Tool
		} else if m.Parts[0].Kind == model.Text && contextText(m.Parts[0].Text) {
			m.Role = model.System
		}
		return []model.Message{m}
	case "gemini":
	default:
		return nil
	}
	m.Role, m.Model = model.Assistant, rec.Model
	if t := rec.Tokens; t != nil {
		m.Usage = model.Usage{InputTokens: max(t.Input-t.Cached, 0) + t.Tool, OutputTokens: t.Output + t.Thoughts, CacheReadTokens: t.Cached}
	}
	content := parts(rec.Content)
	inContent := false
	for _, p := range content {
		inContent = inContent || p.FunctionCall != nil || p.Thought
	}
	if !inContent {
		// As Gemini CLI resumes such a record: its thoughts, its text,
		// then its tool calls.
		for _, t := range rec.Thoughts {
			text := t.Description
			if t.Subject != "" {
				text = "**" + t.Subject + "** " + t.Description
			}
			m.Parts = append(m.Parts, model.Part{Kind: model.Thinking, Text: text})
		}
	}
	for _, p := range content {
		if p.Text != nil && *p.Text == "" && p.FunctionCall == nil {
			continue
		}
		m.Parts = append(m.Parts, plainPart(p))
	}
	if !inContent {
		for _, tc := range rec.ToolCalls {
			m.Parts = append(m.Parts, model.Part{Kind: model.ToolCall, ToolCallID: callID(tc.Name, tc.ID), ToolName: tc.Name, ToolInput: args(tc.Args)})
		}
	}
	if len(m.Parts) == 0 {
		return nil
	}
	m.Parts = joinThoughts(m.Parts)
	out := []model.Message{m}
	// The results only this record holds.
	res := model.Message{Role: model.Tool, NativeID: id + "_response", Time: m.Time}
	for _, tc := range rec.ToolCalls {
		cid := callID(tc.Name, tc.ID)
		if _, told := cv.answers[cid]; told || len(bytes.TrimSpace(tc.Result)) == 0 || string(tc.Result) == "null" {
			continue
		}
		found := false
		for _, p := range parts(tc.Result) {
			if fr := p.FunctionResponse; fr != nil {
				res.Parts = append(res.Parts, cv.result(cid, tc.Name, fr.Response))
				found = true
			}
		}
		if !found { // a result that is text
			var s string
			if json.Unmarshal(tc.Result, &s) != nil {
				s = strings.TrimSpace(string(tc.Result))
			}
			res.Parts = append(res.Parts, model.Part{Kind: model.ToolResult, ToolCallID: cid, ToolName: tc.Name, Text: s, IsError: tc.Status == "error"})
		}
	}
	if len(res.Parts) > 0 {
		out = append(out, res)
	}
	return out
}

// joinThoughts makes adjacent thinking parts one: Gemini CLI keeps each
// streamed piece of a thought as a thought of its own.
func joinThoughts(ps []model.Part) []model.Part {
	out := ps[:0]
	for _, p := range ps {
		if n := len(out); n > 0 && p.Kind == model.Thinking && out[n-1].Kind == model.Thinking {
			out[n-1].Text += "\n" + p.Text
			continue
		}
		out = append(out, p)
	}
	return out
}

// args is a call's arguments as compact JSON (a legacy file's are
// indented).
func args(raw json.RawMessage) string {
	s := bytes.TrimSpace(raw)
	if len(s) == 0 || string(s) == "null" {
		return "{}"
	}
	var b bytes.Buffer
	if json.Compact(&b, s) == nil {
		return b.String()
	}
	return string(s)
}

// result is a tool result part for call id.
func (cv *converter) result(id, name string, response json.RawMessage) model.Part {
	out, isErr := responseText(response)
	st := cv.status[id]
	return model.Part{Kind: model.ToolResult, ToolCallID: id, ToolName: name, Text: out, IsError: isErr || st == "error" || st == "cancelled"}
}

// plainPart is a content part that is not a function response.
func plainPart(p part) model.Part {
	switch {
	case p.FunctionCall != nil:
		return model.Part{Kind: model.ToolCall, ToolCallID: callID(p.FunctionCall.Name, p.FunctionCall.ID), ToolName: p.FunctionCall.Name, ToolInput: args(p.FunctionCall.Args)}
	case p.Text != nil && p.Thought:
		return model.Part{Kind: model.Thinking, Text: *p.Text}
	case p.Text != nil:
		return model.Part{Kind: model.Text, Text: *p.Text}
	case p.InlineData != nil:
		return model.Part{Kind: model.Image, Raw: string(p.raw)}
	}
	return model.Part{Kind: model.Other, Raw: string(p.raw)}
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

// runs lays the file out as runs: the main line (the session as Gemini
// CLI would resume it), then each branch off it in the order its last
// message was written, holding only its own messages.
func (c *conv) runs() []harness.ParsedRun {
	cv := c.converter()
	msgs := make([][]model.Message, len(c.nodes))
	var all []model.Message
	for i, n := range c.nodes {
		msgs[i] = cv.messages(n.rec)
		all = append(all, msgs[i]...)
	}
	c.dir = c.cwd(all)
	if !resumable(msgs) {
		return nil // an empty session (only its context): Gemini CLI lists none either
	}
	hasChild := make([]bool, len(c.nodes))
	onLine := make([]bool, len(c.nodes))
	for _, n := range c.nodes {
		if n.parent >= 0 {
			hasChild[n.parent] = true
		}
	}
	for _, i := range c.line {
		onLine[i] = true
	}
	leaves := []int{-1} // the main line first
	for i := range c.nodes {
		if !hasChild[i] && !onLine[i] {
			leaves = append(leaves, i)
		}
	}
	owner := make([]int, len(c.nodes))
	for i := range owner {
		owner[i] = -1
	}
	var runs []harness.ParsedRun
	for _, leaf := range leaves {
		var own []int // first to last
		pr := harness.ParsedRun{Parent: -1}
		if leaf < 0 {
			own = c.line
		} else {
			i := leaf
			for ; i >= 0 && owner[i] < 0 && len(own) <= len(c.nodes); i = c.nodes[i].parent {
				own = append(own, i)
			}
			for a, b := 0, len(own)-1; a < b; a, b = a+1, b-1 {
				own[a], own[b] = own[b], own[a]
			}
			pr.Parent = 0
			if i >= 0 {
				pr.Parent, pr.ForkAt = owner[i], c.depth(i, msgs)
			}
			if len(runs) == 0 { // the main line holds nothing: this is the first run
				pr.Parent, pr.ForkAt = -1, 0
			}
		}
		var ms []model.Message
		for _, i := range own {
			ms = append(ms, msgs[i]...)
		}
		if len(ms) == 0 {
			continue
		}
		for _, i := range own {
			owner[i] = len(runs)
		}
		pr.Run = c.run(ms)
		pr.Messages = ms
		if leaf < 0 {
			pr.Fork = c.forkHint(own, msgs)
			pr.Subagent = c.subagent()
			// A fork's own spending only (rule 6 in ARCHITECTURE.md).
			if pr.Fork != nil {
				pr.Run.Usage = model.Usage{}
				for _, m := range ms[pr.Fork.Inherited:] {
					pr.Run.Usage = pr.Run.Usage.Add(m.Usage)
				}
			}
		}
		runs = append(runs, pr)
	}
	// A branch's parent is a run before it: the main line is run 0.
	return runs
}

// resumable: the file holds a message beyond the context Gemini CLI adds.
func resumable(msgs [][]model.Message) bool {
	for _, ms := range msgs {
		for _, m := range ms {
			if m.Role != model.System {
				return true
			}
		}
	}
	return false
}

// depth is how many messages lead to node i, i's included.
func (c *conv) depth(i int, msgs [][]model.Message) int {
	d := 0
	for steps := 0; i >= 0 && steps <= len(c.nodes); i, steps = c.nodes[i].parent, steps+1 {
		d += len(msgs[i])
	}
	return d
}

// run is the Run of msgs.
func (c *conv) run(msgs []model.Message) model.Run {
	r := model.Run{Harness: Harness, Status: model.Completed, Cwd: c.dir}
	if c.meta.SessionID != nil {
		r.NativeID = *c.meta.SessionID
	}
	if t, err := time.Parse(time.RFC3339Nano, c.meta.StartTime); err == nil {
		r.CreatedAt = t
	}
	for _, m := range msgs {
		r.Usage = r.Usage.Add(m.Usage)
		if m.Model != "" {
			r.Model = m.Model
		}
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = msgs[0].Time
	}
	r.FinishedAt = msgs[len(msgs)-1].Time
	r.Title = model.TitleOf(msgs)
	if s := strings.TrimSpace(c.meta.Summary); s != "" {
		r.Title = model.OneLine(s, 120)
	}
	return r
}

// workspaceDirs finds the directories Gemini CLI's context block lists
// (compiled when first used, not at every tine start).
var workspaceDirs = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`\*\*Workspace Directories:\*\*\n((?:  - [^\n]+\n?)+)`)
})

// cwd is the session's project root: the first workspace directory its
// context names, or what its project folder's .project_root says, the one
// whose SHA-256 is the session's projectHash (when it has one).
func (c *conv) cwd(msgs []model.Message) string {
	var cands []string
	for _, m := range msgs {
		if m.Role != model.System {
			continue
		}
		if g := workspaceDirs().FindStringSubmatch(m.PlainText()); g != nil {
			first, _, _ := strings.Cut(g[1], "\n")
			cands = append(cands, strings.TrimSpace(strings.TrimPrefix(first, "  - ")))
			break
		}
	}
	if root := projectRoot(c.name); root != "" {
		cands = append(cands, root)
	}
	if c.meta.ProjectHash == nil {
		if len(cands) > 0 {
			return cands[0]
		}
		return ""
	}
	for _, d := range cands {
		sum := sha256.Sum256([]byte(d))
		if hex.EncodeToString(sum[:]) == *c.meta.ProjectHash {
			return d
		}
	}
	return ""
}

// projectRoot is what the .project_root file of the project folder a
// session file sits in says (<tmp>/<project>/chats/<file>, or a
// subagent's <tmp>/<project>/chats/<parent>/<file>).
func projectRoot(name string) string {
	dir := filepath.Dir(name)
	for range 2 {
		if filepath.Base(dir) == "chats" {
			b, err := os.ReadFile(filepath.Join(filepath.Dir(dir), ".project_root"))
			if err != nil || len(b) > 4096 {
				return ""
			}
			return strings.TrimSpace(string(b))
		}
		dir = filepath.Dir(dir)
	}
	return ""
}

// forkHint says the main line began as a copy of another session: a
// --session-file copy (its records after "Imported session from FILE" and
// before its first $set), or the JSON-lines file a resume converted a
// legacy session-*.json into (the records before its first $set, the
// same session's). nil when it did not.
func (c *conv) forkHint(own []int, msgs [][]model.Message) *harness.ForkHint {
	var copies map[string]bool
	parent := ""
	switch {
	case c.importedFrom != "" && len(c.copies) > 0:
		copies, parent = c.copies, sourceSession(c.importedFrom)
	case strings.HasSuffix(c.name, ".jsonl") && c.meta.SessionID != nil && len(c.headerCopies) > 0:
		if legacyID, _ := sessionIDOf(strings.TrimSuffix(c.name, "l")); legacyID == *c.meta.SessionID {
			copies, parent = c.headerCopies, legacyID
		}
	}
	if parent == "" || copies == nil {
		return nil
	}
	if c.meta.SessionID != nil && parent == *c.meta.SessionID && c.importedFrom != "" {
		return nil // a copy of itself: nothing to hang it on
	}
	n, after := 0, ""
	for _, i := range own {
		if len(msgs[i]) == 0 {
			continue // bookkeeping, or a result told by another record
		}
		id := *c.nodes[i].rec.ID
		// A copied call's results, which a resume writes anew as a record
		// of their own ("<id>_response"), are copies too.
		if !copies[id] && !copies[strings.TrimSuffix(id, "_response")] {
			if after == "" && !hasMessage(msgs[i]) {
				// The context a resume puts first (a copy of a session
				// that has none, as older files did not): counted with
				// the copies, so that they lead the file's messages.
				n += len(msgs[i])
				continue
			}
			break
		}
		n += len(msgs[i])
		after = msgs[i][len(msgs[i])-1].NativeID
	}
	if after == "" {
		return nil
	}
	return &harness.ForkHint{ParentSession: parent, Inherited: n, AfterMessage: after}
}

// sourceSession is the session a copy was imported from: the id in that
// file when it is still there, else the id its name holds (tine names
// the prefix files it writes after the session they branch).
func sourceSession(path string) string {
	if id, err := sessionIDOf(path); err == nil && id != "" {
		return id
	}
	base := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(path), ".jsonl"), ".json")
	if uuidLike(base) {
		return base
	}
	return ""
}

// uuidLike reports whether s is a UUID (8-4-4-4-12 hex digits).
func uuidLike(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return false
			}
		case !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'):
			return false
		}
	}
	return true
}

// sessionIDOf is the id of the session in the file at path: its header's
// (or a legacy file's), as a later $set may change it.
func sessionIDOf(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a session file", path)
	}
	c, _, err := fold(f, path, false)
	if err != nil {
		return "", err
	}
	if c.meta.SessionID == nil {
		return "", fmt.Errorf("%s names no session", path)
	}
	return *c.meta.SessionID, nil
}

// subagent says the session is a subagent's (kind "subagent", kept in
// chats/<parent session>/): a run started by a tool call of its parent.
func (c *conv) subagent() *harness.SubagentHint {
	if c.meta.Kind != "subagent" {
		return nil
	}
	dir := filepath.Dir(c.name)
	if filepath.Base(filepath.Dir(dir)) != "chats" {
		return nil
	}
	return &harness.SubagentHint{ParentSession: filepath.Base(dir)}
}
