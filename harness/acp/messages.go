package acp

import (
	"encoding/json"
	"strings"
	"sync"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"tine/harness"
	"tine/model"
)

// assembler turns a prompt turn's session/update notifications into
// messages: one assistant message gathers the text, thinking and tool calls
// the agent streams until a tool's result arrives, which ends it (and is
// emitted as a tool message); anything after starts the next one.
type assembler struct {
	model string
	now   func() time.Time
	push  func(harness.Event)
	cur   *model.Message // the open assistant message
	calls map[sdk.ToolCallId]*call
	// usageDone: the prompt turn's usage was placed (count it once).
	usageDone bool
}

// call is what the agent said of one tool call so far.
type call struct {
	metaName, title, kind string
	input                 string
	content               []sdk.ToolCallContent
	rawOutput             any
	msg                   *model.Message // the assistant message holding its part
	part                  int
	done                  bool
}

// name is what the call's part is named: the agent's own tool name when it
// says it (claude-agent-acp: _meta.claudeCode.toolName), else the kind of
// tool ACP gives it, else its title.
func (c *call) name() string {
	switch {
	case c.metaName != "":
		return c.metaName
	case c.kind != "" && c.kind != string(sdk.ToolKindOther):
		return c.kind
	}
	return c.title
}

// label names the call for a person: its name and, when it says more, its title.
func (c *call) label() string {
	n := c.name()
	if c.title != "" && c.title != n {
		n += " (" + model.OneLine(c.title, 80) + ")"
	}
	return n
}

func newAssembler(modelName string, now func() time.Time, push func(harness.Event)) *assembler {
	return &assembler{model: modelName, now: now, push: push, calls: map[sdk.ToolCallId]*call{}}
}

// open returns the open assistant message, starting one when none is.
func (a *assembler) open(msgID *string) *model.Message {
	if a.cur == nil {
		a.cur = &model.Message{Role: model.Assistant, Model: a.model, Time: a.now()}
	}
	if msgID != nil && a.cur.NativeID == "" {
		a.cur.NativeID = *msgID
	}
	return a.cur
}

// flush emits the open assistant message, if it holds anything.
func (a *assembler) flush() {
	m := a.cur
	a.cur = nil
	if m == nil || len(m.Parts) == 0 {
		return
	}
	a.push(harness.Event{Kind: harness.EventMessage, Message: *m})
}

// chunk adds streamed content: kind is model.Text for the agent's message,
// model.Thinking for its thoughts. Consecutive text joins one part.
func (a *assembler) chunk(kind model.PartKind, block sdk.ContentBlock, msgID *string) {
	if block.Text == nil {
		raw, _ := json.Marshal(block)
		pk := model.Other
		if block.Image != nil {
			pk = model.Image
		}
		m := a.open(msgID)
		m.Parts = append(m.Parts, model.Part{Kind: pk, Raw: string(raw)})
		return
	}
	text := block.Text.Text
	if text == "" {
		return
	}
	m := a.open(msgID)
	if n := len(m.Parts); n > 0 && m.Parts[n-1].Kind == kind {
		m.Parts[n-1].Text += text
	} else {
		m.Parts = append(m.Parts, model.Part{Kind: kind, Text: text})
	}
	if kind == model.Text {
		a.push(harness.Event{Kind: harness.EventDelta, Delta: text})
	}
}

// toolUpdate is a tool_call or a tool_call_update, whose fields are the
// same but for optional ones.
type toolUpdate struct {
	id        sdk.ToolCallId
	meta      map[string]any
	title     *string
	kind      *sdk.ToolKind
	status    *sdk.ToolCallStatus
	rawInput  any
	rawOutput any
	content   []sdk.ToolCallContent
}

func fromToolCall(u *sdk.SessionUpdateToolCall) toolUpdate {
	t := toolUpdate{id: u.ToolCallId, meta: u.Meta, title: &u.Title, rawInput: u.RawInput, rawOutput: u.RawOutput, content: u.Content}
	if u.Kind != "" {
		t.kind = &u.Kind
	}
	if u.Status != "" {
		t.status = &u.Status
	}
	return t
}

func fromToolCallUpdate(u *sdk.SessionToolCallUpdate) toolUpdate {
	return toolUpdate{id: u.ToolCallId, meta: u.Meta, title: u.Title, kind: u.Kind, status: u.Status,
		rawInput: u.RawInput, rawOutput: u.RawOutput, content: u.Content}
}

// tool records what the agent says of a tool call: the call becomes a part
// of the open assistant message, refined while that message is open; its
// end emits that message and then the result.
func (a *assembler) tool(u toolUpdate) {
	c := a.calls[u.id]
	if c == nil {
		c = &call{}
		a.calls[u.id] = c
	}
	if c.done {
		return // later updates (hooks) change nothing stored
	}
	if n := claudeToolName(u.meta); n != "" {
		c.metaName = n
	}
	if u.title != nil && *u.title != "" {
		c.title = *u.title
	}
	if u.kind != nil {
		c.kind = string(*u.kind)
	}
	if u.rawInput != nil {
		if b, err := json.Marshal(u.rawInput); err == nil {
			c.input = string(b)
		}
	}
	if u.content != nil {
		c.content = u.content
	}
	if u.rawOutput != nil {
		c.rawOutput = u.rawOutput
	}
	if c.msg == nil {
		m := a.open(nil)
		m.Parts = append(m.Parts, model.Part{Kind: model.ToolCall, ToolCallID: string(u.id)})
		c.msg, c.part = m, len(m.Parts)-1
	}
	if c.msg == a.cur {
		p := &a.cur.Parts[c.part]
		p.ToolName, p.ToolInput = c.name(), c.input
	}
	if u.status == nil || (*u.status != sdk.ToolCallStatusCompleted && *u.status != sdk.ToolCallStatusFailed) {
		return
	}
	c.done = true
	if c.msg == a.cur {
		a.flush()
	}
	a.push(harness.Event{Kind: harness.EventMessage, Message: model.Message{
		Role: model.Tool,
		Time: a.now(),
		Parts: []model.Part{{
			Kind:       model.ToolResult,
			ToolCallID: string(u.id),
			ToolName:   c.name(),
			Text:       c.resultText(),
			IsError:    *u.status == sdk.ToolCallStatusFailed,
		}},
	}})
}

// end closes the turn: the open message gets the prompt turn's usage (ACP
// reports usage per prompt, not per model call). It reports false when the
// turn's usage had no message to go on.
func (a *assembler) end(u *sdk.Usage) bool {
	usage := usageOf(u)
	ok := true
	if !a.usageDone && !usage.IsZero() {
		a.usageDone = true
		if a.cur != nil && len(a.cur.Parts) > 0 {
			a.cur.Usage = usage
		} else {
			ok = false
		}
	}
	a.flush()
	return ok
}

func usageOf(u *sdk.Usage) model.Usage {
	if u == nil {
		return model.Usage{}
	}
	us := model.Usage{InputTokens: int64(u.InputTokens), OutputTokens: int64(u.OutputTokens)}
	if u.CachedReadTokens != nil {
		us.CacheReadTokens = int64(*u.CachedReadTokens)
	}
	if u.CachedWriteTokens != nil {
		us.CacheWriteTokens = int64(*u.CachedWriteTokens)
	}
	return us
}

// claudeToolName is claude-agent-acp's name for the tool (Bash, Write...).
func claudeToolName(meta map[string]any) string {
	cc, _ := meta["claudeCode"].(map[string]any)
	n, _ := cc["toolName"].(string)
	return n
}

// resultText is a finished call's output: its rawOutput when that is text
// (what the model itself got back), else the text of its content.
func (c *call) resultText() string {
	if s, ok := plainText(c.rawOutput); ok {
		return s
	}
	var parts []string
	for _, tc := range c.content {
		switch {
		case tc.Content != nil && tc.Content.Content.Text != nil:
			parts = append(parts, tc.Content.Content.Text.Text)
		case tc.Diff != nil:
			parts = append(parts, "diff "+tc.Diff.Path+"\n"+tc.Diff.NewText)
		case tc.Terminal != nil:
			parts = append(parts, "(terminal "+tc.Terminal.TerminalId+")")
		}
	}
	if len(parts) == 0 && c.rawOutput != nil {
		b, _ := json.Marshal(c.rawOutput)
		return string(b)
	}
	return strings.Join(parts, "\n")
}

// plainText reads v as text: a string, or a list of {type: text} blocks.
func plainText(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case []any:
		var b strings.Builder
		for _, e := range v {
			m, _ := e.(map[string]any)
			s, ok := m["text"].(string)
			if !ok || m["type"] != "text" {
				return "", false
			}
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(s)
		}
		return b.String(), len(v) > 0
	}
	return "", false
}

// emitter calls emit, in order, on one goroutine: the SDK hands session
// updates over from a bounded queue and closes the connection when it
// overflows, so they must never wait for the store or the screen.
type emitter struct {
	mu     sync.Mutex
	cond   *sync.Cond
	q      []harness.Event
	closed bool
	done   chan struct{}
}

func newEmitter(emit func(harness.Event)) *emitter {
	e := &emitter{done: make(chan struct{})}
	e.cond = sync.NewCond(&e.mu)
	go func() {
		defer close(e.done)
		for {
			e.mu.Lock()
			for len(e.q) == 0 && !e.closed {
				e.cond.Wait()
			}
			q := e.q
			e.q = nil
			closed := e.closed
			e.mu.Unlock()
			for _, ev := range q {
				emit(ev)
			}
			if closed && len(q) == 0 {
				return
			}
		}
	}()
	return e
}

func (e *emitter) push(ev harness.Event) {
	e.mu.Lock()
	e.q = append(e.q, ev)
	e.mu.Unlock()
	e.cond.Signal()
}

// close waits until every pushed event was emitted.
func (e *emitter) close() {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.cond.Signal()
	<-e.done
}
