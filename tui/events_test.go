package tui

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/harness/fork"
	"tine/model"
)

// chatty stores many messages, then runs until it is cancelled.
type chatty struct{ sent chan struct{} }

func (c *chatty) Name() string { return "chatty" }
func (c *chatty) Capabilities() harness.Capabilities {
	return harness.Capabilities{Fork: true, ForkAtK: true}
}
func (c *chatty) Turn(ctx context.Context, req harness.TurnRequest, emit func(harness.Event)) error {
	for i := range 150 {
		emit(harness.Event{Kind: harness.EventDelta, Delta: "piece "})
		emit(harness.Event{Kind: harness.EventMessage, Message: model.Message{Role: model.Assistant,
			Parts: []model.Part{{Kind: model.Text, Text: fmt.Sprint("line ", i)}}}})
	}
	close(c.sent)
	<-ctx.Done()
	return ctx.Err()
}

// TestQuitWhileForksStream: a screen that stops reading never blocks the
// driver, and quitting cancels the running turn through the program's
// context at once.
func TestQuitWhileForksStream(t *testing.T) {
	st := seedStore(t, 0)
	h := &chatty{sent: make(chan struct{})}
	drv := &fork.Driver{Store: st, Harnesses: harness.NewRegistry(h)}
	d := newDriverWith(t, st, 120, 30, drv)
	runs, _, err := drv.Fork(context.Background(), fork.ForkSpec{Parent: firstTree(t, st), At: model.ContinueFrom("end"), N: 1, Harness: "chatty"})
	require.NoError(t, err)
	// The turn starts; its listener is never run: the screen reads nothing.
	d.a.startTurns(1, drv, apiSettings{}, startWork{turns: []fork.Turn{{RunID: runs[0].ID, Input: "go"}}})
	select {
	case <-h.sent:
	case <-time.After(10 * time.Second):
		t.Fatal("the driver blocked on a screen that does not read")
	}
	start := time.Now()
	d.a.shutdown()
	assert.Less(t, time.Since(start), time.Second, "quitting cancels the turn and does not wait")
	r, err := st.Run(context.Background(), runs[0].ID)
	require.NoError(t, err)
	assert.Equal(t, model.Cancelled, r.Status)
}

// TestMailboxMergesPerRun: news piles up per run and is taken at once.
func TestMailboxMergesPerRun(t *testing.T) {
	m := newRunMailbox()
	m.put(fork.RunEvent{RunID: "a", Delta: "hello "})
	m.put(fork.RunEvent{RunID: "b", Status: model.Running})
	m.put(fork.RunEvent{RunID: "a", Delta: "world"})
	news, done := m.take()
	require.False(t, done)
	require.Len(t, news, 2)
	assert.Equal(t, runNews{runID: "a", tail: "hello world"}, news[0])
	assert.True(t, news[1].stored)
	m.put(fork.RunEvent{RunID: "a", Status: model.Failed, Err: fmt.Errorf("boom")})
	m.close()
	news, done = m.take()
	require.False(t, done)
	assert.Equal(t, model.Failed, news[0].status)
	_, done = m.take()
	assert.True(t, done)
}

// TestPanicInAGoroutineStopsTheProgram: a panic in one of the TUI's
// goroutines (a batch of turns, an import) is logged with its stack and
// stops the program, which restores the terminal, instead of killing the
// process with the terminal raw.
func TestPanicInAGoroutineStopsTheProgram(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	logPath, done := openLog()
	defer done()
	a := New(nil, Options{})
	a.logPath = logPath
	killed := make(chan struct{})
	a.kill = func() { close(killed) }
	a.goSafe("import", func() { panic("boom in an import") })
	select {
	case <-killed:
	case <-time.After(10 * time.Second):
		t.Fatal("the program was not stopped")
	}
	require.NotNil(t, a.crashed)
	assert.Contains(t, a.crashed.Error(), "boom in an import")
	assert.Contains(t, a.crashed.Error(), logPath)
	done()
	log, err := os.ReadFile(logPath)
	require.NoError(t, err)
	assert.Contains(t, string(log), "boom in an import")
	assert.Contains(t, string(log), "goroutine", "with its stack")
}
