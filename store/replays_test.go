package store

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/model"
)

// TestReplays: a replay's row is stored, updated and read back with its
// run; Rebase moves a fork without messages back, never one with some.
func TestReplays(t *testing.T) {
	t.Parallel()
	st, _ := openTemp(t)
	ctx := context.Background()
	r := model.Run{Harness: "claude"}
	require.NoError(t, st.CreateRun(ctx, &r, conversation(6, "t")))
	f := &model.Run{ParentID: r.ID, ForkAt: 5, Harness: "claude"}
	require.NoError(t, st.CreateForks(ctx, []*model.Run{f}))
	require.NoError(t, st.AddReplay(ctx, model.Replay{RunID: f.ID, Of: r.ID, Step: 2, Trial: 1, Continuations: 0,
		OnDivergence: "stop", Status: model.ReplayReplaying, TapeKind: "recorded", CreatedAt: time.Unix(5, 0)}))
	n, err := st.ReplaysOf(ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	aa := false
	require.NoError(t, st.UpdateReplay(ctx, f.ID, model.ReplayDiverged, 2, `{"step":3}`, &aa, "differs"))
	rs, err := st.Replays(ctx, []string{r.ID, f.ID})
	require.NoError(t, err)
	require.Len(t, rs, 1, "only replays have a row")
	got := rs[f.ID]
	assert.Equal(t, model.ReplayDiverged, got.Status)
	assert.Equal(t, 2, got.Replayed)
	assert.Equal(t, `{"step":3}`, got.Divergence)
	require.NotNil(t, got.AA)
	assert.False(t, *got.AA)
	assert.Equal(t, r.ID, got.Of)

	require.Error(t, st.Rebase(ctx, f.ID, 6), "never forward")
	require.NoError(t, st.Rebase(ctx, f.ID, 1))
	fr, err := st.Run(ctx, f.ID)
	require.NoError(t, err)
	assert.Equal(t, 1, fr.ForkAt)
	require.NoError(t, st.AppendMessages(ctx, f.ID, conversation(1, "own")))
	require.Error(t, st.Rebase(ctx, f.ID, 1), "a fork with messages of its own stays")

	req := "{}"
	require.NoError(t, st.AddTapeStep(ctx, r.ID, model.TapeStep{Step: 1, Request: &req, Response: "{}"}))
	tapes, err := st.LastTapeSteps(ctx, []string{r.ID, f.ID})
	require.NoError(t, err)
	assert.Equal(t, map[string]int{r.ID: 1}, tapes)
	// A gap (a step that was never stored): the next step goes after the
	// last one, not over it.
	require.NoError(t, st.AddTapeStep(ctx, r.ID, model.TapeStep{Step: 3, Request: &req, Response: "{}"}))
	tapes, err = st.LastTapeSteps(ctx, []string{r.ID})
	require.NoError(t, err)
	assert.Equal(t, 3, tapes[r.ID])
}
