package claude

import (
	"bytes"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"tine/internal/jsonl"
	"tine/model"
)

// A line is read in two halves: decode, which needs nothing but the line
// (scanning and validating it, decoding the strings and the message it
// carries: nearly all of the cost), and apply, which places the decoded
// record in the parser's state, in file order. A long file's lines are
// decoded on every core and applied in order (readParallel).

// record is one line decoded: everything apply needs, holding nothing of
// the line's bytes.
type record struct {
	empty     bool // a blank line
	malformed bool
	typ       string
	ts        time.Time

	uuid       string
	parentUUID string
	explicit   bool // parentUuid was null: a deliberate root
	session    string
	cwd        string
	branch     string
	sidechain  bool
	agentID    string
	reqSession string

	// chain holds what a chain record carries: a message (hasPay), or
	// nothing (an attachment, a meta record).
	hasPay bool
	kind   kind
	pay    pay
	payErr error

	// Outside the chain: titles and cost.
	customTitle, aiTitle string
	summary, leaf        string
	cost                 float64
	hasCost              bool

	// What reading the message found besides it, applied in order: skips
	// (said about the line), the tool calls it makes (for the results'
	// names), and the calls that start subagents.
	skips []string
	calls []call
	tasks []taskCall
}

type call struct{ id, name string }

// handle reads one complete line.
func (p *parser) handle(line []byte) {
	d := decode(line, &p.seen)
	p.apply(&d)
}

// seen holds the last values of the fields nearly every record repeats,
// so that a record with the same one decodes to the same string instead
// of a new one (a long session has hundreds of thousands of records).
type seen struct{ session, cwd, branch, reqSession string }

// again decodes the string raw, reusing *last when it is the same.
func again(last *string, raw []byte) string {
	if n := len(raw); n >= 2 && raw[0] == '"' && string(raw[1:n-1]) == *last && bytes.IndexByte(raw, '\\') < 0 {
		return *last
	}
	*last = strOr(raw)
	return *last
}

// decode reads one complete line, without the parser; last is the
// decoder's own.
func decode(line []byte, last *seen) record {
	var d record
	line = bytes.TrimRight(line, "\r\n")
	if len(bytes.TrimSpace(line)) == 0 {
		d.empty = true
		return d
	}
	var f fields
	o := newObject(line)
	for k, v := range o.Members() {
		switch string(k) {
		case "type":
			f.typ = v
		case "uuid":
			f.uuid = v
		case "parentUuid":
			f.parent = v
		case "logicalParentUuid":
			f.logicalParent = v
		case "sessionId":
			f.session = v
		case "timestamp":
			f.timestamp = v
		case "cwd":
			f.cwd = v
		case "gitBranch":
			f.branch = v
		case "isSidechain":
			f.sidechain = v
		case "agentId":
			f.agentID = v
		case "requestSessionId":
			f.requestSession = v
		case "isMeta":
			f.isMeta = v
		case "isCompactSummary":
			f.compactSummary = v
		case "message":
			f.message = v
		case "subtype":
			f.subtype = v
		case "compactMetadata":
			f.compactMeta = v
		case "summary":
			f.summary = v
		case "leafUuid":
			f.leaf = v
		case "customTitle":
			f.customTitle = v
		case "aiTitle":
			f.aiTitle = v
		case "totalCostUSD":
			f.totalCost = v
		case "content":
			f.content = v
		}
	}
	if o.Err() != nil {
		d.malformed = true
		return d
	}
	d.typ = strOr(f.typ)
	d.ts = timestamp(f.timestamp)
	d.agentID = strOr(f.agentID)
	d.uuid = strOr(f.uuid)
	if d.uuid == "" {
		switch d.typ {
		case "custom-title":
			d.customTitle = strOr(f.customTitle)
		case "ai-title":
			d.aiTitle = strOr(f.aiTitle)
		case "summary":
			d.summary, d.leaf = strOr(f.summary), strOr(f.leaf)
		case "cost-state":
			if len(f.totalCost) > 0 {
				d.cost, d.hasCost = number(f.totalCost), true
			}
		}
		return d
	}
	subtype := strOr(f.subtype)
	switch lp := strOr(f.logicalParent); {
	case isNull(f.parent) && lp != "":
		// A compact boundary cuts parentUuid and keeps the real
		// predecessor here (without it, link() takes the record before).
		d.parentUUID = lp
	case f.parent != nil && isNull(f.parent) && subtype != "compact_boundary":
		d.explicit = true // a deliberate root: the first prompt, or a rewind to the start
	default:
		d.parentUUID = strOr(f.parent) // absent or unreadable: link() falls back
	}
	d.session = again(&last.session, f.session)
	d.cwd, d.branch = again(&last.cwd, f.cwd), again(&last.branch, f.branch)
	d.sidechain = isTrue(f.sidechain)
	d.reqSession = again(&last.reqSession, f.requestSession)
	switch d.typ {
	case "user", "assistant":
		if isTrue(f.isMeta) {
			break // context the CLI injected (caveats, skill bodies): not a message
		}
		pl, k, err := d.message(d.typ, f.message, isTrue(f.compactSummary))
		if err != nil {
			d.payErr = err
			break
		}
		pl.msg.NativeID, pl.msg.Time = d.uuid, d.ts
		d.hasPay, d.kind, d.pay = true, k, pl
	case "system":
		switch subtype {
		case "compact_boundary":
			d.hasPay, d.kind, d.pay = true, kCompact, pay{msg: model.Message{
				Role: model.System, NativeID: d.uuid, Time: d.ts,
				Parts: []model.Part{{Kind: model.Text, Text: compactText(f.compactMeta)}},
			}}
		case "local_command":
			// Interactive sessions record slash commands and their
			// output as system records.
			text, echo := localCommand(strOr(f.content))
			if text == "" {
				break
			}
			d.hasPay, d.kind = true, kMessage
			if echo {
				d.kind = kLocalEcho
			}
			d.pay = pay{msg: model.Message{
				Role: model.User, NativeID: d.uuid, Time: d.ts,
				Parts: []model.Part{{Kind: model.Text, Text: text}},
			}}
		}
	}
	return d
}

// apply places a decoded line, the parser's p.line, in the parser's state.
func (p *parser) apply(d *record) {
	switch {
	case d.empty:
		return
	case d.malformed:
		p.skip("malformed JSON")
		return
	}
	if ts := d.ts; !ts.IsZero() {
		if p.firstTime.IsZero() {
			p.firstTime = ts
		}
		if ts.After(p.lastTime) {
			p.lastTime = ts
		}
	}
	uuid := d.uuid
	if uuid == "" {
		p.meta(d)
		return
	}
	if _, dup := p.byUUID[uuid]; dup {
		return // a record written twice: the first one stands
	}
	i := int32(p.nodes.len())
	n := node{uuid: uuid, explicit: d.explicit, parent: -1, msg: -1, pay: -1, line: int32(p.line)}
	if j, ok := p.byUUID[d.parentUUID]; ok && d.parentUUID != "" {
		n.known = j + 1
	} else if d.parentUUID != "" {
		p.unknown[i] = d.parentUUID
	}
	session := d.session
	n.group = p.groupOf(p.groupKey(d.sidechain, d.agentID, uuid, i, &n), d.agentID, session, d.cwd, d.branch, d.ts)
	switch rs := d.reqSession; {
	case rs != "" && rs != session:
		n.copied = p.copiedRef(rs)
	case p.ownSession != "" && session != "" && session != p.ownSession && !p.groups[n.group].sidechain:
		// Older versions copied a resumed session's records keeping their
		// original sessionId: a foreign sessionId marks a copy too.
		n.copied = p.copiedRef(session)
	}
	for _, s := range d.skips {
		p.skip(s)
	}
	for _, c := range d.calls {
		p.calls[c.id] = c.name
	}
	for _, t := range d.tasks {
		t.at = i
		p.tasks = append(p.tasks, t)
	}
	switch {
	case d.payErr != nil:
		// Keep the record in the chain so its children still connect.
		p.skip(fmt.Sprintf("%s record %s: %v", d.typ, uuid, d.payErr))
	case d.hasPay:
		n.kind, n.pay = d.kind, int32(p.pays.len())
		p.keep(&d.pay)
		p.pays.add(d.pay)
	}
	p.byUUID[uuid] = i
	p.nodes.add(n)
}

// keep spills pl's parts once the file is read past p.spillFrom; when
// the spill file cannot be made or written, they stay in memory.
func (p *parser) keep(pl *pay) {
	if p.spillFrom < 0 || p.file.Offset < p.spillFrom {
		return
	}
	if p.spill == nil {
		sp, err := newSpill()
		if err != nil {
			p.spillFrom = -1
			return
		}
		p.spill, p.merged = sp, map[int32][]int32{}
	}
	at, n, err := p.spill.put(pl.msg.Parts)
	if err != nil {
		p.spillFrom = -1
		return
	}
	pl.at, pl.n, pl.msg.Parts = at, n, nil
}

// parallelFrom is how far into a file its lines are decoded one by one
// before the rest is decoded on every core: most files end before, and
// are parsed side by side with others already.
const parallelFrom = 4 << 20

// A worker decodes a chunk of lines at a time.
const (
	chunkBytes = 1 << 20
	chunkLines = 4096
)

// split says when and how a parser decodes on several cores: after from
// bytes, in chunks of about bytes or lines (tests make them small).
type split struct {
	from         int64
	bytes, lines int
	workers      int
}

func defaultSplit() split {
	sp := split{from: parallelFrom, bytes: chunkBytes, lines: chunkLines, workers: runtime.GOMAXPROCS(0)}
	if f := splitFrom.Load(); f > 0 {
		sp.from = f - 1
	}
	return sp
}

// splitFrom, when above 0, is 1 + the byte parsers decode in parallel from.
var splitFrom atomic.Int64

// DecodeInParallelFrom makes the parsers made until restore is called
// decode a file's lines on every core from byte from on, instead of from
// 4 MB on: for tests that compare what the two ways store.
func DecodeInParallelFrom(from int64) (restore func()) {
	old := splitFrom.Swap(from + 1)
	return func() { splitFrom.Store(old) }
}

// chunk is some consecutive lines of a file, copied out of the reader's
// buffer, and what they decoded to.
type chunk struct {
	text  []byte
	lines []chunkLine
	recs  []record
	done  chan struct{} // closed once recs hold every line
}

type chunkLine struct {
	end     int // where the line ends in text
	number  int
	size    int64
	tooLong string // why a line over the cap was not read
}

// readParallel reads the rest of lr: a goroutine cuts the lines into
// chunks, workers decode the chunks, and the lines are applied here in
// file order. A few chunks are in flight at once, so the memory it takes
// does not grow with the file. lr's error, if any, is left for the caller.
func (p *parser) readParallel(lr interface {
	Next() bool
	Line() jsonl.Line
	TooLongReason() string
}) {
	workers, chunkBytes, chunkLines := p.split.workers, p.split.bytes, p.split.lines
	inFlight := workers + 1
	ordered := make(chan *chunk, inFlight)
	work := make(chan *chunk, inFlight)
	free := make(chan *chunk, inFlight+workers)
	fresh := func() *chunk {
		var c *chunk
		select {
		case c = <-free:
			c.text, c.lines = c.text[:0], c.lines[:0]
			clear(c.recs)
			c.recs = c.recs[:0]
		default:
			c = &chunk{text: make([]byte, 0, chunkBytes+chunkBytes/4)}
		}
		c.done = make(chan struct{})
		return c
	}
	go func() {
		defer close(work)
		defer close(ordered)
		c := fresh()
		send := func() {
			ordered <- c
			work <- c
			c = fresh()
		}
		for lr.Next() {
			l := lr.Line()
			if l.Partial {
				break
			}
			cl := chunkLine{number: l.Number, size: l.Size}
			if l.TooLong {
				cl.tooLong = lr.TooLongReason()
			} else {
				c.text = append(c.text, l.Text...)
			}
			cl.end = len(c.text)
			c.lines = append(c.lines, cl)
			if len(c.text) >= chunkBytes || len(c.lines) >= chunkLines {
				send()
			}
		}
		if len(c.lines) > 0 {
			send()
		}
	}()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last seen
			for c := range work {
				start := 0
				for _, cl := range c.lines {
					var d record
					if cl.tooLong == "" {
						d = decode(c.text[start:cl.end], &last)
					}
					c.recs = append(c.recs, d)
					start = cl.end
				}
				close(c.done)
			}
		}()
	}
	for c := range ordered {
		<-c.done
		for i, cl := range c.lines {
			p.line = cl.number
			p.file.Offset += cl.size
			if cl.tooLong != "" {
				p.skip(cl.tooLong)
				continue
			}
			p.apply(&c.recs[i])
		}
		select {
		case free <- c:
		default:
		}
	}
	wg.Wait()
}

// pages is a growing list kept in blocks of pageLen: past the first block,
// appending never copies what is there (a long session's records, grown by
// doubling, left several times their own size behind as garbage). The
// first block grows as a slice does, so a small file costs what it holds.
type pages[T any] struct {
	blocks [][]T
	n      int32
}

const pageLen = 4096

func (p *pages[T]) add(v T) {
	switch {
	case p.n == 0:
		p.blocks = append(p.blocks[:0], nil)
	case int(p.n)%pageLen == 0:
		p.blocks = append(p.blocks, make([]T, 0, pageLen))
	}
	b := &p.blocks[len(p.blocks)-1]
	*b = append(*b, v)
	p.n++
}

func (p *pages[T]) at(i int32) *T { return &p.blocks[i/pageLen][i%pageLen] }

func (p *pages[T]) len() int32 { return p.n }

// timestamp reads a record's time: the form Claude Code writes
// ("2026-12-01T06:51:45.137Z") directly, any other as RFC 3339 says;
// the zero time when it is neither.
func timestamp(raw []byte) time.Time {
	if len(raw) == 26 && raw[0] == '"' && raw[25] == '"' && raw[24] == 'Z' && raw[5] == '-' && raw[8] == '-' &&
		raw[11] == 'T' && raw[14] == ':' && raw[17] == ':' && raw[20] == '.' {
		n := func(i, w int) int {
			v := 0
			for _, c := range raw[i : i+w] {
				if c < '0' || c > '9' {
					return -1
				}
				v = v*10 + int(c-'0')
			}
			return v
		}
		y, mo, dd, h, mi, sec, ms := n(1, 4), n(6, 2), n(9, 2), n(12, 2), n(15, 2), n(18, 2), n(21, 3)
		if y >= 0 && mo >= 1 && mo <= 12 && dd >= 1 && dd <= 28 && h >= 0 && h < 24 && mi >= 0 && mi < 60 && sec >= 0 && sec < 60 && ms >= 0 {
			return time.Date(y, time.Month(mo), dd, h, mi, sec, ms*1e6, time.UTC)
		}
	}
	t, ok := str(raw)
	if !ok {
		return time.Time{}
	}
	ts, _ := time.Parse(time.RFC3339Nano, t)
	return ts
}
