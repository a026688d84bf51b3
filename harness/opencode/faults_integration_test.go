//go:build agents

package opencode

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/internal/modelserver"
	"tine/model"
)

// TestGarbageBeforeTheEvents: lines that are not JSON are skipped, said
// in a note, and the turn goes on (a wrapper printing a banner).
func TestGarbageBeforeTheEvents(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.agent.cfg.Bin = shim(t, `echo "Warning: a banner"; echo "not json {"; exec `+realOpencode(t)+` "$@"`)
	w.srv.Push(onTurn(modelserver.Text("Fine.")))
	msgs, _, evs, err := w.turn(t, harness.TurnRequest{Run: model.Run{Harness: Harness, Cwd: w.repo}, Input: "hello", Dir: w.repo})
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	notes := ""
	for _, e := range evs {
		if e.Kind == harness.EventNote {
			notes += e.Note
		}
	}
	assert.Contains(t, notes, "skipped 2 lines")
}

// TestCancelMidStream: a turn cancelled while the model streams stops
// opencode at once and keeps what was emitted (the person's message).
func TestCancelMidStream(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.srv.Push(onTurn(modelserver.Reply{Text: strings.Repeat("slowly ", 200), ChunkDelay: 200 * time.Millisecond}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var msgs []model.Message
	done := make(chan error, 1)
	go func() {
		done <- w.agent.Turn(ctx, harness.TurnRequest{Run: model.Run{Harness: Harness, Cwd: w.repo}, Input: "go slow", Dir: w.repo, Permissions: harness.PermitAuto},
			func(e harness.Event) {
				if e.Kind == harness.EventMessage {
					msgs = append(msgs, e.Message)
				}
			})
	}()
	for start := time.Now(); time.Since(start) < 3*time.Minute; time.Sleep(100 * time.Millisecond) {
		if w.srv.Pending() == 0 {
			break // the model call is streaming
		}
	}
	time.Sleep(time.Second)
	cancel()
	select {
	case err := <-done:
		require.Error(t, err)
		assert.True(t, errors.Is(err, context.Canceled), "%v", err)
	case <-time.After(time.Minute):
		t.Fatal("opencode was not stopped")
	}
}

// TestModelServerDown: opencode's provider unreachable fails the turn
// with what opencode said, after its own retries.
func TestModelServerDown(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.srv.Close()
	_, _, _, err := w.turn(t, harness.TurnRequest{Run: model.Run{Harness: Harness, Cwd: w.repo}, Input: "anyone?", Dir: w.repo})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Cannot connect to API")
}
