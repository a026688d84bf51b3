package store

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/model"
)

// A merge is recorded at the run's length, with its forks in order; the
// tree reads it back; a run mid-turn is refused, recording nothing, and
// so is a fork that is no run.
func TestMergesAreRecordedWhereTheTurnGoes(t *testing.T) {
	t.Parallel()
	s, _ := openTemp(t)
	ctx := context.Background()
	root := &model.Run{Harness: "script", Title: "root"}
	require.NoError(t, s.CreateRun(ctx, root, conversation(4, "r")))
	a := &model.Run{ParentID: root.ID, ForkAt: 4, Harness: "script", Name: "a"}
	b := &model.Run{ParentID: root.ID, ForkAt: 4, Harness: "script", Name: "b"}
	require.NoError(t, s.CreateForks(ctx, []*model.Run{a, b}))
	require.NoError(t, s.AppendMessages(ctx, a.ID, conversation(2, "a")))

	m, err := s.AddMerge(ctx, root.ID, []string{b.ID, a.ID})
	require.NoError(t, err)
	assert.Equal(t, 4, m.At, "the merge's prompt is the root's fifth message")
	m2, err := s.AddMerge(ctx, a.ID, []string{b.ID})
	require.NoError(t, err)
	assert.Equal(t, 6, m2.At, "a fork's length counts what it inherits")

	got, err := s.TreeMerges(ctx, root.TreeID)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, root.ID, got[0].RunID)
	assert.Equal(t, []string{b.ID, a.ID}, got[0].Forks, "the prompt's order")
	assert.Equal(t, []string{b.ID}, got[1].Forks)

	require.NoError(t, s.SetRunning(ctx, a.ID))
	_, err = s.AddMerge(ctx, a.ID, []string{b.ID})
	require.ErrorIs(t, err, ErrMidTurn)
	assert.Contains(t, err.Error(), "run a is in the middle of a turn")
	got, err = s.TreeMerges(ctx, root.TreeID)
	require.NoError(t, err)
	assert.Len(t, got, 2, "nothing recorded for the refused merge")

	_, err = s.AddMerge(ctx, root.ID, []string{"no-such-run"})
	require.Error(t, err, "a fork that is not a run")
	got, err = s.TreeMerges(ctx, root.TreeID)
	require.NoError(t, err)
	assert.Len(t, got, 2, "and its merge row went with it")
}
