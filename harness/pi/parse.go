package pi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"tine/harness"
	"tine/internal/jsonl"
	"tine/model"
)

// Harness is this backend's name in runs and the registry.
const Harness = "pi"

// ParseFile reads the pi session file at path.
func ParseFile(path string) (harness.ParsedFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return harness.ParsedFile{}, err
	}
	defer f.Close()
	return Parse(f, path)
}

// Parse reads a pi session from r; name labels skips and errors.
//
// The file's runs are its main line, the path from the root to the last
// entry (where pi stands), then one run per other leaf, each holding only
// the messages it does not share with a run before it. Lines that cannot be
// read, and lines over 64 MiB (jsonl.DefaultMax), are skipped and listed;
// an incomplete last line (pi is still writing) is left unread and Offset
// ends before it. It is an error only when r fails or the first line is
// not a session header.
func Parse(r io.Reader, name string) (harness.ParsedFile, error) {
	p := parser{name: name, ids: map[string]int32{}, seed: maphash.MakeSeed()}
	lr := jsonl.NewReader(r, jsonl.DefaultMax)
	defer lr.Close()
	for lr.Next() {
		l := lr.Line()
		if l.Partial {
			break // pi is still writing it
		}
		p.line = l.Number
		p.file.Offset += l.Size
		switch {
		case l.TooLong && !p.haveHeader:
			return p.file, fmt.Errorf("%s: not a pi session: the first line is %s, over the %s cap", name, jsonl.Size(l.Size), jsonl.Size(int64(lr.Max())))
		case l.TooLong:
			p.skip(lr.TooLongReason())
		default:
			if err := p.handle(bytes.TrimSpace(l.Text)); err != nil {
				return p.file, err
			}
		}
	}
	if err := lr.Err(); err != nil {
		return p.file, fmt.Errorf("%s: %w", name, err)
	}
	if !p.haveHeader {
		return p.file, nil // nothing complete yet
	}
	p.link()
	p.file.Runs = p.runs()
	return p.file, nil
}

// node is one entry of the session tree.
type node struct {
	parentID string // its parentId, "" for a root
	parent   int32  // index in parser.nodes, -1 for a root (set by link)
	// last is the nearest message at or above this entry (its index in
	// parser.msgs), -1 when there is none.
	last     int32
	msg      int32 // the message this entry holds, -1 for none
	hasChild bool
	model    string // the model in effect at this entry (its own, until link)
	line     int32  // its line in the file
	state    uint8
}

const (
	unlinked uint8 = iota
	linking
	linked
)

// msgInfo is what the tree walk needs of a message besides the message.
type msgInfo struct {
	parent int32 // the nearest message above, -1 for none
	depth  int32 // messages from the root through this one
	owner  int32 // the run that holds it, -1 until one does
	copied bool  // copied from the parent session by a fork
	cost   float64
}

type parser struct {
	name string
	file harness.ParsedFile
	line int

	haveHeader bool
	hdr        header
	hdrTime    time.Time
	version    int
	// inCopy: still in the leading entries a fork copied from its parent.
	inCopy bool

	nodes       []node
	ids         map[string]int32
	sums        []uint64 // each node's line hash, to tell a repeated line
	seed        maphash.Seed
	msgs        []model.Message
	info        []msgInfo
	own         []int32 // scratch for addRun
	sessionName string
}

func (p *parser) skip(reason string) {
	p.file.Skipped = append(p.file.Skipped, harness.Skip{File: p.name, Line: p.line, Reason: reason})
}

// handle reads one complete line.
func (p *parser) handle(line []byte) error {
	if len(line) == 0 {
		return nil
	}
	if !p.haveHeader {
		return p.readHeader(line)
	}
	typ, ok := peekType(line)
	if !ok {
		p.skip("invalid JSON: " + shortErr(json.Unmarshal(line, new(struct{}))))
		return nil
	}
	var e entry
	switch typ {
	case "session":
		return nil // a repeated header (an old pi bug); pi ignores it too
	case "message", "model_change", "thinking_level_change", "compaction",
		"branch_summary", "custom_message", "session_info":
		if typ == "message" && fastEntry(line, &e) {
			break // the common case, in one pass
		}
		e = entry{}
		if err := decodeEntry(line, &e); err != nil {
			p.skip(typ + ": " + shortErr(err))
			// Keep a well-formed entry of the wrong shape as a link in the
			// tree, so that its children still hang together.
			var se *json.SyntaxError
			if errors.As(err, &se) || !p.decodeLink(line, &e) {
				return nil
			}
			e.Type = "" // not a message, not a setting
		}
	default:
		// Unknown and uninteresting types (custom, label, ...) still sit in
		// the parentId chain: keep their links.
		if !p.decodeLink(line, &e) {
			p.skip(typ + ": invalid JSON")
			return nil
		}
		e.Type = ""
	}
	p.add(&e, line)
	return nil
}

func (p *parser) decodeLink(line []byte, e *entry) bool {
	var l link
	if json.Unmarshal(line, &l) != nil {
		return false
	}
	*e = entry{ID: l.ID, ParentID: l.ParentID, Timestamp: l.Timestamp}
	return true
}

func (p *parser) readHeader(line []byte) error {
	if err := json.Unmarshal(line, &p.hdr); err != nil {
		return fmt.Errorf("%s: not a pi session: first line: %s", p.name, shortErr(err))
	}
	if p.hdr.Type != "session" || p.hdr.ID == "" {
		return fmt.Errorf("%s: not a pi session: the first line is not a session header", p.name)
	}
	p.haveHeader = true
	p.version = 1 // pi: header.version ?? 1
	if p.hdr.Version != nil {
		p.version = *p.hdr.Version
	}
	p.hdrTime, _ = time.Parse(time.RFC3339Nano, p.hdr.Timestamp)
	p.inCopy = p.hdr.ParentSession != "" && !p.hdrTime.IsZero()
	return nil
}

// peekType reads "type" without decoding the line: pi writes it first.
func peekType(line []byte) (string, bool) {
	const pre = `{"type":"`
	if bytes.HasPrefix(line, []byte(pre)) {
		rest := line[len(pre):]
		if i := bytes.IndexByte(rest, '"'); i >= 0 && bytes.IndexByte(rest[:i], '\\') < 0 {
			return string(rest[:i]), true
		}
	}
	var t struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(line, &t) != nil {
		return "", false
	}
	return t.Type, true
}

// add puts an entry into the file's entries and, when it is one, its
// message. Where it hangs is settled by link, once every entry is read: a
// child may come before its parent.
func (p *parser) add(e *entry, line []byte) {
	i := int32(len(p.nodes))
	sum := maphash.Bytes(p.seed, line)
	if e.ID != "" && p.version >= 2 {
		if j, dup := p.ids[e.ID]; dup {
			// An id names one entry: a line written twice is read once,
			// and another entry under a taken id is left out (it would
			// hang twice, or start a branch from nothing).
			if p.sums[j] != sum {
				p.skip(fmt.Sprintf("entry %s: the id was already used on line %d; left out", e.ID, p.nodes[j].line))
			}
			return
		}
	}
	n := node{parent: -1, last: -1, msg: -1, line: int32(p.line)}
	if p.version < 2 {
		// Version 1 had no ids: entries form one chain in file order
		// (pi's migrateV1ToV2 does the same).
		n.parent = i - 1
		n.state = linked
		if i > 0 {
			par := &p.nodes[i-1]
			par.hasChild = true
			n.last, n.model = par.last, par.model
		}
	} else if e.ParentID != nil {
		n.parentID = *e.ParentID
	}
	t, _ := time.Parse(time.RFC3339Nano, e.Timestamp)
	// A fork's copies come first and are older than its header; the first
	// entry that is not ends the copies (see forkHint).
	copied := p.inCopy && !t.IsZero() && t.Before(p.hdrTime)
	p.inCopy = copied

	switch e.Type {
	case "model_change":
		n.model = modelName(e.Provider, e.ModelID)
	case "session_info":
		// The latest one names the session; an empty name clears it.
		p.sessionName = ""
		if e.Name != nil {
			p.sessionName = strings.TrimSpace(*e.Name)
		}
	}
	if e.Message != nil && e.Message.Usage != nil {
		if _, err := usageOf(e.Message.Usage); err != nil {
			p.skip("message " + e.ID + ": usage dropped: " + err.Error())
		}
	}
	if m, cost, ok := entryMessage(e, line, t); ok {
		if m.Role == model.Assistant && m.Model != "" {
			n.model = m.Model
		}
		mi := msgInfo{parent: n.last, depth: 1, owner: -1, copied: copied, cost: cost}
		if n.last >= 0 {
			mi.depth = p.info[n.last].depth + 1
		}
		n.msg = int32(len(p.msgs))
		n.last = n.msg
		p.msgs = append(p.msgs, m)
		p.info = append(p.info, mi)
	}
	p.nodes = append(p.nodes, n)
	p.sums = append(p.sums, sum)
	if e.ID != "" {
		p.ids[e.ID] = i
	}
}

// link hangs every entry under its parent, wherever in the file that is.
// An entry whose parent is not in the file is placed after the entry
// written before it, and listed as a Skip that says so; a loop of
// parentIds (a corrupt file) is cut, and listed too. Then each entry
// learns the nearest message above it and the model in effect, parents
// first.
func (p *parser) link() {
	if p.version < 2 {
		return // one chain, linked as read
	}
	for i := range p.nodes {
		n := &p.nodes[i]
		if n.parentID == "" {
			continue
		}
		if j, ok := p.ids[n.parentID]; ok && int(j) != i {
			n.parent = j
			continue
		}
		n.parent = int32(i) - 1
		placed := "it starts the conversation"
		if n.parent >= 0 {
			placed = fmt.Sprintf("placed after the entry on line %d", p.nodes[n.parent].line)
		}
		p.file.Skipped = append(p.file.Skipped, harness.Skip{File: p.name, Line: int(n.line),
			Reason: fmt.Sprintf("its parent %s is not in the file; %s", n.parentID, placed), MissingParent: n.parentID})
	}
	var stack []int32
	for i := range p.nodes {
		stack = stack[:0]
		for j := int32(i); j >= 0 && p.nodes[j].state != linked; j = p.nodes[j].parent {
			if p.nodes[j].state == linking {
				// A loop: the entry that closes it starts the conversation.
				top := stack[len(stack)-1]
				p.nodes[top].parent = -1
				p.file.Skipped = append(p.file.Skipped, harness.Skip{File: p.name, Line: int(p.nodes[top].line),
					Reason: "its parentId leads back to itself; it starts the conversation"})
				break
			}
			p.nodes[j].state = linking
			stack = append(stack, j)
		}
		for k := len(stack) - 1; k >= 0; k-- {
			n := &p.nodes[stack[k]]
			n.state = linked
			above, model := int32(-1), ""
			if n.parent >= 0 {
				par := &p.nodes[n.parent]
				par.hasChild = true
				above, model = par.last, par.model
			}
			if n.model == "" {
				n.model = model
			}
			if n.msg < 0 {
				n.last = above
				continue
			}
			mi := &p.info[n.msg]
			mi.parent, mi.depth = above, 1
			if above >= 0 {
				mi.depth = p.info[above].depth + 1
			}
		}
	}
	slices.SortStableFunc(p.file.Skipped, func(a, b harness.Skip) int { return a.Line - b.Line })
}

// entryMessage is the message an entry holds, when it holds one, as a run
// shows it: stamped with the entry's time t (else the message's own) and the
// entry's id as its NativeID. It also returns what pi priced it at. A turn
// (turn.go) converts the entries pi appends with it too.
func entryMessage(e *entry, line []byte, t time.Time) (model.Message, float64, bool) {
	m, cost, ok := convert(e, line)
	if !ok {
		return m, 0, false
	}
	if m.Time = t; t.IsZero() && e.Message != nil {
		m.Time = unixMillis(e.Message.Timestamp)
	}
	m.NativeID = e.ID
	return m, cost, true
}

// runs cuts the tree into runs: the main line first, then each other leaf
// in file order. Each run walks up from its leaf and takes the messages no
// earlier run holds; the first held one is where it leaves its parent.
func (p *parser) runs() []harness.ParsedRun {
	var runs []harness.ParsedRun
	last := int32(len(p.nodes)) - 1
	p.addRun(&runs, last) // -1 when there are no entries: an empty main line
	for leaf := range last {
		if !p.nodes[leaf].hasChild {
			p.addRun(&runs, leaf)
		}
	}
	return runs
}

// addRun appends the run ending at leaf, if it has messages of its own.
func (p *parser) addRun(runs *[]harness.ParsedRun, leaf int32) {
	main := len(*runs) == 0
	m := int32(-1)
	if leaf >= 0 {
		m = p.nodes[leaf].last
	}
	// A side branch ending in a fork's copies is made only of copies (copies
	// come first in the file, so their parents are copies too): it is the
	// parent session's, read from its own file.
	if !main && (m < 0 || p.info[m].copied) {
		return
	}
	own := p.own[:0] // leaf first
	for ; m >= 0 && p.info[m].owner < 0; m = p.info[m].parent {
		own = append(own, m)
		p.info[m].owner = int32(len(*runs))
	}
	p.own = own
	if !main && len(own) == 0 {
		return // a leaf that adds no message (a label, a model change)
	}
	pr := harness.ParsedRun{Parent: -1}
	if !main {
		// Where it leaves; a second root (pi's resetLeaf) leaves the main
		// line at K=0.
		pr.Parent, pr.ForkAt = 0, 0
		if m >= 0 {
			pr.Parent, pr.ForkAt = int(p.info[m].owner), int(p.info[m].depth)
		}
	}
	pr.Run, pr.Messages = p.run(leaf, own, main)
	if pr.Run.Title == "" && !main {
		pr.Run.Title = (*runs)[0].Run.Title
	}
	if main && p.hdr.ParentSession != "" {
		pr.Fork = p.forkHint(own)
	}
	*runs = append(*runs, pr)
}

// run makes the Run and the messages of the run ending at leaf, holding the
// messages own (leaf first).
func (p *parser) run(leaf int32, own []int32, main bool) (model.Run, []model.Message) {
	r := model.Run{
		Harness:   Harness,
		NativeID:  p.hdr.ID,
		Cwd:       p.hdr.Cwd,
		Status:    model.Completed,
		CreatedAt: p.hdrTime,
	}
	msgs := make([]model.Message, len(own))
	for k, j := range own {
		msgs[len(own)-1-k] = p.msgs[j]
		if !p.info[j].copied { // a fork's own spending only (rule 6)
			r.Usage = r.Usage.Add(p.msgs[j].Usage)
			r.CostUSD += p.info[j].cost
		}
	}
	if leaf >= 0 {
		r.Model = p.nodes[leaf].model
	}
	if len(msgs) > 0 {
		if !main || r.CreatedAt.IsZero() {
			r.CreatedAt = msgs[0].Time
		}
		r.FinishedAt = msgs[len(msgs)-1].Time
	}
	if r.FinishedAt.Before(r.CreatedAt) {
		r.FinishedAt = r.CreatedAt
	}
	r.Title = p.sessionName
	if r.Title == "" {
		r.Title = model.TitleOf(msgs)
	}
	r.Title = model.OneLine(r.Title, 120)
	return r, msgs
}

// forkHint links a forked session's main line to its parent. pi copies the
// parent's entries verbatim (ids, parentIds, timestamps) right after the
// new header, and the header's timestamp is when the fork was made, so the
// copies are the leading entries older than the header. own is the main
// line's messages, leaf first.
func (p *parser) forkHint(own []int32) *harness.ForkHint {
	h := &harness.ForkHint{ParentSession: sessionIDFromPath(p.hdr.ParentSession)}
	for k := len(own) - 1; k >= 0 && p.info[own[k]].copied; k-- {
		h.Inherited++
		h.AfterMessage = p.msgs[own[k]].NativeID
	}
	return h
}

// sessionIDFromPath finds a session's id in its file name,
// <ISO time with - for : and .>_<id>.jsonl; a file not named that way
// (pi --session some/path.jsonl) gives its name without the extension.
func sessionIDFromPath(path string) string {
	if i := strings.LastIndexAny(path, `/\`); i >= 0 {
		path = path[i+1:]
	}
	path = strings.TrimSuffix(path, ".jsonl")
	if i := strings.LastIndexByte(path, '_'); i >= 0 && i+1 < len(path) {
		return path[i+1:]
	}
	return path
}

func modelName(provider, id string) string {
	if provider == "" || id == "" {
		return id
	}
	return provider + "/" + id
}

func unixMillis(raw json.RawMessage) time.Time {
	var ms float64
	if len(raw) == 0 || json.Unmarshal(raw, &ms) != nil || ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(int64(ms)).UTC()
}

// shortErr is a JSON error on one line, cut short.
func shortErr(err error) string {
	if err == nil {
		return "unreadable"
	}
	return model.OneLine(err.Error(), 160)
}
