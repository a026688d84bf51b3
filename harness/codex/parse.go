package codex

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"tine/harness"
	"tine/internal/jsonl"
	"tine/internal/jsonscan"
	"tine/model"
)

// ParseFile reads the rollout at path.
func ParseFile(path string) (harness.ParsedFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return harness.ParsedFile{}, err
	}
	defer f.Close()
	return Parse(f, path)
}

// Parse reads a rollout from r; name labels skips and errors. A rollout is
// one run (codex exec resume appends to the same file), so the result holds
// one run, or none when r holds no complete record yet. Lines that are not
// JSON objects, and lines over 64 MiB (jsonl.DefaultMax), are skipped and
// listed, unknown record types ignored, and a last line without its
// newline (Codex is still writing) is left unread: Offset ends before it.
// It is an error only when r fails.
func Parse(r io.Reader, name string) (harness.ParsedFile, error) {
	return newParser(name).parse(r)
}

// ParseTail is Parse for the part of a grown rollout that a last import
// did not read: r holds the file's first line, then its bytes from off on,
// and file is the whole rollout. Where the thread stood at off (its usage
// total, whether a turn was under way) is read from the records before
// off, so that a usage report repeated across the cut is not counted
// again, the first new response counts only what it added to the total,
// and a turn that started before off and ends after it ends there.
func ParseTail(r io.Reader, name string, file io.ReaderAt, off int64) (harness.ParsedFile, error) {
	p := newParser(name)
	p.prime(file, off)
	return p.parse(r)
}

func (p *parser) parse(r io.Reader) (harness.ParsedFile, error) {
	lr := jsonl.NewReader(r, jsonl.DefaultMax)
	defer lr.Close()
	var off int64
	for lr.Next() {
		l := lr.Line()
		if l.Partial {
			break // Codex is still writing it
		}
		p.lineNo = l.Number
		off += l.Size
		if l.TooLong {
			p.skip(lr.TooLongReason())
			continue
		}
		p.line(l.Text)
	}
	if err := lr.Err(); err != nil {
		return p.finish(off), fmt.Errorf("%s: %w", p.name, err)
	}
	return p.finish(off), nil
}

// tokenUsage is Codex's TokenUsage; input includes cached and cache-write tokens.
type tokenUsage struct {
	input, cached, cacheWrite, output, reasoning, total int64
}

func (t tokenUsage) model() model.Usage {
	return model.Usage{
		InputTokens:      max(t.input-t.cached-t.cacheWrite, 0),
		OutputTokens:     t.output,
		CacheReadTokens:  t.cached,
		CacheWriteTokens: t.cacheWrite,
	}
}

// minus is t - o, field by field; ok is false when a count went down
// (then it is no difference of two totals of one thread).
func (t tokenUsage) minus(o tokenUsage) (tokenUsage, bool) {
	d := tokenUsage{t.input - o.input, t.cached - o.cached, t.cacheWrite - o.cacheWrite,
		t.output - o.output, t.reasoning - o.reasoning, t.total - o.total}
	ok := d.input >= 0 && d.cached >= 0 && d.cacheWrite >= 0 && d.output >= 0 && d.reasoning >= 0 && d.total >= 0
	return d, ok
}

// parseUsage reads a TokenUsage object. ok is false when v is not an
// object; err says which count is not a number in 0..2^53
// (model.ParseTokens), and then the whole report is not to be trusted.
func parseUsage(v []byte) (t tokenUsage, ok bool, err error) {
	it, ok := object(v)
	if !ok {
		return tokenUsage{}, false, nil
	}
	for k, v := range it.Members() {
		var field *int64
		switch string(k) {
		case "input_tokens":
			field = &t.input
		case "cached_input_tokens":
			field = &t.cached
		case "cache_write_input_tokens":
			field = &t.cacheWrite
		case "output_tokens":
			field = &t.output
		case "reasoning_output_tokens":
			field = &t.reasoning
		case "total_tokens":
			field = &t.total
		default:
			continue
		}
		if string(v) == "null" {
			continue
		}
		n, perr := model.ParseTokens(string(v))
		if perr != nil {
			return tokenUsage{}, true, fmt.Errorf("%s: %w", k, perr)
		}
		*field = n
	}
	return t, true, nil
}

type parser struct {
	name    string
	lineNo  int
	skipped []harness.Skip

	msgs []model.Message
	// open is the assistant message of the model response being read, -1
	// between responses; unbilled is the latest assistant message that no
	// usage was attributed to yet, -1 when there is none.
	open, unbilled int
	model          string
	toolNames      map[string]string // call id -> tool name, for results

	// The current record's envelope.
	ts, ord []byte
	tsTime  time.Time
	tsOK    bool
	lastTS  []byte // the last timestamp seen, copied

	haveMeta     bool
	id, cwd      string
	branch       string
	created      time.Time
	forkedFrom   string
	beforeOrd    int
	copiedParent string // id of a parent session_meta copied into the file (old forks)

	pending   model.Usage // usage reported before any assistant message
	lastTotal tokenUsage  // the last thread total: a repeat, and what a new one adds
	haveTotal bool
	records   bool // the file has token_usage_record: token_count only repeats it
	priming   bool // reading records before a tail (ParseTail): state only

	// The turn under way: task_started opens it, task_complete and
	// turn_aborted end it. A rollout that ends with a turn open, or with
	// one aborted, ends interrupted.
	turnOpen bool
	aborted  string // why the last turn was aborted ("" when it was not)

	// A person's prompt is a user response item, an event_msg
	// user_message, or both (see userMessage). itemPrompts counts the
	// items since the last output that no event repeated yet,
	// eventPrompts the prompts taken from events that no item repeated.
	itemPrompts, eventPrompts int
	// answered holds the calls that have their result; byCollab, the
	// result message of those a collaboration event answered (a
	// function_call_output for one replaces it).
	answered map[string]bool
	byCollab map[string]int
	// spawnedBy is the thread whose spawn_agent call started this one
	// (session_meta source subagent.thread_spawn), "" when none did.
	spawnedBy string

	buf []byte // scratch for unquoting

	seenOrds  []seenRecord    // the records read, by ordinal
	seenLines map[uint64]bool // and by their bytes' hash, without one
	seed      maphash.Seed
}

func newParser(name string) *parser {
	return &parser{name: name, open: -1, unbilled: -1, toolNames: map[string]string{},
		answered: map[string]bool{}, byCollab: map[string]int{}}
}

func (p *parser) skip(reason string) {
	p.skipped = append(p.skipped, harness.Skip{File: p.name, Line: p.lineNo, Reason: reason})
}

// prime sets the state a tail's parse starts from (see ParseTail): it
// reads, backwards from off, the last usage report (the last
// token_usage_record when the file has them, token_count repeating them),
// the last start or end of a turn, and the prompts since the model last
// answered (their items and events pair up across the cut), and takes
// their totals, turn state and prompts without making anything of them.
func (p *parser) prime(f io.ReaderAt, off int64) {
	var record, count, turn []byte
	var prompts [][]byte // last first
	windowDone := false
	sinceReport := 0
	eachLineBefore(f, off, func(line []byte) bool {
		if !windowDone {
			switch promptWindow(line) {
			case windowPrompt:
				prompts = append(prompts, bytes.Clone(line))
			case windowStart:
				windowDone = true
			}
		}
		switch typ, sub := envelope(line); {
		case typ == "token_usage_record":
			if record == nil {
				record = line
			}
		case typ == "event_msg" && sub == "token_count":
			if count == nil {
				count = line
			}
		case typ == "event_msg" && (sub == "task_started" || sub == "task_complete" || sub == "turn_aborted"):
			if turn == nil {
				turn = line
			}
		}
		if record != nil || count != nil {
			sinceReport++
		}
		// A token_count repeats the token_usage_record a few lines above
		// it: look that far for one before taking the count.
		return turn == nil || (record == nil && (count == nil || sinceReport < 64)) || !windowDone
	})
	p.priming = true
	if turn != nil {
		p.line(turn)
	}
	switch {
	case record != nil:
		p.line(record) // sets records: token_count repeats from now on
	case count != nil:
		p.line(count)
	}
	for i := len(prompts) - 1; i >= 0; i-- {
		p.line(prompts[i])
	}
	p.priming = false
	// What the prompts made was stored by the last import: only their
	// pairing is kept.
	p.msgs, p.open, p.unbilled = nil, -1, -1
	p.skipped, p.lastTS = nil, nil
}

// What a record is to the prompts since the model last answered.
const (
	windowOther  = iota // neither
	windowPrompt        // a user response item, or a user_message event
	windowStart         // the model's output or a turn's start: the window begins after it
)

// promptWindow says what line is to the prompts since the model last
// answered (see userMessage).
func promptWindow(line []byte) int {
	isItem := bytes.Contains(line, []byte(`"response_item"`))
	if !isItem && !bytes.Contains(line, []byte(`"user_message"`)) && !bytes.Contains(line, []byte(`"task_started"`)) {
		return windowOther
	}
	it, ok := object(line)
	if !ok {
		return windowOther
	}
	var typ string
	var payload []byte
	for k, v := range it.Members() {
		switch string(k) {
		case "type":
			typ = str(v)
		case "payload":
			payload = v
		}
	}
	pl, ok := object(payload)
	if !ok {
		return windowOther
	}
	var sub, role string
	for k, v := range pl.Members() {
		switch string(k) {
		case "type":
			sub = str(v)
		case "role":
			role = str(v)
		}
	}
	switch {
	case typ == "event_msg" && sub == "user_message":
		return windowPrompt
	case typ == "event_msg" && sub == "task_started":
		return windowStart
	case typ != "response_item":
		return windowOther
	case sub == "message" && role == "user":
		return windowPrompt
	case sub == "message" && role != "assistant":
		return windowOther // developer and system context
	default:
		return windowStart // the model's output, or a tool's
	}
}

// envelope is a record's type and, for an event_msg, its payload's type,
// when line is a rollout record; "" otherwise.
func envelope(line []byte) (typ, sub string) {
	if !bytes.Contains(line, []byte("token_")) && !bytes.Contains(line, []byte("task_")) && !bytes.Contains(line, []byte("turn_aborted")) {
		return "", "" // not worth a look
	}
	it, ok := object(line)
	if !ok {
		return "", ""
	}
	var payload []byte
	for k, v := range it.Members() {
		switch string(k) {
		case "type":
			typ = str(v)
		case "payload":
			payload = v
		}
	}
	if typ != "event_msg" {
		return typ, ""
	}
	pl, ok := object(payload)
	if !ok {
		return typ, ""
	}
	for k, v := range pl.Members() {
		if string(k) == "type" {
			return typ, str(v)
		}
	}
	return typ, ""
}

// eachLineBefore calls fn with the complete lines that end before off,
// last first, until fn returns false (or 64 MB were read).
func eachLineBefore(f io.ReaderAt, off int64, fn func([]byte) bool) {
	const chunk = 1 << 16
	var tail []byte // the start of a line that began in an earlier chunk
	for pos := off; pos > 0 && off-pos < 64<<20; {
		n := min(int64(chunk), pos)
		pos -= n
		buf := make([]byte, n, n+int64(len(tail)))
		if _, err := f.ReadAt(buf, pos); err != nil && !errors.Is(err, io.EOF) {
			return
		}
		buf = append(buf, tail...)
		lines := bytes.Split(buf, []byte{'\n'})
		tail = lines[0]
		for i := len(lines) - 1; i >= 1; i-- {
			if len(lines[i]) > 0 && !fn(lines[i]) {
				return
			}
		}
		if pos == 0 && len(tail) > 0 {
			fn(tail)
		}
	}
}

// line reads one complete line.
func (p *parser) line(b []byte) {
	b = bytes.TrimRight(b, " \t\r\n")
	if p.lineNo == 1 {
		b = bytes.TrimPrefix(b, []byte("\ufeff"))
	}
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 {
		return
	}
	if b[0] != '{' {
		if jsonscan.Valid(b) {
			p.skip("not a JSON object")
		} else {
			p.skip("invalid JSON")
		}
		return
	}
	it := objectLine(b)
	var ts, ord, typ, payload []byte
	var hasID, recordType bool
	for k, v := range it.Members() {
		switch string(k) {
		case "timestamp":
			ts = v
		case "ordinal":
			ord = v
		case "type":
			typ = v
		case "payload":
			payload = v
		case "id":
			hasID = true
		case "record_type":
			recordType = true
		}
	}
	err := it.Err() // the scanner also refuses data after the object
	if err != nil {
		p.skip("invalid JSON: " + err.Error())
		return
	}
	if p.duplicate(b, ord) {
		return
	}
	p.ts, p.ord, p.tsOK = ts, ord, false
	if ts != nil {
		p.lastTS = append(p.lastTS[:0], ts...)
	}
	switch {
	case payload != nil:
		p.record(name(typ), payload)
	case recordType:
		// {"record_type":"state"}: bookkeeping in the oldest rollouts.
	case typ == nil && hasID && !p.haveMeta:
		p.sessionMeta(b) // the oldest rollouts' bare header line
	case typ != nil:
		p.responseItem(b) // the oldest rollouts wrote items without an envelope
	}
}

// duplicate reports whether the record b was read before: a line written
// twice is read once. A record is known by its ordinal, or, in files
// written before ordinals, by its bytes. A different record under an
// ordinal already read is left out too, and listed.
func (p *parser) duplicate(b, ord []byte) bool {
	if p.seed == (maphash.Seed{}) {
		p.seed = maphash.MakeSeed()
	}
	sum := maphash.Bytes(p.seed, b)
	n, ok := num(ord)
	if !ok {
		if p.seenLines == nil {
			p.seenLines = map[uint64]bool{}
		}
		if p.seenLines[sum] {
			return true
		}
		p.seenLines[sum] = true
		return false
	}
	// Ordinals grow line by line: the records read are kept in their
	// order, and only one out of order costs a search.
	rec := seenRecord{ord: n, sum: sum, line: p.lineNo}
	if k := len(p.seenOrds); k == 0 || n > p.seenOrds[k-1].ord {
		p.seenOrds = append(p.seenOrds, rec)
		return false
	}
	i, found := slices.BinarySearchFunc(p.seenOrds, n, func(r seenRecord, n int64) int { return cmp.Compare(r.ord, n) })
	if !found {
		p.seenOrds = slices.Insert(p.seenOrds, i, rec)
		return false
	}
	if first := p.seenOrds[i]; first.sum != sum {
		p.skip(fmt.Sprintf("ordinal %d was already used on line %d: left out", n, first.line))
	}
	return true
}

type seenRecord struct {
	ord  int64
	sum  uint64
	line int
}

// name is the contents of a JSON string value that needs no unescaping
// (record and item type names), else nil.
func name(v []byte) []byte {
	if len(v) < 2 || v[0] != '"' {
		return nil
	}
	in := v[1 : len(v)-1]
	if bytes.IndexByte(in, '\\') >= 0 {
		return []byte(str(v))
	}
	return in
}

func (p *parser) record(typ, payload []byte) {
	switch string(typ) {
	case "response_item":
		p.responseItem(payload)
	case "event_msg":
		p.event(payload)
	case "token_usage_record":
		p.usageRecord(payload)
	case "turn_context":
		p.turnContext(payload)
	case "session_meta":
		p.sessionMeta(payload)
	case "compacted":
		p.compacted(payload)
	}
}

// time is the current record's timestamp, zero when it has none.
func (p *parser) time() time.Time {
	if !p.tsOK {
		p.tsTime, p.tsOK = parseTime(p.ts), true
	}
	return p.tsTime
}

func parseTime(v []byte) time.Time {
	s := name(v)
	if s == nil {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, string(s))
	if err != nil {
		return time.Time{}
	}
	return t
}

// native is the current record's NativeID: its ordinal, or for files
// written before ordinals its 0-based line number, which is what an ordinal
// counts.
func (p *parser) native() string {
	if n, ok := num(p.ord); ok {
		return strconv.FormatInt(n, 10)
	}
	return strconv.Itoa(p.lineNo - 1)
}

// add appends a message that is not assistant output; it ends the response
// being read.
func (p *parser) add(role model.Role, parts ...model.Part) {
	p.open = -1
	if role == model.Tool {
		p.itemPrompts, p.eventPrompts = 0, 0
	}
	p.msgs = append(p.msgs, model.Message{Role: role, Parts: parts, Time: p.time(), NativeID: p.native()})
}

// assistant is the assistant message of the response being read, made on
// its first output item.
func (p *parser) assistant() *model.Message {
	if p.open < 0 {
		p.itemPrompts, p.eventPrompts = 0, 0 // the model answered: the prompts before are paired or alone
		p.msgs = append(p.msgs, model.Message{
			Role: model.Assistant, Model: p.model, Time: p.time(), NativeID: p.native(),
			Usage: p.pending,
		})
		p.pending = model.Usage{}
		p.open = len(p.msgs) - 1
		p.unbilled = p.open
	}
	return &p.msgs[p.open]
}

// usage attributes one response's usage to its assistant message: the
// open one, else the latest not yet billed (older Codex reported usage
// after the tool outputs), else the next one made (a report with no
// assistant output before it: a failed response, a compaction).
//
// When the report carries the thread's total, what the response cost is
// what it added to the total before it, so the run's usage is the
// rollout's last total (minus, in a fork, the parent's total at the fork,
// which the fork's first report shows as its total minus its own usage):
// a response whose own report is missing still counts, in the next one.
func (p *parser) usage(last tokenUsage, total *tokenUsage) {
	if total != nil {
		// token_usage_record and event_msg token_count report the same
		// response (and older versions sometimes twice): the thread total
		// tells a repeat from a new response.
		if p.haveTotal && *total == p.lastTotal {
			return
		}
		switch d, ok := total.minus(p.lastTotal); {
		case p.haveTotal && ok:
			last = d
		case !p.haveTotal && !p.forked():
			last = *total // the thread's spending so far is all this run's
		}
		p.lastTotal, p.haveTotal = *total, true
	}
	if p.priming {
		return
	}
	u := last.model()
	switch {
	case p.open >= 0:
		p.msgs[p.open].Usage = p.msgs[p.open].Usage.Add(u)
	case p.unbilled >= 0:
		p.msgs[p.unbilled].Usage = p.msgs[p.unbilled].Usage.Add(u)
	default:
		p.pending = p.pending.Add(u)
	}
	p.open, p.unbilled = -1, -1
}

// forked reports whether the rollout continues another thread, whose
// usage its totals include.
func (p *parser) forked() bool {
	return p.forkedFrom != "" || p.beforeOrd > 0 || p.copiedParent != ""
}

func (p *parser) usageRecord(pl []byte) {
	it, ok := object(pl)
	if !ok {
		p.skip("token_usage_record: payload is not an object")
		return
	}
	var last, total tokenUsage
	var haveLast, haveTotal bool
	var err error
	for k, v := range it.Members() {
		switch string(k) {
		case "usage":
			last, haveLast, err = parseUsage(v)
		case "thread_token_usage":
			total, haveTotal, err = parseUsage(v)
		}
		if err != nil {
			break
		}
	}
	if err != nil {
		// A corrupt count is never stored: the report is dropped whole.
		p.skip("token_usage_record: usage dropped: " + err.Error())
		return
	}
	if !haveLast {
		return
	}
	p.records = true
	if haveTotal {
		p.usage(last, &total)
	} else {
		p.usage(last, nil)
	}
}

// event reads the event_msg records that matter: token_count for usage,
// the start and end of turns, the person's prompts (user_message, when no
// response item holds them) and the results of the collaboration tools
// (spawn_agent, wait_agent, ...), which no function_call_output answers;
// the others repeat response items or report progress.
func (p *parser) event(pl []byte) {
	it, ok := object(pl)
	if !ok {
		return
	}
	// "type" comes first: most events (item_completed repeating a tool's
	// whole output) need no more than that.
	var typ []byte
	for k, v := range it.Members() {
		if string(k) == "type" {
			typ = v
			break
		}
	}
	var reason []byte
	if jsonscan.Equal(typ, "turn_aborted") {
		it, _ = object(pl)
		for k, v := range it.Members() {
			if string(k) == "reason" {
				reason = v
			}
		}
	}
	switch t := string(name(typ)); t {
	case "task_started":
		p.turnOpen, p.aborted = true, ""
		p.itemPrompts, p.eventPrompts = 0, 0
	case "user_message":
		p.userMessage(pl)
	case "collab_agent_spawn_end", "collab_waiting_end", "collab_agent_interaction_end", "collab_close_end", "collab_resume_end":
		p.collabEnd(t, pl)
	case "task_complete":
		p.turnOpen, p.aborted = false, ""
	case "turn_aborted":
		p.turnOpen, p.aborted = false, str(reason)
		if p.aborted == "" {
			p.aborted = "aborted"
		}
	case "token_count":
		p.tokenCount(pl)
	}
}

// tokenCount reads a token_count event. Once the file has shown
// token_usage_record, which reports every response, token_count only
// repeats it. A repeat is otherwise told by the thread total (usage); one
// with no assistant output left to bill is kept for the next message.
func (p *parser) tokenCount(pl []byte) {
	if p.records {
		return
	}
	it, _ := object(pl)
	var info []byte
	var isFlat bool
	for k, v := range it.Members() {
		switch string(k) {
		case "info":
			info = v
		case "input_tokens":
			isFlat = true
		}
	}
	if isFlat {
		// Before TokenCountEvent (mid 2025) the payload was the last
		// response's usage itself, with no total.
		flat, _, err := parseUsage(pl)
		if err != nil {
			p.skip("token_count: usage dropped: " + err.Error())
			return
		}
		p.usage(flat, nil)
		return
	}
	it, ok := object(info) // null while nothing was counted yet
	if !ok {
		return
	}
	var last, total tokenUsage
	var haveLast, haveTotal bool
	var err error
	for k, v := range it.Members() {
		switch string(k) {
		case "last_token_usage":
			last, haveLast, err = parseUsage(v)
		case "total_token_usage":
			total, haveTotal, err = parseUsage(v)
		}
		if err != nil {
			break
		}
	}
	switch {
	case err != nil:
		p.skip("token_count: usage dropped: " + err.Error())
	case haveTotal:
		p.usage(last, &total)
	case haveLast:
		p.usage(last, nil)
	}
}

func (p *parser) turnContext(pl []byte) {
	it, ok := object(pl)
	if !ok {
		return
	}
	for k, v := range it.Members() {
		switch string(k) {
		case "model":
			if m := str(v); m != "" {
				p.model = m
			}
		case "cwd":
			if p.cwd == "" {
				p.cwd = str(v)
			}
		}
	}
}

func (p *parser) sessionMeta(pl []byte) {
	it, ok := object(pl)
	if !ok {
		p.skip("session_meta: payload is not an object")
		return
	}
	var id, sessionID, cwd, branch, forkedFrom, parent string
	var created time.Time
	before := 0
	for k, v := range it.Members() {
		switch string(k) {
		case "id":
			id = str(v)
		case "session_id":
			sessionID = str(v)
		case "timestamp":
			created = parseTime(v)
		case "cwd":
			cwd = str(v)
		case "git":
			if git, ok := object(v); ok {
				for k, v := range git.Members() {
					if string(k) == "branch" {
						branch = str(v)
					}
				}
			}
		case "forked_from_id":
			forkedFrom = str(v)
		case "source":
			parent = spawnedBy(v)
		case "forked_from_ordinal_exclusive":
			if n, ok := num(v); ok {
				before = int(n)
			}
		case "history_base":
			if hb, ok := object(v); ok && before == 0 {
				for k, v := range hb.Members() {
					if string(k) == "end_ordinal_exclusive" {
						if n, ok := num(v); ok {
							before = int(n)
						}
					}
				}
			}
		}
	}
	if id == "" {
		id = sessionID
	}
	if p.haveMeta {
		// Forks before paginated history copied the parent's records,
		// its session_meta first, into the new file.
		if id != "" && id != p.id && p.copiedParent == "" {
			p.copiedParent = id
		}
		return
	}
	p.haveMeta = true
	p.id, p.branch, p.forkedFrom, p.beforeOrd, p.spawnedBy = id, branch, forkedFrom, before, parent
	if cwd != "" {
		p.cwd = cwd
	}
	p.created = created
	if created.IsZero() {
		p.created = p.time()
	}
}

func (p *parser) compacted(pl []byte) {
	it, ok := object(pl)
	if !ok {
		return
	}
	for k, v := range it.Members() {
		if string(k) == "message" {
			if s := str(v); s != "" {
				p.add(model.System, model.Part{Kind: model.Text, Text: s})
			}
		}
	}
}

// item holds the fields of a response item that any item type uses.
type item struct {
	typ, role, content, summary, name  []byte
	namespace, args, input, callID, id []byte
	output, action, tools, meta        []byte
	author, recipient                  []byte
}

func (p *parser) responseItem(pl []byte) {
	it, ok := object(pl)
	if !ok {
		p.skip("response_item: payload is not an object")
		return
	}
	var f item
	for k, v := range it.Members() {
		switch string(k) {
		case "type":
			f.typ = v
		case "role":
			f.role = v
		case "content":
			f.content = v
		case "summary":
			f.summary = v
		case "name":
			f.name = v
		case "namespace":
			f.namespace = v
		case "arguments":
			f.args = v
		case "input":
			f.input = v
		case "call_id":
			f.callID = v
		case "id":
			f.id = v
		case "output":
			f.output = v
		case "action":
			f.action = v
		case "tools":
			f.tools = v
		case "internal_chat_message_metadata_passthrough":
			f.meta = v
		case "author":
			f.author = v
		case "recipient":
			f.recipient = v
		}
	}
	switch string(name(f.typ)) {
	case "message":
		p.message(&f)
	case "reasoning":
		p.reasoning(&f)
	case "function_call":
		callName := str(f.name)
		if ns := str(f.namespace); ns != "" {
			callName = ns + "." + callName
		}
		p.call(callID(&f), callName, p.jsonText(f.args))
	case "custom_tool_call":
		// Freeform input (an apply_patch patch): kept as a JSON string so
		// that ToolInput is always JSON.
		p.call(callID(&f), str(f.name), rawText(f.input))
	case "local_shell_call":
		p.call(callID(&f), "local_shell", rawText(f.action))
	case "tool_search_call":
		if id := str(f.callID); id != "" {
			p.call(id, "tool_search", rawText(f.args))
		} else {
			p.other(pl, "tool search")
		}
	case "web_search_call":
		// Run by the provider inside the response: no output item follows,
		// so it is not a tool call waiting for a result.
		p.other(pl, "web search: "+webSearchText(f.action))
	case "image_generation_call":
		p.assistantPart(model.Part{Kind: model.Image, Raw: rawText(pl)})
	case "function_call_output", "custom_tool_call_output":
		p.result(str(f.callID), f.output)
	case "tool_search_output":
		if id := str(f.callID); id != "" {
			p.answered[id] = true
			p.add(model.Tool, model.Part{Kind: model.ToolResult, ToolCallID: id, ToolName: p.toolNames[id], Text: rawText(f.tools)})
		}
	case "agent_message":
		// A message between agents of a multi-agent thread.
		text := strings.Join(texts(f.content), "\n")
		head := str(f.author) + " → " + str(f.recipient)
		p.add(model.System, model.Part{Kind: model.Text, Text: head + ": " + text})
	}
}

// callID is the id an item's output names it by: its call_id, else (as
// some tools write calls) its id.
func callID(f *item) string {
	if id := str(f.callID); id != "" {
		return id
	}
	return str(f.id)
}

func (p *parser) message(f *item) {
	parts := contentParts(f.content)
	if len(parts) == 0 {
		return
	}
	switch role := str(f.role); role {
	case "assistant":
		m := p.assistant()
		m.Parts = append(m.Parts, parts...)
	case "user":
		switch {
		case injected(parts, f.meta):
			p.add(model.System, parts...)
		case p.eventPrompts > 0:
			// Its event came first and holds the prompt already.
			p.eventPrompts--
		default:
			p.itemPrompts++
			p.add(model.User, parts...)
		}
	default: // developer, system
		p.add(model.System, parts...)
	}
}

func (p *parser) reasoning(f *item) {
	// The summary is what Codex shows; raw reasoning text only when the
	// provider sent it; encrypted_content is never shown.
	t := texts(f.summary)
	if len(t) == 0 {
		t = texts(f.content)
	}
	if len(t) == 0 {
		return
	}
	p.assistantPart(model.Part{Kind: model.Thinking, Text: strings.Join(t, "\n\n")})
}

func (p *parser) assistantPart(part model.Part) {
	m := p.assistant()
	m.Parts = append(m.Parts, part)
}

func (p *parser) call(id, toolName, input string) {
	if id != "" {
		p.toolNames[id] = toolName
	}
	p.assistantPart(model.Part{Kind: model.ToolCall, ToolCallID: id, ToolName: toolName, ToolInput: input})
}

func (p *parser) other(raw []byte, text string) {
	p.assistantPart(model.Part{Kind: model.Other, Text: text, Raw: rawText(raw)})
}

// jsonText is the JSON inside a function call's arguments string; when the
// string does not hold JSON, or arguments is not a string, the raw value.
func (p *parser) jsonText(v []byte) string {
	if len(v) < 2 || v[0] != '"' {
		if len(v) == 0 {
			return "{}"
		}
		return rawText(v)
	}
	in := v[1 : len(v)-1]
	if bytes.IndexByte(in, '\\') >= 0 {
		p.buf, _ = jsonscan.AppendUnquoted(p.buf[:0], in)
		in = p.buf
	}
	if jsonscan.Valid(in) {
		return string(in)
	}
	return rawText(v)
}

// rawText is raw JSON kept as text, with invalid UTF-8 (which JSON allows
// only inside strings) replaced, so that every string tine stores is UTF-8.
func rawText(v []byte) string { return jsonscan.Text(v) }

// result adds a tool output. output is a string, an array of content items
// (text and images), or in older files {content, success}.
func (p *parser) result(id string, output []byte) {
	parts := p.resultParts(id, output)
	if i, ok := p.byCollab[id]; ok {
		// A collaboration event answered the call already: the output,
		// which is what the model saw, takes its place.
		delete(p.byCollab, id)
		p.msgs[i].Parts = parts
		return
	}
	p.answered[id] = true
	p.add(model.Tool, parts...)
}

func (p *parser) resultParts(id string, output []byte) []model.Part {
	part := model.Part{Kind: model.ToolResult, ToolCallID: id, ToolName: p.toolNames[id]}
	var extra []model.Part
	if obj, ok := object(output); ok {
		for k, v := range obj.Members() {
			switch string(k) {
			case "content":
				output = v
			case "success":
				part.IsError = string(v) == "false"
			}
		}
	}
	if len(output) > 0 && output[0] == '[' {
		var t []string
		for _, cp := range contentParts(output) {
			if cp.Kind == model.Text {
				t = append(t, cp.Text)
			} else {
				extra = append(extra, cp)
			}
		}
		part.Text = strings.Join(t, "\n")
	} else {
		part.Text = str(output)
	}
	return append([]model.Part{part}, extra...)
}

// contentParts reads a message's content array.
func contentParts(v []byte) []model.Part {
	if len(v) > 0 && v[0] == '"' {
		if s := str(v); s != "" {
			return []model.Part{{Kind: model.Text, Text: s}}
		}
		return nil
	}
	arr, ok := array(v)
	if !ok {
		return nil
	}
	var parts []model.Part
	for c := range arr.Elements() {
		obj, ok := object(c)
		if !ok {
			continue
		}
		var typ, text []byte
		for k, v := range obj.Members() {
			switch string(k) {
			case "type":
				typ = v
			case "text", "refusal":
				text = v
			}
		}
		switch string(name(typ)) {
		case "input_text", "output_text", "text", "refusal", "summary_text", "reasoning_text":
			if s := str(text); s != "" {
				parts = append(parts, model.Part{Kind: model.Text, Text: s})
			}
		case "input_image", "output_image", "image":
			parts = append(parts, model.Part{Kind: model.Image, Raw: rawText(c)})
		default:
			parts = append(parts, model.Part{Kind: model.Other, Raw: rawText(c)})
		}
	}
	return parts
}

// texts is the text of each item of a summary or content array.
func texts(v []byte) []string {
	var out []string
	for _, p := range contentParts(v) {
		if p.Kind == model.Text {
			out = append(out, p.Text)
		}
	}
	return out
}

func webSearchText(action []byte) string {
	obj, ok := object(action)
	if !ok {
		return ""
	}
	var s string
	for k, v := range obj.Members() {
		switch string(k) {
		case "query", "url", "pattern":
			if s == "" {
				s = str(v)
			}
		}
	}
	return s
}

// injectedPrefixes open the user-role messages Codex writes itself, for
// files without provenance metadata.
var injectedPrefixes = []string{
	"<environment_context>",
	"<user_instructions>",
	"# AGENTS.md instructions for",
	"<INSTRUCTIONS>",
	"<permissions instructions>",
	"<skills_instructions>",
	"<skill>",
	"<turn_aborted>",
	"<subagent_notification>",
	"<agent_message_board_notification>",
	"<user_shell_command>",
	"<context_window_reminder>",
	"<startup_context>",
	"<apps_instructions>",
	"<plugins_instructions>",
	"<environments_instructions>",
	"<collaboration_mode>",
	"<model_instructions>",
	"<managed_developer_instructions>",
}

// injected reports whether a user-role message came from Codex rather than
// a person. Newer Codex labels each content item with a provenance ("user"
// for what was typed; "harness", "skills", ... otherwise); older files are
// judged by the tag their text opens with.
func injected(parts []model.Part, meta []byte) bool {
	if obj, ok := object(meta); ok {
		saw := false
		for k, v := range obj.Members() {
			if string(k) != "content_item_metadata" {
				continue
			}
			arr, _ := array(v)
			for e := range arr.Elements() {
				typed, user := provenance(e)
				if user {
					return false
				}
				saw = saw || typed
			}
		}
		if saw {
			return true
		}
	}
	for _, part := range parts {
		if part.Kind != model.Text {
			continue
		}
		t := strings.TrimLeft(part.Text, " \t\r\n")
		for _, pre := range injectedPrefixes {
			if strings.HasPrefix(t, pre) {
				return true
			}
		}
		return false
	}
	return false
}

// provenance reads a content item's metadata: typed when it names a
// provenance type, user when that type is "user" (the person typed it).
func provenance(item []byte) (typed, user bool) {
	obj, ok := object(item)
	if !ok {
		return false, false
	}
	for k, v := range obj.Members() {
		if string(k) != "provenance" {
			continue
		}
		prov, _ := object(v)
		for k, v := range prov.Members() {
			if string(k) == "type" {
				typed = true
				if jsonscan.Equal(v, "user") {
					return true, true
				}
			}
		}
	}
	return typed, false
}

// finish makes the file's run from what was read.
func (p *parser) finish(off int64) harness.ParsedFile {
	pf := harness.ParsedFile{Skipped: p.skipped, Offset: off}
	if !p.haveMeta && len(p.msgs) == 0 {
		return pf
	}
	if !p.pending.IsZero() && len(p.msgs) > 0 {
		// Usage with no assistant message after it (a failed response):
		// keep it on the run by putting it on the last message.
		i := len(p.msgs) - 1
		for j := i; j >= 0; j-- {
			if p.msgs[j].Role == model.Assistant {
				i = j
				break
			}
		}
		p.msgs[i].Usage = p.msgs[i].Usage.Add(p.pending)
		p.pending = model.Usage{}
	}
	id := p.id
	if id == "" {
		id = idFromName(p.name)
	}
	run := model.Run{
		Harness:    Harness,
		NativeID:   id,
		Model:      p.model,
		Cwd:        p.cwd,
		Branch:     p.branch,
		Title:      model.TitleOf(p.msgs),
		Status:     model.Completed,
		CreatedAt:  p.created,
		FinishedAt: parseTime(p.lastTS),
	}
	// A rollout whose last turn never completed was interrupted: Codex
	// was stopped (or is still running: the next import sees it end).
	switch {
	case p.turnOpen:
		run.Status, run.Error = model.Failed, ErrMidTurn
	case p.aborted != "":
		run.Status, run.Error = model.Failed, "interrupted: the last turn was aborted ("+p.aborted+")"
	}
	if run.CreatedAt.IsZero() && len(p.msgs) > 0 {
		run.CreatedAt = p.msgs[0].Time
	}
	pr := harness.ParsedRun{Parent: -1}
	inherited := 0
	if parent := firstNonEmpty(p.forkedFrom, p.copiedParent); parent != "" {
		h := &harness.ForkHint{ParentSession: parent, BeforeOrdinal: p.beforeOrd}
		if p.beforeOrd > 0 {
			// Codex 0.169 does not copy the parent's records; count any
			// that a version does copy (they keep their ordinals).
			for _, m := range p.msgs {
				if n, err := strconv.Atoi(m.NativeID); err != nil || n >= p.beforeOrd {
					break
				}
				h.Inherited++
			}
		}
		inherited = h.Inherited
		pr.Fork = h
	}
	run.Usage = model.OwnUsage(p.msgs, inherited)
	if p.spawnedBy != "" {
		// A thread a spawn_agent call started is a subagent of the thread
		// that made the call, whatever history it was given: a relation,
		// nothing inherited (a copied parent's usage still is not its own).
		pr.Fork, inherited = nil, 0
		pr.Subagent = &harness.SubagentHint{ParentSession: p.spawnedBy, ToolCallID: spawningCall(p.name, p.spawnedBy, id)}
	}
	run.OwnMessages = len(p.msgs) - inherited
	if len(p.msgs) == 0 {
		run.Usage = p.pending
	}
	pr.Run, pr.Messages = run, p.msgs
	pf.Runs = []harness.ParsedRun{pr}
	return pf
}

// ErrMidTurn is the error of a rollout that ends in the middle of a turn.
const ErrMidTurn = "interrupted: the session ended mid-turn"

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// idFromName takes the thread id from a rollout's file name,
// rollout-<time>-<uuid>.jsonl, when the file has no session_meta.
func idFromName(path string) string {
	base := strings.TrimSuffix(filepath.Base(path), ".jsonl")
	if len(base) < 36 {
		return ""
	}
	id := base[len(base)-36:]
	if id[8] != '-' || id[13] != '-' || id[18] != '-' || id[23] != '-' {
		return ""
	}
	return id
}
