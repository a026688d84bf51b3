package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/model"
	"tine/store"
)

// said is an event as a test reads it: "run <id> <status> <messages>
// [new] [error]" or "message <id> <k> <text>".
func said(t *testing.T, sub *subscriber) []string {
	t.Helper()
	var out []string
	for {
		select {
		case ev := <-sub.ch:
			switch ev.kind {
			case "run":
				var r RunEvent
				require.NoError(t, json.Unmarshal(ev.data, &r))
				line := fmt.Sprintf("run %s %s %d", r.Run, r.Status, r.Messages)
				if r.New {
					line += " new"
				}
				if r.Error != "" {
					line += " " + r.Error
				}
				out = append(out, line)
			case "message":
				var m MessageEvent
				require.NoError(t, json.Unmarshal(ev.data, &m))
				out = append(out, fmt.Sprintf("message %s %d %s", m.Run, m.Message.K, m.Message.Parts[0].Text))
			}
		default:
			return out
		}
	}
}

func texts(role model.Role, words ...string) []model.Message {
	var msgs []model.Message
	for _, w := range words {
		msgs = append(msgs, model.Message{Role: role, Parts: []model.Part{{Kind: model.Text, Text: w}}})
	}
	return msgs
}

// TestHubSaysWhatChanged: the hub, reading only the runs changed since it
// last read, says each change once, of the run it happened to and of no
// other: a status, new messages (each once, and a run seen before is
// never new again), a run another process made, and nothing when nothing
// changed. Each look is the hub's read, called here as its loop calls it.
func TestHubSaysWhatChanged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tine.db")
	st, err := store.Open(path)
	require.NoError(t, err)
	defer st.Close()
	a, b := model.Run{Harness: "script"}, model.Run{Harness: "script"}
	require.NoError(t, st.CreateRun(ctx, &a, texts(model.User, "a1", "a2")))
	require.NoError(t, st.CreateRun(ctx, &b, texts(model.User, "b1")))

	h := NewHub(st, time.Hour)
	sub := h.subscribe(ctx, nil, nil)
	defer h.unsubscribe(sub)
	assert.Empty(t, said(t, sub), "the runs as they were when the subscriber came")

	require.NoError(t, st.SetStatus(ctx, a.ID, model.Running, ""))
	h.read(ctx)
	assert.Equal(t, []string{"run " + a.ID + " running 2"}, said(t, sub), "a status")

	require.NoError(t, st.AppendMessages(ctx, a.ID, texts(model.Assistant, "a3")))
	h.read(ctx)
	assert.Equal(t, []string{"run " + a.ID + " running 3", "message " + a.ID + " 3 a3"}, said(t, sub), "a new message")

	require.NoError(t, st.SetStatus(ctx, b.ID, model.Failed, "boom"))
	h.read(ctx)
	assert.Equal(t, []string{"run " + b.ID + " failed 1 boom"}, said(t, sub), "another run's change, and only it")

	require.NoError(t, st.AppendMessages(ctx, a.ID, texts(model.User, "a4")))
	require.NoError(t, st.SetStatus(ctx, a.ID, model.Completed, ""))
	h.read(ctx)
	assert.Equal(t, []string{"run " + a.ID + " completed 4", "message " + a.ID + " 4 a4"}, said(t, sub),
		"the first run again: not new, and only its newest message")

	other, err := store.Open(path) // another process, as far as SQLite can tell
	require.NoError(t, err)
	defer other.Close()
	c := model.Run{Harness: "script"}
	require.NoError(t, other.CreateRun(ctx, &c, texts(model.User, "c1", "c2")))
	h.read(ctx)
	assert.Equal(t, []string{"run " + c.ID + " completed 2 new", "message " + c.ID + " 1 c1", "message " + c.ID + " 2 c2"}, said(t, sub),
		"a run another process made, with its messages")

	h.read(ctx)
	assert.Empty(t, said(t, sub), "nothing changed")
}
