package openai_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/harness/fork"
	"tine/harness/openai"
	"tine/internal/modelserver"
	"tine/model"
	"tine/store"
)

// TestPartialAnswerIsStored: through the driver, a turn cut off mid-stream
// leaves a failed fork that holds the text streamed so far, a note saying
// it is partial, and an error that says so.
func TestPartialAnswerIsStored(t *testing.T) {
	srv := modelserver.New(modelserver.Options{})
	t.Cleanup(func() { srv.Close() })
	srv.Push(modelserver.Reply{Text: "this text is cut off before it ends", Fault: &modelserver.Fault{Kind: modelserver.FaultDrop, AfterEvents: 3}})
	st, err := store.Open(filepath.Join(t.TempDir(), "t.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	root := model.Run{Harness: "openai", Name: "root", Title: "seed"}
	require.NoError(t, st.CreateRun(ctx, &root, []model.Message{
		{Role: model.User, Parts: []model.Part{{Kind: model.Text, Text: "hello"}}},
		{Role: model.Assistant, Parts: []model.Part{{Kind: model.Text, Text: "hi"}}},
	}))
	h := openai.New(openai.Config{BaseURL: srv.URL() + "/v1", Model: "m", StallTimeout: 2 * time.Second})
	d := &fork.Driver{Store: st, Harnesses: harness.NewRegistry(h)}

	forks, _, err := d.Fork(ctx, fork.ForkSpec{Parent: root.ID, At: "end", Harness: "openai"})
	require.NoError(t, err)
	runs := d.RunTurns(ctx, []fork.Turn{{RunID: forks[0].ID, Input: "go on"}}, nil)
	require.Len(t, runs, 1)
	r := runs[0]
	assert.Equal(t, model.Failed, r.Status)
	assert.Contains(t, r.Error, "stream ended early")
	assert.Contains(t, r.Error, "kept as a partial answer")
	assert.Contains(t, r.Note, "the last answer is partial")
	msgs, _, err := st.Messages(ctx, r.ID)
	require.NoError(t, err)
	require.Len(t, msgs, 4, "hello, hi, go on, and the partial answer")
	last := msgs[3]
	assert.Equal(t, model.Assistant, last.Role)
	assert.NotEmpty(t, last.PlainText())
	assert.True(t, len(last.PlainText()) < len("this text is cut off before it ends"))
}
