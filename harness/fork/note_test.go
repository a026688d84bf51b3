package fork_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/harness/fork"
	"tine/model"
)

// TestNotesReachTheUIAsTheyHappen: a note a harness emits while its turn
// runs (the model API cannot be reached; a retry) is stored and reported
// to the UI then, not only found in the run's row after the turn.
func TestNotesReachTheUIAsTheyHappen(t *testing.T) {
	note := "claude cannot reach the model API at http://127.0.0.1:9; retry 1 of 10 in 0.6 s"
	f := &fake{name: "fake", caps: harness.Capabilities{Fork: true, ForkAtK: true}}
	f.turn = func(ctx context.Context, req harness.TurnRequest, emit func(harness.Event)) error {
		emit(harness.Event{Kind: harness.EventNote, Note: note})
		emit(harness.Event{Kind: harness.EventMessage, Message: model.Message{Role: model.Assistant, Parts: []model.Part{{Kind: model.Text, Text: "ok"}}}})
		return nil
	}
	st, d, root := setup(t, f)
	ctx := context.Background()
	forks, _, err := d.Fork(ctx, fork.ForkSpec{Parent: root.ID, At: "1"})
	require.NoError(t, err)
	var mu sync.Mutex
	var notes []string
	d.RunTurns(ctx, []fork.Turn{{RunID: forks[0].ID, Input: "go"}}, func(ev fork.RunEvent) {
		mu.Lock()
		defer mu.Unlock()
		if ev.Note != "" {
			notes = append(notes, ev.RunID+": "+ev.Note)
		}
	})
	assert.Equal(t, []string{forks[0].ID + ": " + note}, notes)
	r, err := st.Run(ctx, forks[0].ID)
	require.NoError(t, err)
	assert.Equal(t, note, r.Note)
}

// TestApplyAfterTheWorktreeWasRemoved: applying a fork whose worktree was
// removed (tine worktree rm keeps its branch and base) says so, not that
// it never ran.
func TestApplyAfterTheWorktreeWasRemoved(t *testing.T) {
	run := model.Run{ID: "f1", Name: "f", ParentID: "p", Status: model.Completed, Cwd: t.TempDir(), Branch: "main-fork-1", BaseCommit: "0123abcd"}
	_, err := fork.Apply(context.Background(), run, false)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "f's worktree was removed (tine worktree rm or prune)")
	assert.NotContains(t, err.Error(), "never ran")
}
