package acp

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/model"
)

// A next turn of a Gemini CLI session waits out the minute the session
// started in (loadResetsSameMinute); other agents, later minutes, new
// sessions and forks do not wait.
func TestAwaitLoadableWaitsOutTheSessionsMinute(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 2, 7, 4, 20, 0, time.UTC)
	first := []model.Message{{Role: model.User, Time: start}, {Role: model.Assistant, Time: start.Add(time.Second)}}
	next := harness.TurnRequest{Run: model.Run{NativeID: "s1", CreatedAt: start.Add(-time.Hour)}, Prefix: first, Input: "again"}
	cases := []struct {
		name  string
		agent string
		now   time.Time
		req   harness.TurnRequest
		wait  string // the note's wait, "" for none
	}{
		{"gemini, same minute", "gemini", start.Add(5 * time.Second), next, "36s"},
		{"gemini through a path", "/usr/local/bin/gemini", start.Add(30 * time.Second), next, "11s"},
		{"gemini, next minute", "gemini", start.Add(41 * time.Second), next, ""},
		{"another agent", "qwen", start.Add(5 * time.Second), next, ""},
		{"a new session", "gemini", start.Add(5 * time.Second), harness.TurnRequest{Input: "hi"}, ""},
		{"a handoff", "gemini", start.Add(5 * time.Second), harness.TurnRequest{Run: next.Run, Prefix: first, Handoff: "earlier: ..."}, ""},
		// A fork's own messages start after its inherited prefix: the
		// parent's older first message is not the session's start.
		{"a fork's own session", "gemini", start.Add(5 * time.Second), harness.TurnRequest{
			Run:    model.Run{NativeID: "s2", ForkAt: 1},
			Prefix: []model.Message{{Role: model.User, Time: start.Add(-time.Hour)}, {Role: model.User, Time: start}},
			Input:  "again"}, "36s"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := New(Config{Command: []string{c.agent, "--acp"}})
			h.now = func() time.Time { return c.now }
			var mu sync.Mutex
			var notes []string
			tr := &turn{h: h, req: c.req, out: newEmitter(func(e harness.Event) {
				mu.Lock()
				defer mu.Unlock()
				notes = append(notes, e.Note)
			})}
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // a wait ends with the context; none returns at once
			err := tr.awaitLoadable(ctx)
			tr.out.close()
			<-tr.out.done
			mu.Lock()
			defer mu.Unlock()
			if c.wait == "" {
				require.NoError(t, err)
				assert.Empty(t, notes)
				return
			}
			require.ErrorIs(t, err, context.Canceled)
			require.Len(t, notes, 1)
			assert.Contains(t, notes[0], "waiting "+c.wait+" before")
		})
	}
}
