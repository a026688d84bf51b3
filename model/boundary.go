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

// Boundaries says, for every boundary K in 0..len(msgs), whether cutting
// there is pair-safe and, when it is not, why. It is computed once per
// transcript and answers every question about cuts.
type Boundaries struct {
	// unsafe[K] is the index of the assistant message whose tool batch K
	// would split, or -1 when K is safe.
	unsafe []int
	// end[i], for an assistant message at i, is the boundary right after its
	// last tool result (i+1 without calls), or -1 when a call is never answered.
	end []int
}

// NewBoundaries finds the tool batches of msgs and the cuts they forbid.
// For an assistant message at index i whose calls' last result is at index
// e, every K with i+1 <= K <= e would split it (rule 1). A call that is
// never answered was abandoned (an interruption, an aborted turn): the next
// message a person typed, at index p, closes it, so every K with
// i+1 <= K <= p is unsafe and the cuts after p are safe again; with no
// prompt after it, every K > i is unsafe (the call may still be running).
func NewBoundaries(msgs []Message) Boundaries {
	b := Boundaries{unsafe: make([]int, len(msgs)+1), end: make([]int, len(msgs))}
	for k := range b.unsafe {
		b.unsafe[k] = -1
	}
	// Where each call id is answered; a later answer to a reused id does not
	// answer an earlier call, so remember every position.
	results := map[string][]int{}
	for j, m := range msgs {
		for _, p := range m.Parts {
			if p.Kind == ToolResult && p.ToolCallID != "" {
				results[p.ToolCallID] = append(results[p.ToolCallID], j)
			}
		}
	}
	// nextPrompt[i] is the index of the first message a person typed at
	// or after i, len(msgs) when there is none.
	nextPrompt := make([]int, len(msgs)+1)
	nextPrompt[len(msgs)] = len(msgs)
	for j := len(msgs) - 1; j >= 0; j-- {
		nextPrompt[j] = nextPrompt[j+1]
		if msgs[j].IsPrompt() {
			nextPrompt[j] = j
		}
	}
	for i, m := range msgs {
		if m.Role != Assistant {
			continue
		}
		calls := m.ToolCalls()
		b.end[i] = i + 1
		if len(calls) == 0 {
			continue
		}
		last, all := i, true
		for _, c := range calls {
			at := firstAfter(results[c.ToolCallID], i)
			if at < 0 {
				all = false
				continue
			}
			last = max(last, at)
		}
		end := last // unsafe K runs i+1..end inclusive
		b.end[i] = last + 1
		if !all {
			// Abandoned: closed by the next prompt, the cut right after
			// it being the first safe one again.
			end = max(last, nextPrompt[i+1])
			b.end[i] = -1
		}
		for k := i + 1; k <= end; k++ {
			if b.unsafe[k] < 0 {
				b.unsafe[k] = i
			}
		}
	}
	return b
}

func firstAfter(positions []int, i int) int {
	for _, p := range positions {
		if p > i {
			return p
		}
	}
	return -1
}

// Len is the number of messages the boundaries were computed for.
func (b Boundaries) Len() int { return len(b.unsafe) - 1 }

// Safe reports whether K is a pair-safe cut.
func (b Boundaries) Safe(k int) bool {
	return k >= 0 && k < len(b.unsafe) && b.unsafe[k] < 0
}

// Reason says why K is unsafe, "" when it is safe.
func (b Boundaries) Reason(k int) string {
	if k < 0 || k >= len(b.unsafe) || b.unsafe[k] < 0 {
		return ""
	}
	i := b.unsafe[k]
	switch {
	case b.end[i] < 0:
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
	k = min(max(k, 0), b.Len())
	reason := b.Reason(k)
	for !b.Safe(k) {
		k = b.unsafe[k] // the boundary just before the offending assistant message
	}
	return k, reason
}

// Checkpoints lists every pair-safe boundary that keeps at least one message.
func (b Boundaries) Checkpoints() []int {
	cps := []int{}
	for k := 1; k <= b.Len(); k++ {
		if b.Safe(k) {
			cps = append(cps, k)
		}
	}
	return cps
}

// Checkpoints lists the pair-safe boundaries of msgs (K >= 1).
func Checkpoints(msgs []Message) []int { return NewBoundaries(msgs).Checkpoints() }

// Step is one model call and the tool calls it made, with their results.
type Step struct {
	N         int // 1-based
	Assistant int // index of the assistant message
	// End is the boundary after the step's last tool result (after the
	// assistant message when it made no calls); -1 when a call was never answered.
	End int
}

// Steps lists the steps of msgs in order.
func Steps(msgs []Message) []Step {
	b := NewBoundaries(msgs)
	var steps []Step
	for i, m := range msgs {
		if m.Role != Assistant {
			continue
		}
		steps = append(steps, Step{N: len(steps) + 1, Assistant: i, End: b.end[i]})
	}
	return steps
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
func Resolve(msgs []Message, at ContinueFrom) (Cut, error) {
	at, err := ParseContinueFrom(string(at))
	if err != nil {
		return Cut{}, err
	}
	b := NewBoundaries(msgs)
	cut := Cut{Asked: string(at)}
	want := 0
	switch {
	case at == "end":
		want = len(msgs)
	case at == "last_user":
		want = -1
		for i := len(msgs) - 1; i >= 0; i-- {
			if msgs[i].IsPrompt() {
				want = i + 1
				break
			}
		}
		if want < 0 {
			return cut, errors.New("no message typed by a person to continue from")
		}
	case strings.HasPrefix(string(at), "step:"):
		n, _ := strconv.Atoi(strings.TrimPrefix(string(at), "step:"))
		steps := Steps(msgs)
		if n > len(steps) {
			return cut, fmt.Errorf("step %d does not exist: the run has %d steps", n, len(steps))
		}
		s := steps[n-1]
		cut.Step = n
		if s.End < 0 {
			want = s.Assistant + 1 // snaps down below the unanswered batch
		} else {
			want = s.End
		}
	default:
		want, _ = strconv.Atoi(string(at))
		if want > len(msgs) {
			return cut, fmt.Errorf("boundary %d is past the end: the run has %d messages", want, len(msgs))
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
