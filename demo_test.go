package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness/fork"
	"tine/internal/modelserver"
	"tine/model"
	"tine/store"
	"tine/tui"
)

// TestDemoForksGoWhereTheForkScreenSays: in the demo, a fork through the
// openai harness goes to the base URL and key typed in the Fork screen
// (the TUI hands its turns to a background tine --demo), not to
// api.openai.com.
func TestDemoForksGoWhereTheForkScreenSays(t *testing.T) {
	t.Parallel()
	srv := quietServer(t)
	srv.Push(modelserver.Reply{Text: "Madrid: 27C, sunny."})
	dir := t.TempDir()
	st, err := store.Open(filepath.Join(dir, "demo.db"))
	require.NoError(t, err)
	defer st.Close()
	ctx := context.Background()
	require.NoError(t, loadDemo(ctx, st, dir))
	trees, err := st.Trees(ctx)
	require.NoError(t, err)
	var root model.Run
	for _, tr := range trees {
		if tr.Root.Harness == "openai" {
			root = tr.Root
		}
	}
	require.NotEmpty(t, root.ID, "the demo's model API chat")
	forks, _, err := demoDriver(st, apiFlags{}).Fork(ctx, fork.ForkSpec{Parent: root.ID, N: 1, Harness: "openai"})
	require.NoError(t, err)
	bg := tuiBackground{db: st.Path(), ag: agentFlags{demo: true}}
	job := tui.TurnsJob{Turns: []fork.Turn{{RunID: forks[0].ID, Input: "And Madrid?"}}, BaseURL: srv.URL() + "/v1", APIKey: "typed-key"}
	require.NoError(t, bg.Turns(ctx, job, func(fork.RunEvent) {}))
	r, err := st.Run(ctx, forks[0].ID)
	require.NoError(t, err)
	assert.Equal(t, model.Completed, r.Status, r.Error)
	reqs := srv.ModelRequests()
	require.Len(t, reqs, 1, "the call went to the typed base URL")
	assert.Equal(t, "gpt-4.1-mini", reqs[0].Model)
	assert.Equal(t, []string{"Bearer typed-key"}, reqs[0].Header["Authorization"])
	msgs, _, err := st.Messages(ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, "Madrid: 27C, sunny.", msgs[len(msgs)-1].PlainText())
}
