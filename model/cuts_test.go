package model

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// oracle is rule 1 worked out the way tine did before cuts had facts,
// straight from the whole transcript: the unsafe batch of every K, and
// the end of every assistant message's step.
func oracle(msgs []Message) (unsafe, end []int) {
	unsafe, end = make([]int, len(msgs)+1), make([]int, len(msgs))
	for k := range unsafe {
		unsafe[k] = -1
	}
	results := map[string][]int{}
	for j, m := range msgs {
		for _, p := range m.Parts {
			if p.Kind == ToolResult && p.ToolCallID != "" {
				results[p.ToolCallID] = append(results[p.ToolCallID], j)
			}
		}
	}
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
		end[i] = i + 1
		if len(calls) == 0 {
			continue
		}
		last, all := i, true
		for _, c := range calls {
			at := -1
			for _, p := range results[c.ToolCallID] {
				if p > i {
					at = p
					break
				}
			}
			if at < 0 {
				all = false
				continue
			}
			last = max(last, at)
		}
		e := last
		end[i] = last + 1
		if !all {
			e = max(last, nextPrompt[i+1])
			end[i] = -1
		}
		for k := i + 1; k <= e; k++ {
			if unsafe[k] < 0 {
				unsafe[k] = i
			}
		}
	}
	return unsafe, end
}

func oracleReason(unsafe, end []int, k int) string {
	i := unsafe[k]
	switch {
	case i < 0:
		return ""
	case end[i] < 0:
		return "tool calls never answered"
	case k == i+1:
		return "would orphan tool calls"
	}
	return "mid tool batch"
}

// randomTranscript mixes prompts, batches (parallel calls, reused ids,
// calls never answered), results in tool messages and in carriers, late
// results after a prompt, notes and plain answers.
func randomTranscript(r *rand.Rand, n int) []Message {
	ids := []string{"a", "b", "c", "d", "e", ""}
	var msgs []Message
	for len(msgs) < n {
		switch r.IntN(9) {
		case 0, 1:
			msgs = append(msgs, user(fmt.Sprint("q", len(msgs))))
		case 2, 3:
			var cs []string
			for range 1 + r.IntN(3) {
				cs = append(cs, ids[r.IntN(len(ids))])
			}
			msgs = append(msgs, calls(cs...))
		case 4, 5:
			msgs = append(msgs, result(ids[r.IntN(len(ids))]))
		case 6:
			msgs = append(msgs, carrier(ids[r.IntN(len(ids))], ids[r.IntN(len(ids))]))
		case 7:
			msgs = append(msgs, say("ok"))
		case 8:
			m := calls(ids[r.IntN(len(ids))])
			m.Parts = append(m.Parts, Part{Kind: ToolResult, ToolCallID: ids[r.IntN(len(ids))]}) // a result in the calling message
			msgs = append(msgs, m, Message{Role: System, Parts: []Part{{Kind: Text, Text: "note"}}})
		}
	}
	return msgs[:n]
}

// TestFactsAgreeWithTheRule: the boundaries worked out from facts are
// rule 1 as the whole transcript says it, for every cut, reason and step,
// for the whole transcript and for its messages from any point on (a
// fork's own, given the batches open there).
func TestFactsAgreeWithTheRule(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 3000 {
		msgs := randomTranscript(r, 1+r.IntN(30))
		unsafe, end := oracle(msgs)
		b := NewBoundaries(msgs)
		require.Equal(t, len(msgs), b.Len())
		for k := 0; k <= len(msgs); k++ {
			require.Equal(t, unsafe[k] < 0, b.Safe(k), "round %d K=%d %v", round, k, msgs)
			require.Equal(t, oracleReason(unsafe, end, k), b.Reason(k), "round %d K=%d", round, k)
		}
		for i, m := range msgs {
			if m.Role == Assistant {
				require.Equal(t, end[i], b.endOf(i), "round %d step at %d", round, i)
			}
		}
		// From the middle: the facts of messages from.., and what is open there.
		from := r.IntN(len(msgs) + 1)
		s := NewCutState(0)
		var facts []byte
		for _, m := range msgs[:from] {
			facts, _ = s.Feed(m, facts)
		}
		open := s.Open()
		mark := len(facts)
		for _, m := range msgs[from:] {
			facts, _ = s.Feed(m, facts)
		}
		seg, err := BoundariesOf(from, open, []Facts{{B: facts[mark:], N: len(msgs) - from}})
		require.NoError(t, err)
		for k := from; k <= len(msgs); k++ {
			require.Equal(t, unsafe[k] < 0, seg.Safe(k), "round %d from %d K=%d", round, from, k)
			require.Equal(t, oracleReason(unsafe, end, k), seg.Reason(k), "round %d from %d K=%d", round, from, k)
		}
		// OpenAt says what is open at any point from the facts alone.
		at := r.IntN(len(msgs) + 1)
		var head []byte
		s2 := NewCutState(0)
		for _, m := range msgs[:at] {
			head, _ = s2.Feed(m, head)
		}
		got, err := OpenAt(0, nil, []Facts{{B: head, N: at}})
		require.NoError(t, err)
		require.Equal(t, s2.Open(), got, "round %d open at %d", round, at)
		n, err := CountFacts(head)
		require.NoError(t, err)
		require.Equal(t, at, n)
	}
}

// TestCutStateGoesOn: a state rebuilt in the middle (the messages since
// the first open batch fed again, the calls a prompt left unanswered told)
// says the same facts from there as one that read everything.
func TestCutStateGoesOn(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for round := range 2000 {
		msgs := randomTranscript(r, 2+r.IntN(30))
		at := r.IntN(len(msgs))
		whole := NewCutState(0)
		var abandoned []CallEvent
		for _, m := range msgs[:at] {
			_, evs := whole.Feed(m, nil)
			for _, e := range evs {
				if e.Answered {
					for i, x := range abandoned {
						if x.CallAt == e.CallAt && x.CallID == e.CallID {
							abandoned = append(abandoned[:i], abandoned[i+1:]...)
							break
						}
					}
				} else {
					abandoned = append(abandoned, e)
				}
			}
		}
		first := at
		if open := whole.Open(); len(open) > 0 {
			first = open[0]
		}
		again := NewCutState(first)
		for _, m := range msgs[first:at] {
			again.Feed(m, nil)
		}
		for _, e := range abandoned {
			again.Abandoned(e.CallAt, e.CallID)
		}
		require.Equal(t, whole.Open(), again.Open(), "round %d", round)
		var a, b []byte
		for _, m := range msgs[at:] {
			a, _ = whole.Feed(m, a)
			b, _ = again.Feed(m, b)
		}
		require.Equal(t, a, b, "round %d at %d", round, at)
	}
}

func TestBadFacts(t *testing.T) {
	_, err := BoundariesOf(0, nil, []Facts{{B: []byte{0x80}, N: 1}})
	require.ErrorIs(t, err, ErrBadFacts)
	_, err = BoundariesOf(0, nil, []Facts{{B: []byte{1}, N: 2}})
	require.ErrorIs(t, err, ErrBadFacts)
	_, err = CountFacts([]byte{1 << factBits})
	require.ErrorIs(t, err, ErrBadFacts)
}

// BenchmarkBoundaries200k works out the cuts of a 200,000-message run
// from its facts, as tine checkpoints and a fork at K do.
func BenchmarkBoundaries200k(b *testing.B) {
	var msgs []Message
	for i := 0; len(msgs) < 200_000; i++ {
		msgs = append(msgs, user("q"), calls("toolu_1"), result("toolu_1"), say("done"))
	}
	facts := FactsOf(msgs)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := BoundariesOf(0, nil, []Facts{{B: facts, N: len(msgs)}}); err != nil {
			b.Fatal(err)
		}
	}
}
