package script

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/model"
)

func turn(t *testing.T, h *Harness, input string, prefix []model.Message) []model.Message {
	t.Helper()
	var got []model.Message
	err := h.Turn(context.Background(), harness.TurnRequest{Prefix: prefix, Input: input}, func(e harness.Event) {
		if e.Kind == harness.EventMessage {
			got = append(got, e.Message)
		}
	})
	require.NoError(t, err)
	return got
}

func TestTurnIsDeterministic(t *testing.T) {
	fixed := func() time.Time { return time.Unix(0, 0) }
	h := &Harness{Now: fixed}
	prefix := []model.Message{{Role: model.User, Parts: []model.Part{{Kind: model.Text, Text: "hi"}}}}
	a := turn(t, h, "explain the bug", prefix)
	b := turn(t, h, "explain the bug", prefix)
	assert.Equal(t, a, b)
	require.Len(t, a, 2)
	assert.Equal(t, model.User, a[0].Role)
	assert.Equal(t, model.Assistant, a[1].Role)
	assert.NotZero(t, a[1].Usage.OutputTokens)
	c := turn(t, h, "a different question", prefix)
	assert.NotEqual(t, a[1].PlainText(), c[1].PlainText())
}

func TestTurnWithToolsIsPairSafe(t *testing.T) {
	h := &Harness{}
	got := turn(t, h, "run the tests", nil)
	require.GreaterOrEqual(t, len(got), 4)
	assert.NotEmpty(t, got[1].ToolCalls())
	// Every boundary at the end of the turn is safe: all calls were answered.
	assert.Equal(t, len(got), model.Checkpoints(got)[len(model.Checkpoints(got))-1])
}

func TestTurnRegenerateUsesLastPrompt(t *testing.T) {
	h := &Harness{}
	prefix := []model.Message{{Role: model.User, Parts: []model.Part{{Kind: model.Text, Text: "what is a tree"}}}}
	got := turn(t, h, "", prefix)
	require.Len(t, got, 1)
	assert.Contains(t, got[0].PlainText(), "what is a tree")
}

func TestTurnCancels(t *testing.T) {
	h := &Harness{Delay: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := h.Turn(ctx, harness.TurnRequest{Input: "x"}, func(harness.Event) {})
	assert.ErrorIs(t, err, context.Canceled)
}

func TestRegistry(t *testing.T) {
	r := harness.NewRegistry(&Harness{})
	h, err := r.Get("script")
	require.NoError(t, err)
	assert.True(t, h.Capabilities().ForkAtK)
	_, err = r.Get("nope")
	assert.ErrorContains(t, err, `no harness "nope"`)
	assert.Equal(t, []string{"script"}, r.Names())
}
