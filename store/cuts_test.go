package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/model"
)

// shapeMsg makes the messages cuts care about: prompts, batches of calls
// (ids reused, some never answered), results in tool messages and in
// user carriers, answers.
func shapeMsg(r *rand.Rand, i int) model.Message {
	ids := []string{"a", "b", "c", ""}
	id := func() string { return ids[r.IntN(len(ids))] }
	switch r.IntN(8) {
	case 0, 1:
		return model.Message{Role: model.User, Parts: []model.Part{{Kind: model.Text, Text: fmt.Sprint("prompt ", i)}}}
	case 2, 3:
		m := model.Message{Role: model.Assistant}
		for range 1 + r.IntN(2) {
			m.Parts = append(m.Parts, model.Part{Kind: model.ToolCall, ToolCallID: id(), ToolName: "bash", ToolInput: "{}"})
		}
		return m
	case 4, 5:
		return model.Message{Role: model.Tool, Parts: []model.Part{{Kind: model.ToolResult, ToolCallID: id(), Text: "out"}}}
	case 6:
		return model.Message{Role: model.User, Parts: []model.Part{{Kind: model.ToolResult, ToolCallID: id()}, {Kind: model.ToolResult, ToolCallID: id()}}}
	}
	return model.Message{Role: model.Assistant, Parts: []model.Part{{Kind: model.Text, Text: "ok"}}}
}

func shapeMsgs(r *rand.Rand, n int) []model.Message {
	msgs := make([]model.Message, n)
	for i := range msgs {
		msgs[i] = shapeMsg(r, i)
	}
	return msgs
}

// requireSameCuts compares boundaries from the store with those worked
// out from the messages, for every cut from from on and every step.
func requireSameCuts(t *testing.T, want, got model.Boundaries, from int, what string) {
	t.Helper()
	require.Equal(t, want.Len(), got.Len(), what)
	for k := from; k <= want.Len(); k++ {
		require.Equal(t, want.Safe(k), got.Safe(k), "%s: K=%d", what, k)
		require.Equal(t, want.Reason(k), got.Reason(k), "%s: K=%d", what, k)
	}
	var steps []model.Step
	for _, s := range want.Steps() {
		if s.Assistant >= from {
			steps = append(steps, s)
		}
	}
	gs := got.Steps()
	require.Len(t, gs, len(steps), what)
	for i := range gs {
		require.Equal(t, steps[i].Assistant, gs[i].Assistant, what)
		require.Equal(t, steps[i].End, gs[i].End, what)
	}
}

// TestCutsAreStoredWithTheMessages: runs made whole, grown a few
// messages at a time, forked at any K (safe or not) and forked again say
// where they can be cut from the facts stored with their messages exactly
// as their transcripts do, whole (Boundaries) and from their fork point
// on (OwnBoundaries).
func TestCutsAreStoredWithTheMessages(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(7, 8))
	for round := range 12 {
		root := model.Run{Harness: "script", Title: fmt.Sprint("round ", round)}
		require.NoError(t, s.CreateRun(ctx, &root, shapeMsgs(r, 1+r.IntN(40))))
		runs := []model.Run{root}
		for range 8 {
			switch p := runs[r.IntN(len(runs))]; r.IntN(3) {
			case 0: // grow a run
				require.NoError(t, s.AppendMessages(ctx, p.ID, shapeMsgs(r, 1+r.IntN(6))))
			default: // fork it anywhere, with messages of its own or none yet
				p, err := s.Run(ctx, p.ID)
				require.NoError(t, err)
				f := model.Run{ParentID: p.ID, ForkAt: r.IntN(p.Len() + 1), Harness: "script"}
				require.NoError(t, s.CreateRun(ctx, &f, shapeMsgs(r, r.IntN(12))))
				runs = append(runs, f)
			}
		}
		ids := make([]string, len(runs))
		for i, run := range runs {
			ids[i] = run.ID
		}
		own, err := s.OwnBoundaries(ctx, ids)
		require.NoError(t, err)
		for _, run := range runs {
			run, err := s.Run(ctx, run.ID)
			require.NoError(t, err)
			msgs, _, err := s.Messages(ctx, run.ID)
			require.NoError(t, err)
			want := model.NewBoundaries(msgs)
			got, err := s.Boundaries(ctx, run.ID)
			require.NoError(t, err)
			what := fmt.Sprintf("round %d, run at %d of %d", round, run.ForkAt, run.Len())
			requireSameCuts(t, want, got, 0, what)
			requireSameCuts(t, want, own[run.ID], run.ForkAt, what+", own")
		}
	}
}

// TestCutsOfAnOlderDatabase: runs an older tine stored have no facts; the
// first read works them out, stores them and says the same.
func TestCutsOfAnOlderDatabase(t *testing.T) {
	ctx := context.Background()
	raw, path := openBefore(t, "_cuts.sql")
	r := rand.New(rand.NewPCG(9, 10))
	msgs := shapeMsgs(r, 300)
	fork := shapeMsgs(r, 20)
	for _, q := range []string{
		`INSERT INTO runs (id, tree_id, status, created_at, last_at, own_messages) VALUES ('root', 'root', 'completed', 0, 0, 300)`,
		`INSERT INTO runs (id, tree_id, parent_id, fork_at, status, created_at, last_at, own_messages) VALUES ('fork', 'root', 'root', 150, 'completed', 0, 0, 20)`,
	} {
		_, err := raw.ExecContext(ctx, q)
		require.NoError(t, err)
	}
	id := 0
	for _, run := range []struct {
		id    string
		from  int
		msgs  []model.Message
		count int
	}{{"root", 0, msgs, 300}, {"fork", 150, fork, 20}} {
		for i, m := range run.msgs {
			id++
			_, err := raw.ExecContext(ctx, `INSERT INTO messages (id, run_id, seq, role) VALUES (?, ?, ?, ?)`, id, run.id, run.from+i, string(m.Role))
			require.NoError(t, err)
			for j, p := range m.Parts {
				_, err := raw.ExecContext(ctx, `INSERT INTO parts (message_id, idx, kind, text, tool_call_id) VALUES (?, ?, ?, ?, ?)`, id, j, string(p.Kind), p.Text, p.ToolCallID)
				require.NoError(t, err)
			}
		}
	}
	require.NoError(t, raw.Close())
	s, err := Open(path)
	require.NoError(t, err)
	defer s.Close()
	cuts := func(id string) (has bool) {
		require.NoError(t, s.r.QueryRow(`SELECT cuts FROM runs WHERE id = ?`, id).Scan(&has))
		return has
	}
	assert.False(t, cuts("root"), "migrated without reading every message")
	got, err := s.Boundaries(ctx, "fork")
	require.NoError(t, err)
	requireSameCuts(t, model.NewBoundaries(append(msgs[:150:150], fork...)), got, 0, "fork")
	assert.True(t, cuts("root"))
	assert.True(t, cuts("fork"))
	// A run grown now goes on from the facts worked out.
	more := shapeMsgs(r, 30)
	require.NoError(t, s.AppendMessages(ctx, "root", more))
	got, err = s.Boundaries(ctx, "root")
	require.NoError(t, err)
	requireSameCuts(t, model.NewBoundaries(append(msgs, more...)), got, 0, "root grown")
}

// TestCutsFollowAForkMovedOntoItsParent: an import that finds a file is a
// fork of one stored before drops its copies and hangs it under the
// other's prefix, whose tool calls its own messages answer: its cuts
// follow the prefix it has now.
func TestCutsFollowAForkMovedOntoItsParent(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	call := model.Message{Role: model.Assistant, NativeID: "a0", Parts: []model.Part{{Kind: model.ToolCall, ToolCallID: "y", ToolName: "bash"}}}
	parent := []model.FileRun{{Parent: -1, Run: model.Run{Harness: "claude", NativeID: "S1"},
		Messages: []model.Message{nm(model.User, "u0", "q"), call}}}
	// The fork's copy of a0 is its text only: as a run of its own, the
	// result it holds answers nothing.
	child := []model.FileRun{{Parent: -1, Run: model.Run{Harness: "claude", NativeID: "S2"},
		Messages: []model.Message{nm(model.User, "u0", "q"), nm(model.Assistant, "a0", "calling"),
			{Role: model.Tool, NativeID: "r9", Parts: []model.Part{{Kind: model.ToolResult, ToolCallID: "y", Text: "out"}}},
			nm(model.Assistant, "a9", "done")},
		Link: &model.Link{Kind: model.LinkFork, Harness: "claude", ParentSession: "S1", AfterMessage: "a0", Inherited: 2}}}
	_, err := s.ImportFile(ctx, src("/c.jsonl"), child)
	require.NoError(t, err)
	_, err = s.ImportFile(ctx, src("/p.jsonl"), parent)
	require.NoError(t, err)
	runs, err := s.RunsBySource(ctx, "/c.jsonl")
	require.NoError(t, err)
	require.Len(t, runs, 1)
	fork := runs[0]
	require.Equal(t, 2, fork.ForkAt, "a fork now")
	msgs, _, err := s.Messages(ctx, fork.ID)
	require.NoError(t, err)
	want := model.NewBoundaries(msgs)
	require.False(t, want.Safe(2), "the call's result is the fork's own")
	require.True(t, want.Safe(3))
	got, err := s.Boundaries(ctx, fork.ID)
	require.NoError(t, err)
	requireSameCuts(t, want, got, 0, "moved fork")
	own, err := s.OwnBoundaries(ctx, []string{fork.ID})
	require.NoError(t, err)
	requireSameCuts(t, want, own[fork.ID], 2, "moved fork, own")
}

// BenchmarkCheckpoints200k reads where a 200,000-message run can be cut,
// as tine checkpoints does: its stored facts, not its messages.
func BenchmarkCheckpoints200k(b *testing.B) {
	s, _ := openTemp(b)
	ctx := context.Background()
	root := model.Run{Harness: "script"}
	require.NoError(b, s.CreateRun(ctx, &root, conversation(200_000, "big")))
	small := model.Run{Harness: "script"}
	require.NoError(b, s.CreateRun(ctx, &small, conversation(2_000, "small")))
	for _, run := range []model.Run{small, root} {
		b.Run(fmt.Sprint(run.OwnMessages), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				bs, err := s.Boundaries(ctx, run.ID)
				if err != nil {
					b.Fatal(err)
				}
				if cps := bs.Checkpoints(); len(cps) != run.OwnMessages*3/4 {
					b.Fatal(len(cps))
				}
			}
		})
	}
}
