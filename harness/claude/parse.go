package claude

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"tine/harness"
	"tine/internal/jsonl"
	"tine/model"
)

// Parse reads a Claude Code transcript from r; name (a path or a label)
// names the file in skips and gives the session id when its base name is
// one (<session id>.jsonl). When name is the path of a subagent's file
// (agent-<id>.jsonl), its sidecar agent-<id>.meta.json is read too, for the
// tool call that started the subagent (see ParseFile).
//
// The records form a tree by uuid/parentUuid. The main line is the path to
// the newest leaf; every other leaf's path is an in-file branch (a rewind)
// holding only its own messages. Sidechains (subagents) are runs of their
// own with a SubagentHint. Malformed lines, and lines over 64 MiB
// (jsonl.DefaultMax), are skipped and listed; a last line without its
// newline (Claude is still writing) is left unread, and Offset stops
// before it. Parse fails only when r does.
func Parse(r io.Reader, name string) (harness.ParsedFile, error) {
	return parse(r, name, subagentInfo(name))
}

// fileInfo is what ParseFile knows besides the bytes: the subagent's
// sidecar metadata.
type fileInfo struct {
	path        string // the subagent file's path on disk, "" when not one
	toolUseID   string // the Agent/Task call that started a subagent
	description string // the subagent's task description
}

func parse(r io.Reader, name string, info fileInfo) (harness.ParsedFile, error) {
	p := newParser(name, info)
	p.lean = true // only the runs are wanted: build may drop the records
	if err := p.read(r); err != nil {
		return p.file, err
	}
	p.file.Runs = p.build()
	return p.file, nil
}

// read handles every complete line of r; a last line without its newline
// (Claude is still writing it) is left for the next import, and one over
// the cap is listed as skipped. Turns (turn.go) use it too, to reach a
// file's records after build.
func (p *parser) read(r io.Reader) error {
	lr := jsonl.NewReader(r, jsonl.DefaultMax)
	defer lr.Close()
	for lr.Next() {
		l := lr.Line()
		if l.Partial {
			break
		}
		p.line = l.Number
		p.file.Offset += l.Size
		if l.TooLong {
			p.skip(lr.TooLongReason())
			continue
		}
		p.handle(l.Text)
		if l.Offset >= p.split.from && p.split.workers > 1 {
			// A long file: its other lines are decoded on every core.
			p.readParallel(lr)
			break
		}
	}
	if err := lr.Err(); err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	return nil
}

// kind is what a chain record contributes to the conversation.
type kind uint8

const (
	kPass      kind = iota // in the chain, but no message (attachments, bookkeeping, meta)
	kMessage               // a user or assistant message
	kCompact               // a compact_boundary
	kSummary               // the summary a compaction leaves (isCompactSummary)
	kLocalEcho             // a slash command's output, shown to the person: a system message
)

// node is one chain record (a record with a uuid).
//
// A long session has hundreds of thousands of records: what only a few of
// them carry is kept beside (parser.unknown, parser.copiedFrom).
type node struct {
	uuid string
	// known is the parent's index + 1 when the parent was read before
	// the record; a parent named but not read yet is in parser.unknown.
	known    int32
	explicit bool  // parentUuid was null: a deliberate root
	parent   int32 // index in parser.nodes, -1 for a root
	group    int32
	msg      int32 // the message this record belongs to or sits under, -1 for none
	state    uint8
	kind     kind
	pay      int32 // index in parser.pays, -1 for none
	// copied is 1 + the index in parser.copiedFrom of the session a fork
	// copied this record from; 0 for a record that is not a copy.
	copied int32
	line   int32 // its line in the file, for what is said about it
}

// pay is the message a record carries, before records are merged.
type pay struct {
	msg   model.Message
	msgID string
	// carrier: a user record holding only tool results.
	carrier bool
	// at and n say where the message's parts are in the spill file when
	// they were spilled (n > 0; msg.Parts is nil then).
	at int64
	n  int32
}

// group is one conversation tree in the file: the main chain, or one
// sidechain (a subagent).
type group struct {
	agentID   string
	sidechain bool
	key       string // its key in parser.byKey
	session   string // the sessionId its records carry
	cwd       string
	branch    string
	first     time.Time
	last      time.Time
	firstNode int32 // its first record
}

// msgNode is a message of the tree being built.
type msgNode struct {
	msgID  string
	parent int32
	// child and lastChild are its first and last children, next its next
	// sibling (-1: none): a list in the order they were placed, with no
	// slice to allocate for each of a long session's messages.
	child, lastChild, next int32
	group                  int32
	first                  int32 // its first record
	last                   int32 // the newest record that belongs to it or sits under it
	carrier                bool
	open                   bool  // a compact boundary still waiting for its summary
	live                   bool  // a message: false for a payload merged into another
	copied                 int32 // as node.copied
	depth                  int32
	owner                  int32
}

type parser struct {
	name  string
	info  fileInfo
	split split
	seen  seen // the sequential decoder's
	// lean: the caller wants only the runs, not the records after build
	// (a long session holds hundreds of thousands).
	lean bool
	// spillFrom is the offset past which messages' parts go to the spill
	// file (ParseStream), -1 for never; spill is that file once made.
	spillFrom int64
	spill     *spill
	// merged are, once parts are spilled, the payloads whose parts join
	// message m's, in order (an assistant's later blocks, a compaction's
	// summary): they are put together as the message is read back.
	merged map[int32][]int32
	file   harness.ParsedFile
	line   int

	nodes  pages[node]
	pays   pages[pay]
	groups []group
	byUUID map[string]int32
	// unknown holds, by record index, the parent uuid a record names that
	// was not read before it (written later, or never).
	unknown map[int32]string
	// copiedFrom are the sessions records were copied from (their
	// requestSessionId, or a foreign sessionId in older versions), each
	// once; copiedIndex finds one.
	copiedFrom  []string
	copiedIndex map[string]int32
	byKey       map[string]int32 // group key -> index

	ownSession  string // from the file name, when it holds one
	lastSession string // the sessionId of the last main-chain record
	firstTime   time.Time
	lastTime    time.Time

	customTitle, aiTitle string
	summaries            []titleRef // summary records: a title for a leaf
	summaryTitle         string     // the newest summary's whose leaf is in the file
	cost                 float64
	haveCost             bool
	forkRef              map[string]bool // agent ids with a fork-context-ref

	// msgs are the messages of the tree, indexed as pays: a message is
	// numbered after the payload of its first record, and holds its
	// content there (msg), so that a long session's messages are not held
	// twice while the tree is built. A payload merged into an earlier
	// message leaves its slot unused (msgNode.live false).
	msgs    []msgNode
	byMsgID map[string]int32
	calls   map[string]string // tool call id -> tool name
	tasks   []taskCall        // the calls that start subagents, in file order
}

// taskCall is a Task (Agent, in 2.x) call: what started a subagent.
type taskCall struct {
	id, prompt string
	at         int32 // the record holding it
	used       bool  // matched to a subagent already
}

type titleRef struct{ text, leaf string }

func newParser(name string, info fileInfo) *parser {
	p := &parser{
		name:      name,
		info:      info,
		split:     defaultSplit(),
		spillFrom: -1,
		byUUID:    map[string]int32{},
		unknown:   map[int32]string{},
		byKey:     map[string]int32{},
		byMsgID:   map[string]int32{},
		calls:     map[string]string{},
	}
	base := strings.TrimSuffix(filepath.Base(name), ".jsonl")
	if looksLikeUUID(base) {
		p.ownSession = base
	}
	return p
}

func (p *parser) skip(reason string) {
	p.file.Skipped = append(p.file.Skipped, harness.Skip{File: p.name, Line: p.line, Reason: reason})
}

// fields are the top-level values of a record that tine reads; the rest
// (often most of the bytes) is skipped unread.
type fields struct {
	typ, uuid, parent, logicalParent, session, timestamp    []byte
	cwd, branch, sidechain, agentID, requestSession         []byte
	isMeta, compactSummary, message, subtype, compactMeta   []byte
	summary, leaf, customTitle, aiTitle, totalCost, content []byte
}

// meta reads a record outside the chain: titles, cost, fork references.
// Everything else there (queue operations, request shapes and blobs, modes,
// last prompts) is bookkeeping tine does not need.
func (p *parser) meta(d *record) {
	switch d.typ {
	case "user", "assistant":
		p.skip(d.typ + " record without a uuid")
	case "custom-title":
		if d.customTitle != "" {
			p.customTitle = d.customTitle
		}
	case "ai-title":
		if d.aiTitle != "" {
			p.aiTitle = d.aiTitle
		}
	case "summary":
		if d.summary != "" {
			p.summaries = append(p.summaries, titleRef{text: d.summary, leaf: d.leaf})
		}
	case "cost-state":
		if d.hasCost {
			p.cost, p.haveCost = d.cost, true
		}
	case "fork-context-ref":
		// A "fork" subagent inherits its parent's context by reference
		// and starts with a copy of the parent's calling message.
		if a := d.agentID; a != "" {
			if p.forkRef == nil {
				p.forkRef = map[string]bool{}
			}
			p.forkRef[a] = true
		}
	}
}

// groupKey names the tree a record belongs to: "" for the main chain,
// "agent:<id>" for a subagent's sidechain. Claude Code 1.x wrote its Task
// subagents into the session's file without an agentId: each of those
// starts at a root of its own (a null parentUuid), and its records follow
// their parents there.
func (p *parser) groupKey(sidechain bool, agentID, uuid string, i int32, n *node) string {
	switch {
	case !sidechain:
		return ""
	case agentID != "":
		return "agent:" + agentID
	case n.explicit:
		return "sidechain:" + uuid
	}
	if j, ok := p.parentOf(i, n); ok && p.groups[p.nodes.at(j).group].sidechain {
		return p.groups[p.nodes.at(j).group].key
	}
	return "agent:"
}

// groupOf finds or makes the tree a record belongs to: the main chain, or
// the sidechain of one agent.
func (p *parser) groupOf(key, agentID, session, cwd, branch string, ts time.Time) int32 {
	sidechain := key != ""
	g, ok := p.byKey[key]
	if !ok {
		g = int32(len(p.groups))
		p.groups = append(p.groups, group{agentID: agentID, sidechain: sidechain, key: key, firstNode: int32(p.nodes.len())})
		p.byKey[key] = g
	}
	gr := &p.groups[g]
	if session != "" {
		gr.session = session
		if !sidechain {
			p.lastSession = session
		}
	}
	if gr.cwd == "" {
		gr.cwd = cwd
	}
	if b := branch; b != "" {
		gr.branch = b
	}
	if !ts.IsZero() {
		if gr.first.IsZero() {
			gr.first = ts
		}
		if ts.After(gr.last) {
			gr.last = ts
		}
	}
	return g
}

// compactText describes a compaction boundary from its metadata.
func compactText(meta []byte) string {
	var trigger string
	var pre int64
	o := members(meta)
	for k, v := range o.Members() {
		switch string(k) {
		case "trigger":
			trigger = strOr(v)
		case "preTokens":
			pre, _ = model.ParseTokens(string(v))
		}
	}
	var b strings.Builder
	b.WriteString("conversation compacted")
	switch {
	case trigger != "" && pre > 0:
		fmt.Fprintf(&b, " (%s, %d tokens before)", trigger, pre)
	case pre > 0:
		fmt.Fprintf(&b, " (%d tokens before)", pre)
	case trigger != "":
		fmt.Fprintf(&b, " (%s)", trigger)
	}
	return b.String()
}

// looksLikeUUID reports the 8-4-4-4-12 hex shape of a session id.
func looksLikeUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// ---------------------------------------------------------------- the tree

// build links the records into trees of messages and cuts them into runs.
func (p *parser) build() []harness.ParsedRun {
	if p.nodes.len() == 0 {
		return nil
	}
	p.link()
	p.summaryTitle = p.titleOfSummaries()
	if p.lean {
		// Every parent is linked: the uuids are no longer looked up, nor
		// held but by the messages (their NativeIDs).
		p.byUUID, p.unknown = nil, nil
		for i := range p.nodes.len() {
			p.nodes.at(i).uuid = ""
		}
	}
	p.resolveAll()
	p.fillToolNames()
	p.rechain()
	if p.lean {
		p.nodes = pages[node]{}
	}
	var runs []harness.ParsedRun
	for _, g := range p.groupOrder() {
		runs = append(runs, p.groupRuns(g, len(runs))...)
	}
	if p.merged != nil {
		// The runs' streams read the payloads and the spill file only.
		p.msgs, p.byMsgID, p.tasks = nil, nil, nil
	}
	return runs
}

// own is the file's session id: from its name when that is a session id,
// else from its records, else (records other tools exported without
// one) the file's name.
func (p *parser) own() string {
	switch {
	case p.ownSession != "":
		return p.ownSession
	case p.lastSession != "":
		return p.lastSession
	}
	return strings.TrimSuffix(filepath.Base(p.name), ".jsonl")
}

// link resolves parentUuid to node indexes. A parent that is missing (a
// skipped line, a record the CLI pruned) or in another tree falls back to
// the record written just before in the same tree, so one bad line does
// not cut a conversation in two, and the record is listed as a Skip that
// says so; a null parentUuid is a deliberate root.
func (p *parser) link() {
	prev := make([]int32, len(p.groups))
	for i := range prev {
		prev[i] = -1
	}
	for i := range p.nodes.len() {
		n := p.nodes.at(i)
		g := n.group
		j, ok := p.parentOf(i, n)
		switch {
		case ok && p.nodes.at(j).group == g && j != i:
			n.parent = j
		case n.explicit:
		default:
			n.parent = prev[g]
			if name := p.parentName(i, n); name != "" {
				where := "is not in the file"
				if ok {
					where = "is in another conversation of the file"
				}
				placed := "placed after the record before it"
				if n.parent < 0 {
					placed = "it starts the conversation"
				} else if pn := p.nodes.at(n.parent); pn.line > 0 {
					placed = fmt.Sprintf("placed after the record on line %d", pn.line)
				}
				s := harness.Skip{File: p.name, Line: int(n.line),
					Reason: fmt.Sprintf("record %s: its parent %s %s; %s", n.uuid, name, where, placed)}
				if !ok {
					s.MissingParent = name
				}
				p.file.Skipped = append(p.file.Skipped, s)
			}
		}
		prev[g] = i
	}
	// Skips were listed as lines were read; these come from the tree.
	slices.SortStableFunc(p.file.Skipped, func(a, b harness.Skip) int { return a.Line - b.Line })
}

// parentOf is the index of the record n (record i) names as its parent,
// when that is in the file.
func (p *parser) parentOf(i int32, n *node) (int32, bool) {
	if n.known > 0 {
		return n.known - 1, true
	}
	name, ok := p.unknown[i]
	if !ok {
		return 0, false
	}
	j, ok := p.byUUID[name]
	return j, ok
}

// parentName is the uuid n (record i) names as its parent, "" for none.
func (p *parser) parentName(i int32, n *node) string {
	if n.known > 0 {
		return p.nodes.at(n.known - 1).uuid
	}
	return p.unknown[i]
}

// copiedRef is the node.copied of a record copied from session.
func (p *parser) copiedRef(session string) int32 {
	if k, ok := p.copiedIndex[session]; ok {
		return k
	}
	if p.copiedIndex == nil {
		p.copiedIndex = map[string]int32{}
	}
	p.copiedFrom = append(p.copiedFrom, session)
	k := int32(len(p.copiedFrom))
	p.copiedIndex[session] = k
	return k
}

const (
	unresolved uint8 = iota
	resolving
	resolved
)

// resolveAll places every record: it starts a message, joins the message
// it continues, or sits under the nearest message above it.
func (p *parser) resolveAll() {
	// A message starts at a record with a payload, and is numbered
	// after it. A slot no message takes links to nothing, so that a walk
	// that reaches it finds no message 0 there.
	p.msgs = make([]msgNode, p.pays.len())
	for i := range p.msgs {
		p.msgs[i] = msgNode{parent: -1, child: -1, lastChild: -1, next: -1, owner: -1}
	}
	var stack []int32
	for i := range p.nodes.len() {
		if p.nodes.at(i).state == resolved {
			continue
		}
		// Walk up to the first resolved ancestor, then place downwards,
		// so parents written after their children are fine too.
		stack = stack[:0]
		j := int32(i)
		for j >= 0 && p.nodes.at(j).state == unresolved {
			p.nodes.at(j).state = resolving
			stack = append(stack, j)
			j = p.nodes.at(j).parent
		}
		if j >= 0 && p.nodes.at(j).state == resolving {
			// A cycle (a corrupt file): cut it at its top.
			p.nodes.at(stack[len(stack)-1]).parent = -1
		}
		for k := len(stack) - 1; k >= 0; k-- {
			p.place(stack[k])
			p.nodes.at(stack[k]).state = resolved
		}
	}
}

// place decides which message record i belongs to.
func (p *parser) place(i int32) {
	n := p.nodes.at(i)
	pm := int32(-1)
	if n.parent >= 0 {
		pm = p.nodes.at(n.parent).msg
	}
	switch n.kind {
	case kPass:
		n.msg = pm
	case kMessage, kCompact, kLocalEcho:
		pl := p.pays.at(n.pay)
		// Claude writes one assistant record per content block, chained,
		// all with the same message.id: they are one message. It runs a
		// tool as soon as its block is written, so the results of the
		// blocks before may sit in the chain between two of them: the
		// message is still one model response, and its results follow it.
		if pm >= 0 && pl.msgID != "" && pl.msg.Role == model.Assistant {
			if q := p.sameResponse(pm, pl.msgID); q >= 0 {
				pmn, pmm := &p.msgs[q], p.msg(q)
				pm = q
				p.join(q, n.pay)
				pmm.Usage = maxUsage(pmm.Usage, pl.msg.Usage)
				if pmm.Model == "" {
					pmm.Model = pl.msg.Model
				}
				if pmn.copied == 0 {
					pmn.copied = n.copied
				}
				n.msg = pm
				p.touch(pm, i)
				return
			}
		}
		n.msg = p.newMessage(pm, i, pl)
	case kSummary:
		pl := p.pays.at(n.pay)
		if pm >= 0 && p.msgs[pm].open {
			// The summary belongs with its boundary: it is what the
			// model reads instead of the history, not something typed.
			pmn := &p.msgs[pm]
			p.join(pm, n.pay)
			pmn.open = false
			n.msg = pm
			p.touch(pm, i)
			return
		}
		n.msg = p.newMessage(pm, i, pl)
	}
	if n.msg >= 0 {
		p.touch(n.msg, i)
	}
}

// join adds payload k's parts to message m's.
func (p *parser) join(m, k int32) {
	if p.merged != nil {
		p.merged[m] = append(p.merged[m], k)
		return
	}
	pmm := p.msg(m)
	pmm.Parts = append(pmm.Parts, p.pays.at(k).msg.Parts...)
}

// parts are message m's parts: read back from the spill file and put
// together, once parts were spilled, and then with the tool results named
// after their calls (fillToolNames does that for messages held whole).
func (p *parser) parts(m int32) ([]model.Part, error) {
	if p.merged == nil {
		return p.msg(m).Parts, nil
	}
	parts, err := p.payParts(m, nil)
	for _, k := range p.merged[m] {
		if err == nil {
			parts, err = p.payParts(k, parts)
		}
	}
	if err != nil {
		return nil, err
	}
	p.nameResults(parts)
	return parts, nil
}

// payParts appends payload k's own parts to dst.
func (p *parser) payParts(k int32, dst []model.Part) ([]model.Part, error) {
	pl := p.pays.at(k)
	if pl.n == 0 {
		return append(dst, pl.msg.Parts...), nil
	}
	return p.spill.get(pl.at, pl.n, dst)
}

// sameResponse is the assistant message with message.id id that a block
// record under message pm continues: pm itself, or the message above the
// tool results of its earlier blocks; -1 when there is none.
func (p *parser) sameResponse(pm int32, id string) int32 {
	for steps := 0; pm >= 0 && steps < 256; steps++ {
		mn := &p.msgs[pm]
		switch {
		case p.msg(pm).Role == model.Assistant:
			if mn.msgID == id {
				return pm
			}
			return -1
		case !mn.carrier:
			return -1
		}
		pm = mn.parent
	}
	return -1
}

// touch notes that record i belongs to or sits under message m.
func (p *parser) touch(m, i int32) {
	if i > p.msgs[m].last {
		p.msgs[m].last = i
	}
}

func (p *parser) newMessage(parent, i int32, pl *pay) int32 {
	n := p.nodes.at(i)
	m := n.pay
	p.msgs[m] = msgNode{
		msgID: pl.msgID, parent: parent, group: n.group,
		first: i, last: i, carrier: pl.carrier, copied: n.copied,
		open: n.kind == kCompact, owner: -1, live: true,
		child: -1, lastChild: -1, next: -1,
	}
	msg := &pl.msg
	if n.kind == kCompact || n.kind == kSummary || n.kind == kLocalEcho {
		msg.Role = model.System
	}
	// Usage is counted once per API message: a message id seen before
	// (a record copied twice, a re-written block) adds nothing new.
	if pl.msgID != "" {
		if q, seen := p.byMsgID[pl.msgID]; seen {
			qm := p.msg(q)
			qm.Usage = maxUsage(qm.Usage, msg.Usage)
			msg.Usage = model.Usage{}
		} else {
			p.byMsgID[pl.msgID] = m
		}
	}
	if parent >= 0 {
		p.addChild(parent, m)
	}
	return m
}

// addChild makes message c the last child of message m.
func (p *parser) addChild(m, c int32) {
	mn := &p.msgs[m]
	p.msgs[c].next = -1
	if mn.lastChild < 0 {
		mn.child = c
	} else {
		p.msgs[mn.lastChild].next = c
	}
	mn.lastChild = c
}

// children appends message m's children to dst, in order.
func (p *parser) children(dst []int32, m int32) []int32 {
	for c := p.msgs[m].child; c >= 0; c = p.msgs[c].next {
		dst = append(dst, c)
	}
	return dst
}

// setChildren makes list message m's children, in order.
func (p *parser) setChildren(m int32, list []int32) {
	p.msgs[m].child, p.msgs[m].lastChild = -1, -1
	for _, c := range list {
		p.addChild(m, c)
	}
}

// maxUsage keeps, field by field, the larger count: older versions wrote
// growing usage on each block record of a message, 2.x the final one on
// every record; either way the largest is the message's.
func maxUsage(a, b model.Usage) model.Usage {
	return model.Usage{
		InputTokens:      max(a.InputTokens, b.InputTokens),
		OutputTokens:     max(a.OutputTokens, b.OutputTokens),
		CacheReadTokens:  max(a.CacheReadTokens, b.CacheReadTokens),
		CacheWriteTokens: max(a.CacheWriteTokens, b.CacheWriteTokens),
	}
}

// msg is message m itself.
func (p *parser) msg(m int32) *model.Message { return &p.pays.at(m).msg }

// fillToolNames names each tool result after its call; once parts were
// spilled, parts does as it reads them back.
func (p *parser) fillToolNames() {
	if p.merged != nil {
		return
	}
	for i := range p.msgs {
		if p.msgs[i].live {
			p.nameResults(p.msg(int32(i)).Parts)
		}
	}
}

func (p *parser) nameResults(parts []model.Part) {
	for j := range parts {
		pt := &parts[j]
		if pt.Kind == model.ToolResult && pt.ToolName == "" {
			pt.ToolName = p.calls[pt.ToolCallID]
		}
	}
}

// rechain lines up tool results that hang side by side. Claude makes each
// tool result a child of the assistant record that holds its tool_use, so
// the results of parallel calls are siblings and only one of them carries
// the conversation on. Those siblings are one step, not branches: the ones
// that lead nowhere are chained, in file order, in front of the rest.
func (p *parser) rechain() {
	var kids []int32
	for m := range p.msgs {
		if !p.msgs[m].live {
			continue
		}
		kids = p.children(kids[:0], int32(m))
		if len(kids) < 2 {
			continue
		}
		var dangling, rest []int32
		for _, c := range kids {
			if p.msgs[c].carrier && p.msgs[c].child < 0 {
				dangling = append(dangling, c)
			} else {
				rest = append(rest, c)
			}
		}
		if len(dangling) == 0 {
			continue
		}
		slices.SortFunc(dangling, func(a, b int32) int { return int(p.msgs[a].first - p.msgs[b].first) })
		p.setChildren(int32(m), dangling[:1])
		for k := 1; k < len(dangling); k++ {
			p.msgs[dangling[k]].parent = dangling[k-1]
			p.setChildren(dangling[k-1], dangling[k:k+1])
		}
		tail := dangling[len(dangling)-1]
		for _, c := range rest {
			p.msgs[c].parent = tail
		}
		p.setChildren(tail, rest)
		// The chain now leads to all that followed: it is as new as the
		// newest of them, so the newest leaf is still found below it.
		newest := int32(-1)
		for _, c := range kids {
			newest = max(newest, p.msgs[c].last)
		}
		for _, d := range dangling {
			p.msgs[d].last = newest
		}
	}
}

// groupOrder lists the trees: the main chain first (or, in a subagent's
// file, its one sidechain), then any sidechains by first appearance.
func (p *parser) groupOrder() []int32 {
	var order []int32
	for g := range p.groups {
		if !p.groups[g].sidechain {
			order = append(order, int32(g))
		}
	}
	for g := range p.groups {
		if p.groups[g].sidechain {
			order = append(order, int32(g))
		}
	}
	return order
}

// groupRuns cuts one tree into runs: the path to its newest leaf, then one
// run per other leaf, holding only what it does not share with an earlier
// run. base is the index the first run will have in the file.
func (p *parser) groupRuns(g int32, base int) []harness.ParsedRun {
	var roots, leaves []int32
	for m := range p.msgs {
		mn := &p.msgs[m]
		if !mn.live || mn.group != g {
			continue
		}
		if mn.parent < 0 {
			roots = append(roots, int32(m))
		}
		if mn.child < 0 {
			leaves = append(leaves, int32(m))
		}
	}
	if len(leaves) == 0 {
		return nil
	}
	// Depths from the roots (iteratively: chains can be long).
	stack := slices.Clone(roots)
	for _, r := range roots {
		p.msgs[r].depth = 1
	}
	for len(stack) > 0 {
		m := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for c := p.msgs[m].child; c >= 0; c = p.msgs[c].next {
			p.msgs[c].depth = p.msgs[m].depth + 1
			stack = append(stack, c)
		}
	}
	// The newest leaf is where the session stands; older leaves follow in
	// the order they were written.
	slices.SortStableFunc(leaves, func(a, b int32) int { return int(p.msgs[a].last - p.msgs[b].last) })
	main := leaves[len(leaves)-1]
	order := append([]int32{main}, leaves[:len(leaves)-1]...)

	var runs []harness.ParsedRun
	for idx, leaf := range order {
		run := base + idx
		var path []int32
		j := leaf
		for j >= 0 && p.msgs[j].owner < 0 {
			path = append(path, j)
			p.msgs[j].owner = int32(run)
			j = p.msgs[j].parent
		}
		slices.Reverse(path)
		pr := harness.ParsedRun{Parent: -1}
		if idx > 0 {
			pr.Parent = base // a branch off a virtual root (a second root) leaves the main line at 0
			if j >= 0 {
				pr.Parent = int(p.msgs[j].owner)
				pr.ForkAt = int(p.msgs[j].depth)
			}
		}
		p.fillRun(&pr, g, idx == 0, path)
		if p.merged != nil {
			pr.Stream = &spilledRun{p: p, path: path}
		} else {
			pr.Messages = p.messages(path)
		}
		if pr.Run.Title == "" && idx > 0 {
			pr.Run.Title = runs[0].Run.Title // a branch without a prompt of its own
		}
		runs = append(runs, pr)
	}
	return runs
}

// messages are the messages of path, copied out of the payloads. Each
// message is one run's, so no two runs share one.
func (p *parser) messages(path []int32) []model.Message {
	msgs := make([]model.Message, len(path))
	for k, m := range path {
		msgs[k] = *p.msg(m)
	}
	return msgs
}

// fillRun sets a run's fields and its links to other sessions.
func (p *parser) fillRun(pr *harness.ParsedRun, g int32, mainLine bool, path []int32) {
	gr := &p.groups[g]
	r := &pr.Run
	r.Harness = Harness
	r.Status = model.Completed
	r.Cwd, r.Branch = gr.cwd, gr.branch
	inherited := 0
	switch {
	case gr.sidechain:
		r.NativeID = "agent-" + gr.agentID
		if gr.agentID == "" && len(path) > 0 {
			r.NativeID = "sidechain-" + p.msg(path[0]).NativeID
		}
		if mainLine {
			toolID := ""
			switch {
			case p.compaction(gr):
				// Claude Code compacts through an agent no call starts.
			case p.subagentFile():
				toolID = p.info.toolUseID
				if toolID == "" && p.info.path != "" {
					// No sidecar (older versions): the parent's tool
					// result names the agent.
					toolID = findAgentCall(p.info.path, gr.agentID, gr.session)
				}
			default:
				toolID = p.spawningCall(g, path)
			}
			pr.Subagent = &harness.SubagentHint{ParentSession: gr.session, ToolCallID: toolID}
			if p.forkRef[gr.agentID] && len(path) > 0 && p.msg(path[0]).Role == model.Assistant {
				// A "fork" subagent's file starts with a copy of the
				// parent's calling message; its usage is the parent's.
				p.msg(path[0]).Usage = model.Usage{}
			}
		}
	default:
		r.NativeID = p.own()
		if mainLine {
			pr.Fork = p.forkHint(path)
			if pr.Fork != nil {
				inherited = pr.Fork.Inherited
			}
		}
	}
	r.Model = p.lastModel(path)
	if r.Model == "" && pr.Parent >= 0 {
		r.Model = p.modelAbove(path)
	}
	for _, m := range path[min(inherited, len(path)):] {
		r.Usage = r.Usage.Add(p.msg(m).Usage)
	}
	switch {
	case mainLine && !gr.sidechain:
		r.CreatedAt, r.FinishedAt = p.firstTime, p.lastTime
		r.Title = p.title()
		if pr.Fork == nil && p.haveCost {
			// cost-state is the session's running total; a fork's also
			// holds its parent's spending, so it is only used here.
			r.CostUSD = p.cost
		}
	case mainLine:
		r.CreatedAt, r.FinishedAt = gr.first, gr.last
		r.Title = p.info.description
		if r.Title == "" || !p.subagentFile() {
			r.Title = p.titleOf(path)
		}
		if p.compaction(gr) {
			// Its prompt is the instructions to summarize, not a task.
			r.Title = CompactionTitle
		}
	default:
		if len(path) > 0 {
			r.CreatedAt = p.msg(path[0]).Time
			r.FinishedAt = p.msg(path[len(path)-1]).Time
		}
		r.Title = p.titleOf(path)
	}
	if r.Title == "" && mainLine {
		r.Title = p.titleOf(path)
	}
}

// CompactionTitle names the agent Claude Code compacts a conversation
// with (agent-acompact-<id>.jsonl next to the subagents).
const CompactionTitle = "conversation compaction (the summary that replaced the history)"

// compaction reports whether sidechain gr is Claude Code's compaction
// agent, which no tool call started.
func (p *parser) compaction(gr *group) bool {
	return strings.HasPrefix(gr.agentID, "acompact") ||
		p.subagentFile() && strings.HasPrefix(filepath.Base(p.info.path), "agent-acompact")
}

// spawningCall finds the Task call that started the inline sidechain g
// (Claude Code 1.x wrote them into the session's file, naming no call):
// the unused call whose prompt is the sidechain's first message, else the
// last unused one written before it.
func (p *parser) spawningCall(g int32, path []int32) string {
	first := p.groups[g].firstNode
	prompt := ""
	if len(path) > 0 && p.msg(path[0]).Role == model.User {
		prompt = p.whole(path[0]).PlainText()
	}
	pick := -1
	for i := range p.tasks {
		tc := &p.tasks[i]
		if tc.used || tc.at > first {
			continue
		}
		if prompt != "" && tc.prompt == prompt {
			pick = i
			break
		}
		pick = i
	}
	if pick < 0 {
		return ""
	}
	p.tasks[pick].used = true
	return p.tasks[pick].id
}

// subagentFile reports whether the whole file is one subagent's sidechain.
func (p *parser) subagentFile() bool {
	return len(p.groups) == 1 && p.groups[0].sidechain
}

// title is the agent's own title for the session, else its first prompt.
func (p *parser) title() string {
	switch {
	case p.customTitle != "":
		return model.OneLine(p.customTitle, 120)
	case p.aiTitle != "":
		return model.OneLine(p.aiTitle, 120)
	}
	return p.summaryTitle
}

// titleOfSummaries is the newest summary whose leaf is in the file: a
// summary names the conversation ending at its leaf; older versions also
// carried summaries of other sessions, so the leaf must be here.
func (p *parser) titleOfSummaries() string {
	for i := len(p.summaries) - 1; i >= 0; i-- {
		if _, ok := p.byUUID[p.summaries[i].leaf]; ok {
			return model.OneLine(p.summaries[i].text, 120)
		}
	}
	return ""
}

// forkHint recognises a --fork-session copy: the leading messages whose
// records carry requestSessionId (the parent's session id; Claude adds it
// to the assistant records it copies). Copied user records carry no
// marker, so the copy is taken to run through the last marked message, as
// long as no unmarked assistant message comes before it.
func (p *parser) forkHint(path []int32) *harness.ForkHint {
	last := -1
	for k, m := range path {
		mn := &p.msgs[m]
		if mn.copied != 0 {
			last = k
			continue
		}
		if p.msg(m).Role == model.Assistant {
			break
		}
	}
	if last < 0 {
		return nil
	}
	mn := &p.msgs[path[last]]
	return &harness.ForkHint{ParentSession: p.copiedFrom[mn.copied-1], Inherited: last + 1, AfterMessage: p.msg(path[last]).NativeID}
}

// lastModel is the model of the last assistant message of path that
// names a real one.
func (p *parser) lastModel(path []int32) string {
	for i := len(path) - 1; i >= 0; i-- {
		if m := p.msg(path[i]); m.Role == model.Assistant && m.Model != "" && m.Model != syntheticModel {
			return m.Model
		}
	}
	return ""
}

// titleOf is model.TitleOf the messages of path: the first prompt's text.
func (p *parser) titleOf(path []int32) string {
	for _, m := range path {
		if msg := p.whole(m); msg.IsPrompt() {
			return model.OneLine(msg.PlainText(), 120)
		}
	}
	return ""
}

// whole is message m with its parts (read back when they were spilled;
// none when that fails: storing the run then fails the same way).
func (p *parser) whole(m int32) model.Message {
	msg := *p.msg(m)
	msg.Parts, _ = p.parts(m)
	return msg
}

// modelAbove is the model in effect where a branch leaves its parent.
func (p *parser) modelAbove(path []int32) string {
	if len(path) == 0 {
		return ""
	}
	for j := p.msgs[path[0]].parent; j >= 0; j = p.msgs[j].parent {
		if m := p.msg(j); m.Role == model.Assistant && m.Model != "" && m.Model != syntheticModel {
			return m.Model
		}
	}
	return ""
}

// syntheticModel marks messages Claude Code makes up itself (API errors,
// interruptions); they name no model.
const syntheticModel = "<synthetic>"
