package store

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/model"
)

// branchedFile is a session file holding a main line and an in-file
// branch (a rewind) after its first two messages; more adds messages to
// the main line, as a session that went on.
func branchedFile(more ...model.Message) []model.FileRun {
	main := []model.Message{nm(model.User, "u1", "q"), nm(model.Assistant, "a1", "a"), nm(model.User, "u2", "q2"), nm(model.Assistant, "a2", "a2")}
	return []model.FileRun{
		{Parent: -1, Run: model.Run{Harness: "claude", NativeID: "S1", Title: "session"}, Messages: append(main, more...)},
		{Parent: 0, Run: model.Run{Harness: "claude", NativeID: "S1", ForkAt: 2}, Messages: []model.Message{nm(model.User, "u3", "rewound"), nm(model.Assistant, "a3", "b")}},
	}
}

func treeRoots(t *testing.T, s *Store) []string {
	t.Helper()
	trees, err := s.Trees(context.Background())
	require.NoError(t, err)
	var roots []string
	for _, tr := range trees {
		if tr.Root.SpawnedBy == "" { // a subagent shows under its call
			roots = append(roots, tr.Root.ID)
		}
	}
	return roots
}

// TestRereadFileShowsOneTree: a file read again (it grew past a branch, or
// was rewritten) replaces its old runs; with an in-file branch the old
// tree used to stay listed next to the new one, its branch counting as a
// fork of the hidden root.
func TestRereadFileShowsOneTree(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	_, err := s.ImportFile(ctx, src("/s.jsonl"), branchedFile())
	require.NoError(t, err)
	require.NoError(t, s.RetireSource(ctx, "/s.jsonl"))
	created, err := s.ImportFile(ctx, src("/s.jsonl"), branchedFile(nm(model.User, "u4", "more")))
	require.NoError(t, err)

	assert.Equal(t, []string{created[0].ID}, treeRoots(t, s), "one tree: the file's new one")
	runs, err := s.Runs(ctx)
	require.NoError(t, err)
	assert.Len(t, runs, 2, "the old runs, which nothing needs, are gone")
	trees, err := s.Trees(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, trees[0].Forks)
	assert.Equal(t, 7, trees[0].Messages)
}

// TestRereadFileKeepsItsForks: forks made from a file's old runs (tine's,
// subagents it spawned) move onto the new runs holding the same prefix.
func TestRereadFileKeepsItsForks(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	old, err := s.ImportFile(ctx, src("/s.jsonl"), branchedFile())
	require.NoError(t, err)
	fork := model.Run{ParentID: old[1].ID, ForkAt: 3, Harness: "script", Name: "mine"}
	require.NoError(t, s.CreateForks(ctx, []*model.Run{&fork}))
	require.NoError(t, s.AppendMessages(ctx, fork.ID, []model.Message{nm(model.User, "", "my own")}))
	sub := []model.FileRun{{Parent: -1, Run: model.Run{Harness: "claude", NativeID: "agent-x"},
		Messages: []model.Message{nm(model.User, "x1", "task")},
		Link:     &model.Link{Kind: model.LinkSubagent, Harness: "claude", ParentSession: "S1", ToolCall: "toolu_1"}}}
	_, err = s.ImportFile(ctx, src("/agent-x.jsonl"), sub)
	require.NoError(t, err)
	sr, err := s.Resolve(ctx, "agent-x")
	require.NoError(t, err)
	require.Equal(t, old[0].ID, sr.SpawnedBy)

	require.NoError(t, s.RetireSource(ctx, "/s.jsonl"))
	created, err := s.ImportFile(ctx, src("/s.jsonl"), branchedFile(nm(model.User, "u4", "more")))
	require.NoError(t, err)

	assert.Equal(t, []string{created[0].ID}, treeRoots(t, s), "one tree: the file's new one, holding the fork")
	f, err := s.Run(ctx, fork.ID)
	require.NoError(t, err)
	assert.Equal(t, created[1].ID, f.ParentID, "the fork moved to the new branch")
	assert.Equal(t, created[0].ID, f.TreeID)
	msgs, inherited, err := s.Messages(ctx, fork.ID)
	require.NoError(t, err)
	assert.Equal(t, 3, inherited)
	assert.Equal(t, []string{"q", "a", "rewound", "my own"}, []string{msgs[0].PlainText(), msgs[1].PlainText(), msgs[2].PlainText(), msgs[3].PlainText()})
	sr, err = s.Resolve(ctx, "agent-x")
	require.NoError(t, err)
	assert.Equal(t, created[0].ID, sr.SpawnedBy, "the subagent hangs under the new run")
	assert.Equal(t, "toolu_1", sr.SpawnedCall)
	_, err = s.Run(ctx, old[0].ID)
	assert.ErrorIs(t, err, ErrNotFound, "the old runs are gone")
}

// TestRereadFileKeepsWhatAForkNeeds: when the file was rewritten so that a
// fork's prefix is no longer in it, the fork stays on the old runs, which
// stay stored (hidden) for it.
func TestRereadFileKeepsWhatAForkNeeds(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	old, err := s.ImportFile(ctx, src("/s.jsonl"), branchedFile())
	require.NoError(t, err)
	fork := model.Run{ParentID: old[0].ID, ForkAt: 4, Harness: "script", Name: "mine"}
	require.NoError(t, s.CreateForks(ctx, []*model.Run{&fork}))
	require.NoError(t, s.RetireSource(ctx, "/s.jsonl"))
	other := []model.FileRun{{Parent: -1, Run: model.Run{Harness: "claude", NativeID: "S1"}, Messages: []model.Message{nm(model.User, "v1", "a different start")}}}
	created, err := s.ImportFile(ctx, src("/s.jsonl"), other)
	require.NoError(t, err)
	f, err := s.Run(ctx, fork.ID)
	require.NoError(t, err)
	assert.Equal(t, old[0].ID, f.ParentID)
	r, err := s.Run(ctx, old[0].ID)
	require.NoError(t, err)
	assert.True(t, r.Hidden)
	_, err = s.Run(ctx, old[1].ID)
	assert.ErrorIs(t, err, ErrNotFound, "the old branch, which no fork needs, is gone")
	assert.ElementsMatch(t, []string{created[0].ID, old[0].ID}, treeRoots(t, s))
}
