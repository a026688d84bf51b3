package model

import (
	"encoding/binary"
	"errors"
	"slices"
)

// Cut facts: what rule 1 needs to know of each message, said as the
// message is stored so that where a long run can be cut is read, not
// worked out again from every message (ARCHITECTURE.md, "Pair-safe
// boundaries"). Each fact depends only on the message and those before
// it, so a fork inherits its prefix's facts as they are: a run's facts
// are stored with its own messages, and a transcript's are its
// ancestors' up to where it forked, then its own.
//
// A message's facts are its kind (an assistant message, one that made
// tool calls, a message a person typed, a tool message) and the tool
// batches it answers: each a batch (an assistant message with calls)
// whose calls it answers the last of (it completes the batch), or, for a
// batch a prompt left unanswered, one of whose calls it answers late (the
// batch then covers every cut up to here). Encoded: a uvarint of the
// kind bits and the number of batches, then a uvarint per batch, its
// distance back shifted left once, the low bit set for a partial answer.

const (
	factAssistant = 1 << iota // an assistant message: a step
	factCalls                 // an assistant message that made tool calls: a batch
	factPrompt                // a message a person typed (Message.IsPrompt)
	factTool                  // a tool message
	factBits      = 4
)

// Facts are the cut facts of N consecutive messages, encoded in B (which
// may hold more after them: they are not read).
type Facts struct {
	B []byte
	N int
}

// ErrBadFacts: stored cut facts that cannot be read.
var ErrBadFacts = errors.New("cut facts cannot be read")

// CallEvent is a tool call left unanswered by a prompt, or answered later
// by a result: what following a transcript on from the middle needs to
// know besides the facts (NewCutState, CutState.Abandoned).
type CallEvent struct {
	At       int // the prompt, or the result that answered the call
	CallAt   int // the assistant message that made the call
	CallID   string
	Answered bool
}

// CutState follows a transcript message by message (Feed) and says the
// facts of each. It holds the batches still open: those since the last
// prompt with calls not yet answered, and the calls a prompt left
// unanswered (which a later result may still answer).
type CutState struct {
	n    int
	open []openBatch
	// abandoned holds, by call id, the batches that made a call of that
	// id a prompt left unanswered; left how many of each batch's calls
	// are still unanswered.
	abandoned map[string][]int
	left      map[int]int
	refs      []factRef
}

type openBatch struct {
	at      int
	pending []string
}

type factRef struct {
	dist    int
	partial bool
}

// NewCutState starts following a transcript at message n: 0 for its
// start, or, to go on from the middle, where the messages fed next start
// (feed it the messages since the first batch still open there, then
// tell it the calls left unanswered before: Abandoned).
func NewCutState(n int) *CutState {
	return &CutState{n: n, abandoned: map[string][]int{}, left: map[int]int{}}
}

// N is the position of the next message Feed takes.
func (s *CutState) N() int { return s.n }

// Abandoned says that a prompt left call id of the batch at callAt
// unanswered, and nothing answered it since.
func (s *CutState) Abandoned(callAt int, id string) {
	s.abandoned[id] = append(s.abandoned[id], callAt)
	s.left[callAt]++
}

// Open lists the batches open since the last prompt (their positions,
// in order): where a cut would split one. The first is the earliest
// message a state that goes on from here needs to be fed again.
func (s *CutState) Open() []int {
	var out []int
	for _, b := range s.open {
		out = append(out, b.at)
	}
	return out
}

// Feed takes the next message, appends its facts to facts and returns
// them, with the calls it left unanswered (a prompt) or answered late.
func (s *CutState) Feed(m Message, facts []byte) ([]byte, []CallEvent) {
	j := s.n
	s.n++
	s.refs = s.refs[:0]
	var events []CallEvent
	for _, p := range m.Parts {
		if p.Kind != ToolResult || p.ToolCallID == "" {
			continue
		}
		c := p.ToolCallID
		// A result answers every open call of its id: for each, it is the
		// first result of that id after it (a reused id answers them all).
		for bi := 0; bi < len(s.open); {
			b := &s.open[bi]
			before := len(b.pending)
			b.pending = slices.DeleteFunc(b.pending, func(x string) bool { return x == c })
			if len(b.pending) == 0 && before > 0 {
				s.ref(j-b.at, false)
				s.open = slices.Delete(s.open, bi, bi+1)
				continue
			}
			bi++
		}
		if ats, ok := s.abandoned[c]; ok {
			delete(s.abandoned, c)
			for _, a := range ats {
				events = append(events, CallEvent{At: j, CallAt: a, CallID: c, Answered: true})
				s.left[a]--
				if s.left[a] <= 0 {
					delete(s.left, a)
					s.ref(j-a, false)
				} else {
					s.ref(j-a, true)
				}
			}
		}
	}
	kind := 0
	if m.IsPrompt() {
		kind |= factPrompt
		for _, b := range s.open {
			for _, c := range b.pending {
				s.abandoned[c] = append(s.abandoned[c], b.at)
				events = append(events, CallEvent{At: j, CallAt: b.at, CallID: c})
			}
			s.left[b.at] += len(b.pending)
		}
		s.open = s.open[:0]
	}
	switch m.Role {
	case Assistant:
		kind |= factAssistant
		var ids []string
		for _, p := range m.Parts {
			if p.Kind == ToolCall {
				ids = append(ids, p.ToolCallID)
			}
		}
		if len(ids) > 0 {
			kind |= factCalls
			s.open = append(s.open, openBatch{at: j, pending: ids})
		}
	case Tool:
		kind |= factTool
	}
	facts = binary.AppendUvarint(facts, uint64(kind|len(s.refs)<<factBits))
	for _, r := range s.refs {
		v := uint64(r.dist) << 1
		if r.partial {
			v |= 1
		}
		facts = binary.AppendUvarint(facts, v)
	}
	return facts, events
}

// ref notes that the message answers the batch dist back; an answer that
// completes it wins over a partial one.
func (s *CutState) ref(dist int, partial bool) {
	for i := range s.refs {
		if s.refs[i].dist == dist {
			s.refs[i].partial = s.refs[i].partial && partial
			return
		}
	}
	s.refs = append(s.refs, factRef{dist, partial})
}

// FactsOf are the cut facts of msgs, a whole transcript.
func FactsOf(msgs []Message) []byte {
	s := NewCutState(0)
	var b []byte
	for _, m := range msgs {
		b, _ = s.Feed(m, b)
	}
	return b
}

// factReader reads encoded facts one message at a time.
type factReader struct {
	parts []Facts
	p, i  int // the part, and the offset in it
	left  int // messages left in the part
	err   error
}

func newFactReader(parts []Facts) *factReader {
	r := &factReader{parts: parts}
	if len(parts) > 0 {
		r.left = parts[0].N
	}
	return r
}

// next reads the next message's kind and the batches it answers, as
// distances back (refs, reused), the low bit set for a partial answer.
func (r *factReader) next(refs []uint64) (int, []uint64, bool) {
	for r.left == 0 {
		r.p++
		if r.p >= len(r.parts) {
			return 0, refs, false
		}
		r.i, r.left = 0, r.parts[r.p].N
	}
	b := r.parts[r.p].B
	v, ok := r.uvarint(b)
	if !ok {
		return 0, refs, false
	}
	refs = refs[:0]
	for range v >> factBits {
		d, ok := r.uvarint(b)
		if !ok || d>>1 == 0 {
			r.err = ErrBadFacts
			return 0, refs, false
		}
		refs = append(refs, d)
	}
	r.left--
	return int(v & (1<<factBits - 1)), refs, true
}

// uvarint reads one number at r.i of b; most are one byte.
func (r *factReader) uvarint(b []byte) (uint64, bool) {
	if r.i < len(b) && b[r.i] < 0x80 {
		r.i++
		return uint64(b[r.i-1]), true
	}
	if r.i >= len(b) {
		r.err = ErrBadFacts
		return 0, false
	}
	v, n := binary.Uvarint(b[r.i:])
	if n <= 0 {
		r.err = ErrBadFacts
		return 0, false
	}
	r.i += n
	return v, true
}

// CountFacts is how many messages' facts b holds, or an error.
func CountFacts(b []byte) (int, error) {
	n := 0
	for i := 0; i < len(b); n++ {
		v, k := binary.Uvarint(b[i:])
		if k <= 0 {
			return 0, ErrBadFacts
		}
		i += k
		for range v >> factBits {
			_, k := binary.Uvarint(b[min(i, len(b)):])
			if k <= 0 {
				return 0, ErrBadFacts
			}
			i += k
		}
	}
	return n, nil
}

// OpenAt is which batches are open since the last prompt after the
// messages of facts, the first of which is message from and the batches
// open before which are open: what a transcript that goes on from there
// (a fork) starts with.
func OpenAt(from int, open []int, facts []Facts) ([]int, error) {
	var out []int
	out = append(out, open...)
	r := newFactReader(facts)
	var refs []uint64
	for j := from; ; j++ {
		kind, rs, ok := r.next(refs)
		refs = rs
		if !ok {
			break
		}
		for _, d := range refs {
			if d&1 == 0 {
				out = slices.DeleteFunc(out, func(a int) bool { return a == j-int(d>>1) })
			}
		}
		if kind&factPrompt != 0 {
			out = out[:0]
		}
		if kind&factCalls != 0 {
			out = append(out, j)
		}
	}
	if len(out) == 0 {
		out = nil
	}
	return out, r.err
}

// BoundariesOf works out the boundaries of messages from.. of a
// transcript from their facts: every cut K from from to the end, and the
// steps of those messages. open are the batches open since the last prompt
// before message from (OpenAt): from 0, none. Cuts below from are not
// answered (a fork's inherited ones are its parent's business, but for
// the batches it finishes itself: it says those it reaches back into).
func BoundariesOf(from int, open []int, facts []Facts) (Boundaries, error) {
	n := 0
	for _, f := range facts {
		n += f.N
	}
	b := Boundaries{from: from, kinds: make([]uint8, n), unsafe: make([]int32, n+1), end: make([]int32, n)}
	// Where each batch is completed goes to end first (the boundary after
	// its last answer, 0 while not known); those of batches before from go
	// to a map. late holds the last late answer of each batch a prompt
	// left open.
	doneBefore := map[int]int{}
	late := map[int]int{}
	batches := 0
	firstPrompt := from + n
	// Read by hand: this loop is most of opening a long run.
	i := 0
	for _, f := range facts {
		bs, at := f.B, 0
		read := func() (uint64, bool) {
			if at < len(bs) && bs[at] < 0x80 {
				at++
				return uint64(bs[at-1]), true
			}
			if at >= len(bs) {
				return 0, false
			}
			v, k := binary.Uvarint(bs[at:])
			if k <= 0 {
				return 0, false
			}
			at += k
			return v, true
		}
		for range f.N {
			v, ok := read()
			if !ok {
				return Boundaries{}, ErrBadFacts
			}
			j := from + i
			kind := uint8(v & (1<<factBits - 1))
			b.kinds[i] = kind
			i++
			if kind&factCalls != 0 {
				batches++
			}
			if kind&factPrompt != 0 && firstPrompt == from+n {
				firstPrompt = j
			}
			for range v >> factBits {
				d, ok := read()
				if !ok || d>>1 == 0 {
					return Boundaries{}, ErrBadFacts
				}
				a := j - int(d>>1)
				switch {
				case d&1 == 1:
					late[a] = max(late[a], j)
				case a >= from:
					b.end[a-from] = int32(j + 1)
				default:
					doneBefore[a] = j
				}
			}
		}
	}
	// The batches that reach into these messages from before them: those
	// open since the last prompt, and those an answer here reaches back to.
	type batch struct{ at, last int } // last: the last cut it covers
	var before []batch
	b.before = map[int]int32{}
	seen := map[int]bool{}
	addBefore := func(a int, openHere bool) {
		if seen[a] {
			return
		}
		seen[a] = true
		last, end := -1, -1
		if c, ok := doneBefore[a]; ok {
			last, end = c, c+1
		} else if openHere {
			last = max(firstPrompt, late[a])
		} else {
			last = late[a]
		}
		b.before[a] = int32(end)
		before = append(before, batch{a, last})
	}
	for _, a := range open {
		addBefore(a, true)
	}
	for a := range doneBefore {
		addBefore(a, false)
	}
	for a := range late {
		if a < from {
			addBefore(a, false)
		}
	}
	slices.SortFunc(before, func(x, y batch) int { return x.at - y.at })
	// Each batch covers the cuts from just after it to its last answer
	// (rule 1): for one never answered, to the next prompt, or to the end.
	// They go in the queue in order of their start, after those before.
	queue := make([]batch, len(before)+batches)
	copy(queue, before)
	q := len(queue)
	next := from + n // the next prompt after i
	for i := n - 1; i >= 0; i-- {
		j := from + i
		k := b.kinds[i]
		switch {
		case k&factCalls != 0 && b.end[i] > 0:
			q--
			queue[q] = batch{j, int(b.end[i]) - 1}
		case k&factCalls != 0:
			q--
			queue[q] = batch{j, max(next, late[j])}
			b.end[i] = -1
		case k&factAssistant != 0:
			b.end[i] = int32(j + 1)
		}
		if k&factPrompt != 0 {
			next = j
		}
	}
	// The cut K is unsafe when a batch covers it; it is the earliest such
	// batch that SnapDown goes back before. Batches come in order of their
	// start, so the earliest live one is at the front of the queue.
	head, in := 0, len(before)
	for k := from; k <= from+n; k++ {
		if in < len(queue) && queue[in].at == k-1 {
			in++
		}
		for head < in && queue[head].last < k {
			head++
		}
		b.unsafe[k-from] = -1
		if head < in {
			b.unsafe[k-from] = int32(queue[head].at)
		}
	}
	return b, nil
}

// HasPrompt reports whether a message of f was typed by a person.
func HasPrompt(f Facts) (bool, error) {
	r := newFactReader([]Facts{f})
	var refs []uint64
	for {
		kind, rs, ok := r.next(refs)
		refs = rs
		if !ok {
			return false, r.err
		}
		if kind&factPrompt != 0 {
			return true, nil
		}
	}
}
