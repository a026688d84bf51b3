package model

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func user(s string) Message { return Message{Role: User, Parts: []Part{{Kind: Text, Text: s}}} }
func say(s string) Message  { return Message{Role: Assistant, Parts: []Part{{Kind: Text, Text: s}}} }
func calls(ids ...string) Message {
	m := Message{Role: Assistant}
	for _, id := range ids {
		m.Parts = append(m.Parts, Part{Kind: ToolCall, ToolCallID: id, ToolName: "bash", ToolInput: `{}`})
	}
	return m
}
func result(id string) Message {
	return Message{Role: Tool, Parts: []Part{{Kind: ToolResult, ToolCallID: id, Text: "out"}}}
}

// carrier is a user message holding tool results, the way Claude Code sends them.
func carrier(ids ...string) Message {
	m := Message{Role: User}
	for _, id := range ids {
		m.Parts = append(m.Parts, Part{Kind: ToolResult, ToolCallID: id, Text: "out"})
	}
	return m
}

// seedExample is the seed's transcript: user, assistant(tc1,tc2,tc3), three results, reply.
func seedExample() []Message {
	return []Message{user("q"), calls("tc1", "tc2", "tc3"), result("tc1"), result("tc2"), result("tc3"), say("done")}
}

func TestSnapDownSeedExample(t *testing.T) {
	b := NewBoundaries(seedExample())
	want := map[int]int{1: 1, 2: 1, 3: 1, 4: 1, 5: 5, 6: 6}
	for asked, k := range want {
		got, reason := b.SnapDown(asked)
		assert.Equal(t, k, got, "asked %d", asked)
		assert.Equal(t, asked != k, reason != "", "reason for %d: %q", asked, reason)
	}
	_, reason := b.SnapDown(2)
	assert.Equal(t, "would orphan tool calls", reason)
	_, reason = b.SnapDown(3)
	assert.Equal(t, "mid tool batch", reason)
	assert.Equal(t, []int{1, 5, 6}, b.Checkpoints())
}

func TestCheckpoints(t *testing.T) {
	tests := []struct {
		name string
		msgs []Message
		want []int
	}{
		{"plain chat", []Message{user("a"), say("b"), user("c"), say("d")}, []int{1, 2, 3, 4}},
		{"seed example", seedExample(), []int{1, 5, 6}},
		{"parallel calls answered in separate messages, out of order",
			[]Message{user("q"), calls("a", "b"), result("b"), result("a"), say("ok")}, []int{1, 4, 5}},
		{"results in one carrier message",
			[]Message{user("q"), calls("a", "b"), carrier("a", "b"), say("ok")}, []int{1, 3, 4}},
		{"two batches in a row",
			[]Message{user("q"), calls("a"), result("a"), calls("b"), result("b"), say("ok")}, []int{1, 3, 5, 6}},
		{"calls never answered at the end",
			[]Message{user("q"), say("x"), calls("a", "b"), result("a")}, []int{1, 2}},
		{"a call never answered (abandoned), then the chat goes on: the next prompt closes it",
			[]Message{user("q"), calls("a"), user("stop"), say("ok")}, []int{1, 3, 4}},
		{"an abandoned call stays open past notes and carriers, up to the next prompt",
			[]Message{user("q"), calls("a", "b"), result("a"), {Role: System, Parts: []Part{{Kind: Text, Text: "turn aborted"}}}, carrier("x"), user("go on"), calls("c"), result("c")},
			[]int{1, 6, 8}},
		{"an unanswered call with no prompt after it stays open to the end",
			[]Message{user("q"), calls("a"), {Role: System, Parts: []Part{{Kind: Text, Text: "turn aborted"}}}, say("x")}, []int{1}},
		{"user message in the middle of a batch",
			[]Message{user("q"), calls("a", "b"), result("a"), user("hurry"), result("b"), say("ok")}, []int{1, 5, 6}},
		{"empty", nil, []int{}},
		{"system first", []Message{{Role: System, Parts: []Part{{Kind: Text, Text: "sys"}}}, user("q"), say("a")}, []int{1, 2, 3}},
		{"a reused call id answers only the later call",
			[]Message{user("q"), calls("a"), result("a"), calls("a"), say("x")}, []int{1, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Checkpoints(tt.msgs))
		})
	}
}

func TestAbandonedCallReason(t *testing.T) {
	// Rule 1: cuts between an abandoned call and the next prompt still say
	// why they are unsafe; the step never finished.
	msgs := []Message{user("q"), calls("a"), user("stop"), say("ok")}
	b := NewBoundaries(msgs)
	k, reason := b.SnapDown(2)
	assert.Equal(t, 1, k)
	assert.Equal(t, "tool calls never answered", reason)
	assert.Equal(t, "", b.Reason(3))
	assert.Equal(t, -1, Steps(msgs)[0].End)
	cut, err := Resolve(msgs, "last_user")
	require.NoError(t, err)
	assert.Equal(t, Cut{Asked: "last_user", K: 3}, cut)
}

func TestSnapDownNestedBatches(t *testing.T) {
	// A user message sits inside batch a, and batch b starts before a ends.
	msgs := []Message{user("q"), calls("a"), user("hm"), calls("b"), result("a"), result("b"), say("ok")}
	b := NewBoundaries(msgs)
	for k := 2; k <= 5; k++ {
		got, reason := b.SnapDown(k)
		assert.Equal(t, 1, got, "asked %d", k)
		assert.NotEmpty(t, reason)
	}
	got, _ := b.SnapDown(6)
	assert.Equal(t, 6, got)
	got, _ = b.SnapDown(99)
	assert.Equal(t, 7, got, "past the end clamps to the end")
}

func TestSteps(t *testing.T) {
	msgs := []Message{user("q"), calls("a", "b"), result("a"), result("b"), calls("c"), result("c"), say("done"), user("more"), calls("d")}
	steps := Steps(msgs)
	require.Len(t, steps, 4)
	assert.Equal(t, Step{N: 1, Assistant: 1, End: 4}, steps[0])
	assert.Equal(t, Step{N: 2, Assistant: 4, End: 6}, steps[1])
	assert.Equal(t, Step{N: 3, Assistant: 6, End: 7}, steps[2])
	assert.Equal(t, Step{N: 4, Assistant: 8, End: -1}, steps[3])
}

func TestResolve(t *testing.T) {
	msgs := []Message{user("q"), calls("a"), result("a"), say("done"), user("again"), calls("b"), carrier("b"), say("fin")}
	tests := []struct {
		at     ContinueFrom
		k      int
		reason string
		step   int
		err    string
	}{
		{at: "end", k: 8},
		{at: "", k: 8},
		{at: "last_user", k: 5},
		{at: "3", k: 3},
		{at: "2", k: 1, reason: "would orphan tool calls"},
		{at: "6", k: 5, reason: "would orphan tool calls"},
		{at: "step:1", k: 3, step: 1},
		{at: "step:2", k: 4, step: 2},
		{at: "step:3", k: 7, step: 3},
		{at: "step:9", err: "step 9 does not exist"},
		{at: "0", err: "nothing to fork"},
		{at: "99", err: "past the end"},
		{at: "-1", err: "bad --at"},
		{at: "step:x", err: "bad --at"},
		{at: "middle", err: "bad --at"},
	}
	for _, tt := range tests {
		t.Run(string(tt.at), func(t *testing.T) {
			cut, err := Resolve(msgs, tt.at)
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.k, cut.K)
			assert.Equal(t, tt.reason, cut.Reason)
			assert.Equal(t, tt.step, cut.Step)
		})
	}
}

func TestResolveRefusesEmptyPrefix(t *testing.T) {
	_, err := Resolve(nil, "end")
	assert.ErrorIs(t, err, ErrEmptyPrefix)
	// Everything is one unanswered batch: the end snaps to 0.
	_, err = Resolve([]Message{calls("a")}, "end")
	assert.ErrorIs(t, err, ErrEmptyPrefix)
	assert.Contains(t, err.Error(), "snapped to 0")
	// Only tool-result carriers: no person typed anything.
	_, err = Resolve([]Message{calls("a"), carrier("a")}, "last_user")
	assert.ErrorContains(t, err, "no message typed by a person")
}

func TestCutDescribe(t *testing.T) {
	assert.Equal(t, "K=5", Cut{Asked: "5", K: 5}.Describe())
	assert.Equal(t, "asked 3, snapped to 1: mid tool batch", Cut{Asked: "3", K: 1, Reason: "mid tool batch"}.Describe())
}

func TestIsPrompt(t *testing.T) {
	assert.True(t, user("hi").IsPrompt())
	assert.False(t, carrier("a").IsPrompt())
	assert.False(t, say("hi").IsPrompt())
	assert.False(t, Message{Role: User}.IsPrompt())
}

func TestPairCalls(t *testing.T) {
	msgs := []Message{user("q"), result("ghost"), calls("a", "b"), result("a")}
	got := PairCalls(msgs, "not run")
	require.Len(t, got, 5)
	assert.Empty(t, got[1].Parts, "a result without its call is dropped")
	assert.Equal(t, Tool, got[3].Role, "the stand-in result follows the call")
	assert.Equal(t, "b", got[3].Parts[0].ToolCallID)
	assert.True(t, got[3].Parts[0].IsError)
	assert.Equal(t, "not run", got[3].Parts[0].Text)
	assert.Equal(t, []int{1, 2, 5}, Checkpoints(got), "every batch is closed")
	assert.Len(t, msgs[1].Parts, 1, "the input is not changed")
}
