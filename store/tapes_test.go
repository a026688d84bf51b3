package store

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/model"
)

func TestTapeSteps(t *testing.T) {
	t.Parallel()
	st, _ := openTemp(t)
	ctx := context.Background()
	r := model.Run{Harness: "claude"}
	require.NoError(t, st.CreateRun(ctx, &r, conversation(2, "t")))
	req := `{"messages":[]}`
	require.NoError(t, st.AddTapeStep(ctx, r.ID, model.TapeStep{Step: 2, Request: &req, Response: `{"b":1}`}))
	require.NoError(t, st.AddTapeStep(ctx, r.ID, model.TapeStep{Step: 1, Response: `{"a":1}`}))
	tape, err := st.Tape(ctx, r.ID)
	require.NoError(t, err)
	require.Len(t, tape, 2)
	assert.Equal(t, 1, tape[0].Step)
	assert.Nil(t, tape[0].Request, "a step without a request stays without one")
	require.NotNil(t, tape[1].Request)
	assert.Equal(t, req, *tape[1].Request)
}
