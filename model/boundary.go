package model

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ErrEmptyPrefix refuses a fork that would keep nothing (rule 3).
var ErrEmptyPrefix = errors.New("nothing to fork: the prefix would be empty; open a new run instead")

// Boundaries says, for every boundary K of a transcript (or of its
// messages from some point on: BoundariesOf), whether cutting there is
// pair-safe and, when it is not, why; and where its steps are. It is
// worked out once per transcript, from the messages (NewBoundaries) or
// from their stored facts (cuts.go), and answers every question about
// cuts.
type Boundaries struct {
	// from is the first message answered for (0: the whole transcript).
	from int
	// kinds[i-from] are message i's fact bits (factAssistant, ...).
	kinds []uint8
	// unsafe[K-from] is the index of the assistant message whose tool
	// batch K would split, or -1 when K is safe.
	unsafe []int32
	// end[i-from], for an assistant message at i, is the boundary right
	// after its last tool result (i+1 without calls), or -1 when a call is
	// never answered; before holds it for the batches before from that
	// reach into the messages answered for.
	end    []int32
	before map[int]int32
}

// NewBoundaries finds the tool batches of msgs and the cuts they forbid.
// For an assistant message at index i whose calls' last result is at index
// e, every K with i+1 <= K <= e would split it (rule 1). A call that is
// never answered was abandoned (an interruption, an aborted turn): the next
// message a person typed, at index p, closes it, so every K with
// i+1 <= K <= p is unsafe and the cuts after p are safe again; with no
// prompt after it, every K > i is unsafe (the call may still be running).
func NewBoundaries(msgs []Message) Boundaries {
	b, err := BoundariesOf(0, nil, []Facts{{B: FactsOf(msgs), N: len(msgs)}})
	if err != nil {
		panic(err) // facts made here always read back
	}
	return b
}

// Len is the length of the transcript the boundaries were worked out for.
func (b Boundaries) Len() int { return b.from + len(b.kinds) }

// From is the first message the boundaries answer for: 0, or where the
// run they were worked out for forked (its inherited cuts are not known).
func (b Boundaries) From() int { return b.from }

func (b Boundaries) kind(i int) uint8 {
	if i < b.from || i >= b.Len() {
		return 0
	}
	return b.kinds[i-b.from]
}

// IsPrompt reports whether message i was typed by a person.
func (b Boundaries) IsPrompt(i int) bool { return b.kind(i)&factPrompt != 0 }

// IsAssistant reports whether message i is the model's (a step).
func (b Boundaries) IsAssistant(i int) bool { return b.kind(i)&factAssistant != 0 }

// Role is message i's role as far as cuts know it: the model's, a tool's,
// or else a user's (a system message says user too).
func (b Boundaries) Role(i int) Role {
	switch k := b.kind(i); {
	case k&factAssistant != 0:
		return Assistant
	case k&factTool != 0:
		return Tool
	}
	return User
}

// MadeCalls reports whether message i is the model's and made tool calls.
func (b Boundaries) MadeCalls(i int) bool { return b.kind(i)&factCalls != 0 }

// offender is the batch K splits, -1 when none (or K is not known).
func (b Boundaries) offender(k int) int {
	if k < b.from || k > b.Len() {
		return -1
	}
	return int(b.unsafe[k-b.from])
}

// Safe reports whether K is a pair-safe cut.
func (b Boundaries) Safe(k int) bool {
	return k >= b.from && k <= b.Len() && b.unsafe[k-b.from] < 0
}

// endOf is the end of the step at i (Step.End).
func (b Boundaries) endOf(i int) int {
	if i >= b.from && i < b.Len() {
		return int(b.end[i-b.from])
	}
	if e, ok := b.before[i]; ok {
		return int(e)
	}
	return -1
}

// Reason says why K is unsafe, "" when it is safe.
func (b Boundaries) Reason(k int) string {
	i := b.offender(k)
	switch {
	case i < 0:
		return ""
	case b.endOf(i) < 0:
		return "tool calls never answered"
	case k == i+1:
		return "would orphan tool calls"
	default:
		return "mid tool batch"
	}
}

// SnapDown returns the largest pair-safe boundary at or below K and, when it
// had to move, the reason in words ("mid tool batch").
func (b Boundaries) SnapDown(k int) (int, string) {
	k = min(max(k, b.from), b.Len())
	reason := b.Reason(k)
	for !b.Safe(k) && k > b.from {
		k = b.offender(k) // the boundary just before the offending assistant message
	}
	return k, reason
}

// Checkpoints lists every pair-safe boundary that keeps at least one message.
func (b Boundaries) Checkpoints() []int {
	n := 0
	for k := max(1, b.from); k <= b.Len(); k++ {
		if b.unsafe[k-b.from] < 0 {
			n++
		}
	}
	cps := make([]int, 0, n)
	for k := max(1, b.from); k <= b.Len(); k++ {
		if b.unsafe[k-b.from] < 0 {
			cps = append(cps, k)
		}
	}
	return cps
}

// Checkpoints lists the pair-safe boundaries of msgs (K >= 1).
func Checkpoints(msgs []Message) []int { return NewBoundaries(msgs).Checkpoints() }

// EndsOnOpenCalls reports whether the messages end with tool calls some of
// which no result after them answers (tool messages may follow them).
func (b Boundaries) EndsOnOpenCalls() bool {
	for i := b.Len() - 1; i >= b.from; i-- {
		k := b.kind(i)
		switch {
		case k&factCalls != 0:
			return b.endOf(i) < 0
		case k&factTool == 0:
			return false
		}
	}
	return false
}

// Step is one model call and the tool calls it made, with their results.
type Step struct {
	N         int // 1-based
	Assistant int // index of the assistant message
	// End is the boundary after the step's last tool result (after the
	// assistant message when it made no calls); -1 when a call was never answered.
	End int
}

// Steps lists the steps of msgs in order.
func Steps(msgs []Message) []Step { return NewBoundaries(msgs).Steps() }

// Steps lists the steps of the messages the boundaries answer for, in
// order (numbered from the first of them).
func (b Boundaries) Steps() []Step {
	var steps []Step
	for i := b.from; i < b.Len(); i++ {
		if b.IsAssistant(i) {
			steps = append(steps, Step{N: len(steps) + 1, Assistant: i, End: b.endOf(i)})
		}
	}
	return steps
}

// step is step n (1-based), and the number of steps when there is none.
func (b Boundaries) step(n int) (Step, int) {
	seen := 0
	for i := b.from; i < b.Len(); i++ {
		if b.IsAssistant(i) {
			if seen++; seen == n {
				return Step{N: n, Assistant: i, End: b.endOf(i)}, seen
			}
		}
	}
	return Step{}, seen
}

// StepAt is the first step message i is in: one that starts at or
// before it and has not ended before it (one never answered has not
// ended); ok false when there is none.
func (b Boundaries) StepAt(i int) (Step, bool) {
	n := 0
	for j := b.from; j <= i && j < b.Len(); j++ {
		if b.IsAssistant(j) {
			n++
			if e := b.endOf(j); e < 0 || i < e {
				return Step{N: n, Assistant: j, End: e}, true
			}
		}
	}
	return Step{}, false
}

// ContinueFrom is where a fork continues: "end", "last_user", an integer K
// or "step:N" (rule 2).
type ContinueFrom string

// Cut is a resolved boundary: what was asked, the K kept, and why they differ.
type Cut struct {
	Asked  string
	K      int
	Step   int    // the step cut after, for step:N
	Reason string // "" when K is what was asked
}

// Describe says the cut in words: "K=5" or "asked 3, snapped to 1: mid tool batch".
func (c Cut) Describe() string {
	if c.Reason == "" {
		return fmt.Sprintf("K=%d", c.K)
	}
	return fmt.Sprintf("asked %s, snapped to %d: %s", c.Asked, c.K, c.Reason)
}

// ParseContinueFrom checks the spelling of a continue_from value.
func ParseContinueFrom(s string) (ContinueFrom, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "" || s == "end":
		return "end", nil
	case s == "last_user":
		return "last_user", nil
	case strings.HasPrefix(s, "step:"):
		n, err := strconv.Atoi(strings.TrimPrefix(s, "step:"))
		if err != nil || n < 1 {
			return "", fmt.Errorf("bad --at %q: step:N needs N >= 1", s)
		}
		return ContinueFrom(s), nil
	default:
		k, err := strconv.Atoi(s)
		if err != nil || k < 0 {
			return "", fmt.Errorf("bad --at %q: want end, last_user, a boundary K >= 0, or step:N", s)
		}
		return ContinueFrom(s), nil
	}
}

// Resolve turns a continue_from into a pair-safe cut of msgs. It refuses an
// empty prefix (rule 3) and a step or user message that does not exist.
func Resolve(msgs []Message, at ContinueFrom) (Cut, error) { return NewBoundaries(msgs).Resolve(at) }

// Resolve turns a continue_from into a pair-safe cut of the transcript
// the boundaries were worked out for (a whole one: From 0).
func (b Boundaries) Resolve(at ContinueFrom) (Cut, error) {
	at, err := ParseContinueFrom(string(at))
	if err != nil {
		return Cut{}, err
	}
	cut := Cut{Asked: string(at)}
	want := 0
	switch {
	case at == "end":
		want = b.Len()
	case at == "last_user":
		want = -1
		for i := b.Len() - 1; i >= b.from; i-- {
			if b.IsPrompt(i) {
				want = i + 1
				break
			}
		}
		if want < 0 {
			return cut, errors.New("no message typed by a person to continue from")
		}
	case strings.HasPrefix(string(at), "step:"):
		n, _ := strconv.Atoi(strings.TrimPrefix(string(at), "step:"))
		s, steps := b.step(n)
		if s.N == 0 {
			return cut, fmt.Errorf("step %d does not exist: the run has %d steps", n, steps)
		}
		cut.Step = n
		if s.End < 0 {
			want = s.Assistant + 1 // snaps down below the unanswered batch
		} else {
			want = s.End
		}
	default:
		want, _ = strconv.Atoi(string(at))
		if want > b.Len() {
			return cut, fmt.Errorf("boundary %d is past the end: the run has %d messages", want, b.Len())
		}
	}
	cut.K, cut.Reason = b.SnapDown(want)
	if cut.Reason != "" {
		cut.Step = 0
	}
	if cut.K == 0 {
		if cut.Reason != "" {
			return cut, fmt.Errorf("%w (asked %s, snapped to 0: %s)", ErrEmptyPrefix, cut.Asked, cut.Reason)
		}
		return cut, ErrEmptyPrefix
	}
	return cut, nil
}

// PairCalls makes msgs fit to send to a model API, which wants every tool
// call answered and every result to answer a call: a call with no result
// gets an error result saying note (a turn that ended with calls nobody
// ran), and a result whose call is not in msgs is dropped.
func PairCalls(msgs []Message, note string) []Message {
	calls, answered := map[string]bool{}, map[string]bool{}
	for _, m := range msgs {
		for _, p := range m.Parts {
			switch p.Kind {
			case ToolCall:
				calls[p.ToolCallID] = true
			case ToolResult:
				answered[p.ToolCallID] = true
			}
		}
	}
	orphan := func(p Part) bool { return p.Kind == ToolResult && !calls[p.ToolCallID] }
	out := make([]Message, 0, len(msgs))
	for _, m := range msgs {
		if slices.ContainsFunc(m.Parts, orphan) {
			m.Parts = slices.DeleteFunc(slices.Clone(m.Parts), orphan)
		}
		out = append(out, m)
		if m.Role != Assistant {
			continue
		}
		var missing []Part
		for _, c := range m.ToolCalls() {
			if !answered[c.ToolCallID] {
				missing = append(missing, Part{Kind: ToolResult, ToolCallID: c.ToolCallID, ToolName: c.ToolName, Text: note, IsError: true})
			}
		}
		if missing != nil {
			out = append(out, Message{Role: Tool, Parts: missing})
		}
	}
	return out
}
