package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/model"
)

// TestAARatesSumUpARunsReplays: the continuations of a run's replays whose
// A/A was measured are summed up as how many reproduced it, in ls and show
// (JSON and text); a replay not measured does not count.
func TestAARatesSumUpARunsReplays(t *testing.T) {
	t.Parallel()
	db, st, parent := openSeed(t)
	id, ctx := parent.ID, context.Background()
	yes, no := true, false
	for i, aa := range []*bool{&yes, &no, &yes, nil} {
		fk := &model.Run{ParentID: id, TreeID: parent.TreeID, ForkAt: 6, Harness: "script", Status: model.Completed}
		require.NoError(t, st.CreateForks(ctx, []*model.Run{fk}))
		require.NoError(t, st.AddReplay(ctx, model.Replay{RunID: fk.ID, Of: id, Step: 1, Trial: i + 1, Continuations: 4,
			OnDivergence: "stop", Status: model.ReplayReplaying, CreatedAt: parent.CreatedAt}))
		require.NoError(t, st.UpdateReplay(ctx, fk.ID, model.ReplayForked, 1, "", aa, ""))
	}
	require.NoError(t, st.Close())

	out, errOut, code := tine(t, db, "ls", "--json")
	require.Equal(t, 0, code, errOut)
	var runs []runJSON
	require.NoError(t, json.Unmarshal([]byte(out), &runs))
	var got *aaJSON
	for _, r := range runs {
		if r.ID == id {
			got = r.AA
		} else {
			assert.Nil(t, r.AA, "a replay itself has no rate of its own")
		}
	}
	require.NotNil(t, got)
	assert.Equal(t, aaJSON{Measured: 3, Reproduced: 2, Rate: 2.0 / 3}, *got)

	out, _, code = tine(t, db, "show", id, "--json")
	require.Equal(t, 0, code)
	var shown struct {
		AA *aaJSON `json:"aa"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &shown))
	require.NotNil(t, shown.AA)
	assert.Equal(t, 2, shown.AA.Reproduced)
	out, _, _ = tine(t, db, "show", id)
	assert.Contains(t, out, "A/A: 2 of 3 replays reproduced it")
	out, _, _ = tine(t, db, "ls")
	assert.Contains(t, out, "(A/A 2/3)")
}
